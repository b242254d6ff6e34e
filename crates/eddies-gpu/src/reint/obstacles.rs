//! Obstacles after the advance: particles next to an obstacle kept out of it (`obstacles.wgsl`).

use super::Buffers;
use crate::device::{dispatch, Gpu, GpuError};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("obstacles.wgsl");

/// The obstacle kernel over the fluid cells next to an obstacle, bound to each of the two mass buffers.
pub(super) struct Obstacles {
    pipeline: std::sync::Arc<wgpu::ComputePipeline>,
    bind: [wgpu::BindGroup; 2],
    /// Fluid cells next to an obstacle.
    pub count: u32,
}

impl Obstacles {
    pub fn new(
        gpu: &Gpu,
        prelude: &str,
        variant: &str,
        b: &Buffers,
        count: u32,
    ) -> Result<Self, GpuError> {
        let pipeline = gpu.pipeline(&format!("reint obstacles {variant}"), prelude, SOURCE)?;
        let bind = std::array::from_fn(|cur| {
            gpu.bind(
                &pipeline,
                &[&b.params, &b.near, &b.mass[cur], &b.fluid, &b.advanced],
            )
        });
        Ok(Self {
            pipeline,
            bind,
            count,
        })
    }

    pub fn encode(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        cur: usize,
        timestamps: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        let groups = [self.count.div_ceil(super::LIST_WORKGROUP), 1, 1];
        dispatch(
            encoder,
            "obstacles",
            &self.pipeline,
            &self.bind[cur],
            groups,
            timestamps,
        );
    }
}
