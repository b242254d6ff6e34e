//! Stage "reintegrate": the gather of every cell's new particle (`gather.wgsl`).

use super::Buffers;
use crate::device::{dispatch, Gpu, GpuError};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("gather.wgsl");

/// The gather kernel, bound to each of the two mass buffers (reading one, writing the other).
pub(super) struct Gather {
    pipeline: std::sync::Arc<wgpu::ComputePipeline>,
    bind: [wgpu::BindGroup; 2],
    grid: [u32; 3],
}

impl Gather {
    pub fn new(
        gpu: &Gpu,
        prelude: &str,
        variant: &str,
        b: &Buffers,
        grid: [u32; 3],
    ) -> Result<Self, GpuError> {
        let pipeline = gpu.pipeline(&format!("reint gather {variant}"), prelude, SOURCE)?;
        let bind = std::array::from_fn(|cur| {
            gpu.bind(
                &pipeline,
                &[
                    &b.params,
                    &b.advanced,
                    &b.mass[cur],
                    &b.book,
                    &b.fluid,
                    &b.motion,
                    &b.mass[1 - cur],
                    &b.partials,
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
            "gather",
            &self.pipeline,
            &self.bind[cur],
            self.grid,
            timestamps,
        );
    }
}
