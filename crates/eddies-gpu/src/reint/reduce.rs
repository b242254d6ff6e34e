//! The step's diagnostics from the workgroups' partial sums, in a fixed order, into the device log
//! (`reduce.wgsl`).

use super::Buffers;
use crate::device::{dispatch, Gpu, GpuError};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("reduce.wgsl");

/// The reduction kernel: one workgroup.
pub(super) struct Reduce {
    pipeline: std::sync::Arc<wgpu::ComputePipeline>,
    bind: wgpu::BindGroup,
}

impl Reduce {
    pub fn new(gpu: &Gpu, prelude: &str, variant: &str, b: &Buffers) -> Result<Self, GpuError> {
        let pipeline = gpu.pipeline(&format!("reint reduce {variant}"), prelude, SOURCE)?;
        let bind = gpu.bind(&pipeline, &[&b.params, &b.partials, &b.log, &b.exchange]);
        Ok(Self { pipeline, bind })
    }

    pub fn encode(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        timestamps: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        dispatch(
            encoder,
            "reduce",
            &self.pipeline,
            &self.bind,
            [1, 1, 1],
            timestamps,
        );
    }
}
