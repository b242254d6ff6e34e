//! Stages "density", "forces" and "advance", fused into one kernel (`forces.wgsl`), with the
//! bookkeeping away from obstacles.

use super::Buffers;
use crate::device::{dispatch, Gpu, GpuError};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("forces.wgsl");

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
        let pipeline = gpu.pipeline(&format!("reint forces {variant}"), prelude, SOURCE)?;
        // Away from obstacles the kernel also writes the bookkeeping (next to them the binding is there,
        // unused).
        let bind = std::array::from_fn(|cur| {
            gpu.bind(
                &pipeline,
                &[
                    &b.params,
                    &b.motion,
                    &b.mass[cur],
                    &b.advanced,
                    &b.partials,
                    &b.book,
                ],
            )
        });
        Ok(Self {
            pipeline,
            bind,
            grid,
        })
    }

    pub fn encode(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        cur: usize,
        timestamps: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        dispatch(
            encoder,
            "forces",
            &self.pipeline,
            &self.bind[cur],
            self.grid,
            timestamps,
        );
    }
}
