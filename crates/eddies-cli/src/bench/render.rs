//! `eddies bench render`: a 1280 × 720 picture of a 128³ liquid surface and of a 128³ smoke volume, on the
//! CPU path and (with `--backend gpu`) through wgpu; the preparation (the sun's transmittance volume and
//! the brick flags, on the CPU either way) and the ray marching apart.

use std::sync::Arc;
use std::time::Instant;

use eddies_render::{
    render_cpu, Albedo, Camera, GpuRenderer, Grid, Layer, Prepared, Smoke, Stage, Surface,
};

use super::case::{median, time, BenchCase, BenchError, BenchRow, CPU};
use crate::setup;

/// Picture size of the figures.
const PIXELS: [u32; 2] = [1280, 720];

/// The CPU cases.
pub fn cases() -> Vec<BenchCase> {
    vec![
        // A dam break's liquid (a column, a pool and a falling drop as one level set) at 128³ (quick: 48³),
        // 1280 × 720 on the CPU path
        BenchCase {
            name: "render-liquid",
            run: |q| liquid(q, false),
        },
        // A smoke plume (a column of lumps of varying density) at 128³ (quick: 48³), 1280 × 720 on the CPU
        BenchCase {
            name: "render-smoke",
            run: |q| smoke(q, false),
        },
    ]
}

/// The GPU cases (`--backend gpu`): the same pictures through wgpu.
pub fn gpu_cases() -> Vec<BenchCase> {
    vec![
        // The liquid picture above through wgpu on the GPU
        BenchCase {
            name: "render-liquid",
            run: |q| liquid(q, true),
        },
        // The smoke picture above through wgpu on the GPU
        BenchCase {
            name: "render-smoke",
            run: |q| smoke(q, true),
        },
    ]
}

fn grid(quick: bool) -> Grid {
    let n = if quick { 48 } else { 128 };
    Grid {
        n: [n; 3],
        origin: [0.0; 3],
        cell: 1.0 / n as f32,
    }
}

fn centre(grid: Grid, i: usize) -> [f32; 3] {
    let n = grid.n;
    let c = [i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1])];
    std::array::from_fn(|a| (c[a] as f32 + 0.5) * grid.cell)
}

fn liquid(quick: bool, gpu: bool) -> Result<Vec<BenchRow>, BenchError> {
    let grid = grid(quick);
    let values = (0..grid.cells())
        .map(|i| {
            let p = centre(grid, i);
            let column = (0.3 - p[0]).min(0.7 - p[1]);
            let pool = 0.15 - p[1];
            let drop =
                0.1 - ((p[0] - 0.65).powi(2) + (p[1] - 0.55).powi(2) + (p[2] - 0.5).powi(2)).sqrt();
            column.max(pool).max(drop)
        })
        .collect();
    let stage = Stage {
        grid,
        up: [0.0, 1.0, 0.0],
        liquid: Some(Surface {
            layer: Layer {
                values,
                level: 0.0,
                outside: -0.5 * grid.cell,
                width: grid.cell,
                distance: true,
            },
            albedo: Albedo::Uniform([0.2, 0.45, 0.8]),
        }),
        solid: None,
        smoke: None,
        floor: true,
    };
    measure("render-liquid", &stage, gpu)
}

fn smoke(quick: bool, gpu: bool) -> Result<Vec<BenchRow>, BenchError> {
    let grid = grid(quick);
    let extinction = (0..grid.cells())
        .map(|i| {
            let p = centre(grid, i);
            let r = ((p[0] - 0.5).powi(2) + (p[2] - 0.5).powi(2)).sqrt();
            let width = 0.08 + 0.15 * p[1];
            let lumps = 1.0 + 0.5 * (23.0 * p[1]).sin() * (17.0 * p[0]).cos() * (19.0 * p[2]).sin();
            (40.0 * lumps * (1.0 - r / width)).max(0.0)
        })
        .collect();
    let stage = Stage {
        grid,
        up: [0.0, 1.0, 0.0],
        liquid: None,
        solid: None,
        smoke: Some(Smoke {
            extinction,
            albedo: Albedo::Uniform([0.92, 0.86, 0.78]),
        }),
        floor: true,
    };
    measure("render-smoke", &stage, gpu)
}

/// Times the preparation and the picture (median of 5 after a warm-up), as rows.
fn measure(name: &str, stage: &Stage, gpu: bool) -> Result<Vec<BenchRow>, BenchError> {
    let [w, h] = PIXELS;
    let camera = Camera::framing(stage.grid.origin, stage.grid.max(), stage.up, w, h);
    let view = camera
        .view(w, h)
        .map_err(|e| BenchError::Output(e.to_string()))?;
    let prepare = time(5, || {
        let _ = Prepared::new(stage);
    });
    let prepared = Prepared::new(stage).map_err(|e| BenchError::Output(e.to_string()))?;
    let (picture, device) = if gpu {
        let gpu = setup::gpu()?;
        let mut renderer = GpuRenderer::new(Arc::clone(&gpu));
        let mut failure = None;
        let mut samples = Vec::new();
        for k in 0..6 {
            let t = Instant::now();
            if let Err(e) = renderer.render(&prepared, &view) {
                failure = Some(e);
                break;
            }
            if k > 0 {
                samples.push(t.elapsed().as_secs_f64());
            }
        }
        if let Some(e) = failure {
            return Err(BenchError::Output(e.to_string()));
        }
        (median(&mut samples), gpu.adapter().name.clone())
    } else {
        (
            time(5, || {
                let _ = render_cpu(&prepared, &view);
            }),
            CPU.to_string(),
        )
    };
    let size = format!("{}^3 {w}x{h}", stage.grid.n[0]);
    let row = |metric: &str, value: f64, device: &str| BenchRow {
        bench: name.to_string(),
        size: size.clone(),
        metric: metric.to_string(),
        value,
        unit: "ms".to_string(),
        threads: rayon::current_num_threads(),
        device: device.to_string(),
    };
    Ok(vec![
        row("prepare", prepare * 1e3, CPU),
        row("picture", picture * 1e3, &device),
    ])
}
