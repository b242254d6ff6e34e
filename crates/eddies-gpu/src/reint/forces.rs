//! Stages "density", "forces" and "advance", fused into one kernel (`forces.wgsl`).

use super::Buffers;
use crate::device::{Gpu, GpuError};

/// The fused force-and-advance kernel, bound to each of the two mass buffers.
pub(super) struct Forces {
    pipeline: std::sync::Arc<wgpu::ComputePipeline>,
    bind: [wgpu::BindGroup; 2],
    grid: [u32; 3],
}

impl Forces {
    pub fn new(
        gpu: &Gpu,
        prelude: &str,
        variant: &str,
        b: &Buffers,
        grid: [u32; 3],
    ) -> Result<Self, GpuError> {
        let pipeline = gpu.pipeline(
            &format!("reint forces {variant}"),
            prelude,
            include_str!("forces.wgsl"),
        )?;
        let bind = std::array::from_fn(|cur| {
            gpu.bind(
                &pipeline,
                &[&b.params, &b.motion, &b.mass[cur], &b.advanced, &b.partials],
            )
        });
        Ok(Self {
            pipeline,
            bind,
            grid,
        })
    }

    pub fn encode(&self, encoder: &mut wgpu::CommandEncoder, cur: usize) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("forces"),
            timestamp_writes: None,
        });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind[cur], &[]);
        pass.dispatch_workgroups(self.grid[0], self.grid[1], self.grid[2]);
    }
}
