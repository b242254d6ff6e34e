//! The ray marcher on a GPU through wgpu: one kernel (`render.wgsl`), a thread per pixel, on the device
//! layer of the GPU backend.

use std::sync::Arc;

use eddies_gpu::{Gpu, GpuError};
use image::RgbImage;

use crate::camera::View;
use crate::cpu::wgsl_constants;
use crate::prepared::Prepared;
use crate::stage::Params;
use crate::RenderError;

const SOURCE: &str = include_str!("render.wgsl");

/// Pixels per workgroup side (`@workgroup_size(8, 8, 1)` in the kernel).
const WORKGROUP: u32 = 8;

/// Renders on a GPU; keeps its buffers between pictures of the same sizes.
pub struct GpuRenderer {
    gpu: Arc<Gpu>,
    buffers: Option<Buffers>,
}

/// The kernel's buffers, for one set of array lengths.
struct Buffers {
    lengths: [usize; 8],
    params: wgpu::Buffer,
    arrays: [wgpu::Buffer; 7],
    pixels: wgpu::Buffer,
    bind: wgpu::BindGroup,
}

impl GpuRenderer {
    /// A renderer on `gpu` (shared with a simulation, or opened for pictures alone).
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Self { gpu, buffers: None }
    }

    /// The adapter's name.
    pub fn adapter_name(&self) -> String {
        self.gpu.adapter().name.clone()
    }

    /// Whether the adapter is a software rasteriser (Mesa's lavapipe, WARP, SwiftShader), where
    /// [`crate::render_cpu`] is usually faster.
    pub fn is_software(&self) -> bool {
        self.gpu.adapter().software
    }

    /// Renders `prepared` seen through `view`.
    ///
    /// # Errors
    /// The device failed or refused a buffer.
    pub fn render(&mut self, prepared: &Prepared, view: &View) -> Result<RgbImage, RenderError> {
        let gpu = self.gpu.clone();
        let params = prepared.params_for(view);
        let arrays: [&[u8]; 7] = [
            bytemuck::cast_slice(&prepared.liquid),
            bytemuck::cast_slice(&prepared.solid),
            bytemuck::cast_slice(&prepared.smoke),
            bytemuck::cast_slice(&prepared.liquid_albedo),
            bytemuck::cast_slice(&prepared.smoke_albedo),
            bytemuck::cast_slice(&prepared.shadow),
            bytemuck::cast_slice(&prepared.bricks),
        ];
        let pixel_bytes = 4 * view.width as usize * view.height as usize;
        let mut lengths = [0; 8];
        for (l, a) in lengths.iter_mut().zip(&arrays) {
            *l = a.len();
        }
        lengths[7] = pixel_bytes;
        let stale = self.buffers.as_ref().is_none_or(|b| b.lengths != lengths);
        if stale {
            self.buffers = Some(self.allocate(lengths)?);
        }
        let b = self.buffers.as_ref().expect("allocated above");
        gpu.write(&b.params, &[params]);
        for (buffer, bytes) in b.arrays.iter().zip(arrays) {
            gpu.write(buffer, bytes);
        }
        let pipeline = self.pipeline()?;
        let mut encoder = gpu.device().create_command_encoder(&Default::default());
        let groups = eddies_gpu::groups([view.width, view.height, 1], [WORKGROUP, WORKGROUP, 1]);
        eddies_gpu::dispatch(&mut encoder, "render", &pipeline, &b.bind, groups, None);
        gpu.queue().submit([encoder.finish()]);
        let bytes = gpu
            .read(&[(&b.pixels, 0, pixel_bytes as u64)])?
            .pop()
            .expect("one range read");
        gpu.take_error()?;
        let mut rgb = Vec::with_capacity(3 * view.width as usize * view.height as usize);
        for px in bytes.chunks_exact(4) {
            rgb.extend_from_slice(&px[..3]);
        }
        Ok(RgbImage::from_raw(view.width, view.height, rgb).expect("width × height × 3 bytes"))
    }

    fn pipeline(&self) -> Result<Arc<wgpu::ComputePipeline>, GpuError> {
        self.gpu.pipeline("render", &wgsl_constants(), SOURCE)
    }

    fn allocate(&self, lengths: [usize; 8]) -> Result<Buffers, RenderError> {
        let gpu = &self.gpu;
        let names = [
            "liquid",
            "solid",
            "smoke",
            "liquid colours",
            "smoke colours",
            "shadow",
            "bricks",
            "pixels",
        ];
        for (name, &bytes) in names.iter().zip(&lengths) {
            gpu.check_binding(&format!("the picture's {name}"), bytes as u64)?;
        }
        let pipeline = self.pipeline()?;
        let buffers = gpu.allocating("the picture's buffers", || {
            let params = gpu.uniform::<Params>("render params");
            let arrays: [wgpu::Buffer; 7] =
                std::array::from_fn(|k| gpu.buffer(names[k], lengths[k] as u64));
            let pixels = gpu.buffer("pixels", lengths[7] as u64);
            (params, arrays, pixels)
        })?;
        let (params, arrays, pixels) = buffers;
        let bind = gpu.validating("the picture's bindings", || {
            let mut all: Vec<&wgpu::Buffer> = vec![&params];
            all.extend(arrays.iter());
            all.push(&pixels);
            Ok(gpu.bind(&pipeline, &all))
        })?;
        Ok(Buffers {
            lengths,
            params,
            arrays,
            pixels,
            bind,
        })
    }
}

#[cfg(test)]
mod tests {
    /// The kernel with its constants compiles and validates, without a GPU.
    #[test]
    fn the_kernel_validates() {
        let code = format!("{}\n{}", super::wgsl_constants(), super::SOURCE);
        eddies_gpu::validate_wgsl(&code).unwrap_or_else(|e| panic!("{e}"));
    }
}
