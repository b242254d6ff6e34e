//! A push on the fluid (`impulse.wgsl`), submitted on its own.

use super::Buffers;
use crate::device::{dispatch, Gpu, GpuError};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("impulse.wgsl");

/// The push's constants (`Push` in `impulse.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct Push {
    centre: [f32; 4],
    velocity: [f32; 4],
    radius: f32,
    pad: [f32; 3],
}

/// The impulse kernel.
pub(super) struct Impulse {
    pipeline: std::sync::Arc<wgpu::ComputePipeline>,
    push: wgpu::Buffer,
    bind: wgpu::BindGroup,
    grid: [u32; 3],
}

impl Impulse {
    pub fn new(
        gpu: &Gpu,
        prelude: &str,
        variant: &str,
        b: &Buffers,
        grid: [u32; 3],
    ) -> Result<Self, GpuError> {
        let pipeline = gpu.pipeline(&format!("reint impulse {variant}"), prelude, SOURCE)?;
        let push = gpu.uniform::<Push>("push");
        let bind = gpu.bind(&pipeline, &[&b.params, &push, &b.motion]);
        Ok(Self {
            pipeline,
            push,
            bind,
            grid,
        })
    }

    /// Pushes the fluid within `radius` of `centre` (cells) by `velocity` (cells/s), weighted.
    pub fn run(&self, gpu: &Gpu, centre: [f32; 3], velocity: [f32; 3], radius: f32) {
        let push = Push {
            centre: [centre[0], centre[1], centre[2], 0.0],
            velocity: [velocity[0], velocity[1], velocity[2], 0.0],
            radius,
            pad: [0.0; 3],
        };
        gpu.write(&self.push, &[push]);
        let mut encoder = gpu.device().create_command_encoder(&Default::default());
        dispatch(
            &mut encoder,
            "impulse",
            &self.pipeline,
            &self.bind,
            self.grid,
            None,
        );
        gpu.queue().submit([encoder.finish()]);
    }
}
