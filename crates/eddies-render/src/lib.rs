//! Pictures of 3D fluids: what a film or a game would show, not an analysis view.
//!
//! A [`Stage`] holds what is drawn, all on one regular grid: a liquid as the iso-surface of a field (a
//! density or a level set), obstacles as another iso-surface, smoke or dye as a volume of extinction. A
//! [`Camera`] looks at it. [`render`] ray-marches the picture, on the GPU through wgpu ([`GpuRenderer`],
//! sharing the device layer of the GPU backend) or on the CPU ([`render_cpu`]); both follow the same
//! steps with the same constants:
//!
//! 1. a ray per pixel through the grid's box, skipping 8³ bricks that hold nothing;
//! 2. surfaces found where the field crosses its level (bisection), shaded with the field's gradient as
//!    normal: ambient light, a sun with its shadow, a highlight;
//! 3. smoke composited front to back with single scattering of the sun, dimmed by its shadow;
//! 4. behind everything, a tiled floor under the domain with the shadows of what stands on it, and the
//!    domain's edges drawn faintly, for depth and scale.
//!
//! Shadows come from one transmittance volume (the sun's light reaching each cell), swept once per picture
//! layer by layer from the sun's side ([`light`]).

mod camera;
mod cpu;
mod gpu;
pub mod light;
mod prepared;
mod stage;

pub use camera::{Camera, View, DEFAULT_FOV_Y};
pub use cpu::{look, render_cpu, srgb8};
pub use gpu::GpuRenderer;
pub use prepared::Prepared;
pub use stage::{Albedo, Grid, Layer, Smoke, Stage, Surface};

use image::RgbImage;

/// Why a picture could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The stage is inconsistent (an array of the wrong length, an empty grid).
    #[error("{0}")]
    Stage(String),
    /// The camera cannot see (position on its target, zero field of view, no pixels).
    #[error("{0}")]
    Camera(String),
    /// The GPU failed.
    #[error(transparent)]
    Gpu(#[from] eddies_gpu::GpuError),
}

/// Where pictures are ray-marched.
pub enum Renderer {
    /// On the CPU, on all its cores.
    Cpu,
    /// On a GPU through wgpu.
    Gpu(Box<GpuRenderer>),
}

impl Renderer {
    /// Renders `stage` seen by `camera` as a `width` × `height` sRGB picture.
    ///
    /// # Errors
    /// An inconsistent stage, a camera that cannot see, or a GPU failure.
    pub fn render(
        &mut self,
        stage: &Stage,
        camera: &Camera,
        width: u32,
        height: u32,
    ) -> Result<RgbImage, RenderError> {
        let prepared = Prepared::new(stage)?;
        let view = camera.view(width, height)?;
        match self {
            Renderer::Cpu => Ok(render_cpu(&prepared, &view)),
            Renderer::Gpu(gpu) => gpu.render(&prepared, &view),
        }
    }

    /// The name of what renders: "CPU" or the GPU adapter's name.
    pub fn name(&self) -> String {
        match self {
            Renderer::Cpu => "CPU".into(),
            Renderer::Gpu(gpu) => gpu.adapter_name(),
        }
    }
}
