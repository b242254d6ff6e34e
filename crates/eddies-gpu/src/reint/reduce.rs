//! The step's diagnostics from the workgroups' partial sums, in a fixed order, into the device log
//! (`reduce.wgsl`).

use super::Buffers;
use crate::device::{Gpu, GpuError};

/// The reduction kernel: one workgroup.
pub(super) struct Reduce {
    pipeline: std::sync::Arc<wgpu::ComputePipeline>,
    bind: wgpu::BindGroup,
}

impl Reduce {
    pub fn new(gpu: &Gpu, prelude: &str, variant: &str, b: &Buffers) -> Result<Self, GpuError> {
        let pipeline = gpu.pipeline(
            &format!("reint reduce {variant}"),
            prelude,
            include_str!("reduce.wgsl"),
        )?;
        let bind = gpu.bind(&pipeline, &[&b.params, &b.partials, &b.log, &b.exchange]);
        Ok(Self { pipeline, bind })
    }

    pub fn encode(&self, encoder: &mut wgpu::CommandEncoder) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("reduce"),
            timestamp_writes: None,
        });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
}
