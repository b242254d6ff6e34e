//! The bookkeeping pass that makes mass exact (`normalise.wgsl`).

use super::Buffers;
use crate::device::{dispatch, Gpu, GpuError};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("normalise.wgsl");

/// The bookkeeping kernel, bound to each of the two mass buffers.
pub(super) struct Normalise {
    pipeline: std::sync::Arc<wgpu::ComputePipeline>,
    bind: [wgpu::BindGroup; 2],
    grid: [u32; 3],
}

impl Normalise {
    pub fn new(
        gpu: &Gpu,
        prelude: &str,
        variant: &str,
        b: &Buffers,
        grid: [u32; 3],
    ) -> Result<Self, GpuError> {
        let pipeline = gpu.pipeline(&format!("reint normalise {variant}"), prelude, SOURCE)?;
        let bind = std::array::from_fn(|cur| {
            gpu.bind(
                &pipeline,
                &[&b.params, &b.advanced, &b.mass[cur], &b.book, &b.fluid],
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
            "normalise",
            &self.pipeline,
            &self.bind[cur],
            self.grid,
            timestamps,
        );
    }
}
