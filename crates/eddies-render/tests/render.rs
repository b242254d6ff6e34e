//! Pictures against analytic images, and the GPU against the CPU. GPU tests skip with a notice where there
//! is no adapter, unless `EDDIES_REQUIRE_GPU=1` (as CI sets it), when they fail.

use std::sync::{Arc, OnceLock};

use eddies_gpu::Gpu;
use eddies_render::{
    look, render_cpu, srgb8, Albedo, Camera, GpuRenderer, Grid, Layer, Prepared, Smoke, Stage,
    Surface,
};

fn gpu() -> Option<Arc<Gpu>> {
    static GPU: OnceLock<Option<Arc<Gpu>>> = OnceLock::new();
    GPU.get_or_init(|| eddies_gpu::device_or_skip().map(Arc::new))
        .clone()
}

const N: usize = 48;
const CENTRE: [f32; 3] = [0.5, 0.5, 0.5];
const RADIUS: f32 = 0.3;

fn grid() -> Grid {
    Grid {
        n: [N; 3],
        origin: [0.0; 3],
        cell: 1.0 / N as f32,
    }
}

fn centres(grid: Grid) -> impl Iterator<Item = [f32; 3]> {
    let n = grid.n;
    (0..grid.cells()).map(move |i| {
        let c = [i % n[0], (i / n[0]) % n[1], i / (n[0] * n[1])];
        std::array::from_fn(|a| grid.origin[a] + (c[a] as f32 + 0.5) * grid.cell)
    })
}

/// A sphere as a level set (positive inside), lit by the sun, no floor.
fn sphere(colour: [f32; 3]) -> Stage {
    let grid = grid();
    let values = centres(grid)
        .map(|p| {
            let r = (0..3)
                .map(|a| (p[a] - CENTRE[a]).powi(2))
                .sum::<f32>()
                .sqrt();
            RADIUS - r
        })
        .collect();
    Stage {
        grid,
        up: [0.0, 1.0, 0.0],
        liquid: Some(Surface {
            layer: Layer {
                values,
                level: 0.0,
                outside: -grid.cell,
                width: grid.cell,
                distance: true,
            },
            albedo: Albedo::Uniform(colour),
        }),
        solid: None,
        smoke: None,
        floor: false,
    }
}

fn camera() -> Camera {
    Camera {
        position: [0.5, 0.5, 2.5],
        target: CENTRE,
        fov_y: 30.0,
        up: [0.0, 1.0, 0.0],
    }
}

fn dot(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn normalize(a: [f32; 3]) -> [f32; 3] {
    let l = dot(a, a).sqrt();
    a.map(|v| v / l)
}

/// Where the ray of pixel (x, y) meets the analytic sphere: the distance from the sphere's centre to the
/// ray, and the hit point's outward normal when it hits.
fn analytic(view: &eddies_render::View, x: u32, y: u32) -> (f32, Option<[f32; 3]>) {
    let d = view.ray(x, y);
    let oc: [f32; 3] = std::array::from_fn(|a| CENTRE[a] - view.eye[a]);
    let along = dot(oc, d);
    let miss2 = dot(oc, oc) - along * along;
    let miss = miss2.max(0.0).sqrt();
    if miss >= RADIUS {
        return (miss, None);
    }
    let t = along - (RADIUS * RADIUS - miss2).sqrt();
    let hit: [f32; 3] = std::array::from_fn(|a| view.eye[a] + t * d[a]);
    (
        miss,
        Some(normalize(std::array::from_fn(|a| hit[a] - CENTRE[a]))),
    )
}

#[test]
fn a_sphere_has_its_analytic_silhouette() {
    let (w, h) = (160, 120);
    let cam = camera();
    let view = cam.view(w, h).unwrap();
    let with = render_cpu(&Prepared::new(&sphere([0.8; 3])).unwrap(), &view);
    let mut empty = sphere([0.8; 3]);
    empty.liquid = None;
    let without = render_cpu(&Prepared::new(&empty).unwrap(), &view);
    let cell = grid().cell;
    let (mut inside, mut wrong) = (0, 0);
    for y in 0..h {
        for x in 0..w {
            let covered = with.get_pixel(x, y) != without.get_pixel(x, y);
            let (miss, _) = analytic(&view, x, y);
            // Within a cell of the silhouette the discrete level set may go either way (trilinear
            // interpolation of the distance rounds the sphere by up to a fraction of a cell).
            if (miss - RADIUS).abs() < cell {
                continue;
            }
            inside += usize::from(miss < RADIUS);
            if covered != (miss < RADIUS) {
                wrong += 1;
            }
        }
    }
    assert!(inside > 1000, "the sphere covers {inside} pixels");
    assert_eq!(
        wrong, 0,
        "{wrong} pixels away from the silhouette disagree with the analytic disk"
    );
}

#[test]
fn a_sphere_is_shaded_as_lambert_and_ambient_light_predict() {
    use eddies_render::light::sun;
    let (w, h) = (240, 180);
    let albedo = [0.7, 0.5, 0.3];
    let cam = camera();
    let view = cam.view(w, h).unwrap();
    let img = render_cpu(&Prepared::new(&sphere(albedo)).unwrap(), &view);
    let s = sun([0.0, 1.0, 0.0]);
    let (mut checked, mut off) = (0, 0);
    for y in 0..h {
        for x in 0..w {
            let (miss, normal) = analytic(&view, x, y);
            let Some(n) = normal else { continue };
            // Away from the silhouette, on the sunny side (no shadow), away from the highlight (its
            // exponent magnifies the level set's small normal errors) and facing the camera (no Fresnel
            // reflection to speak of).
            let d = view.ray(x, y);
            let half = normalize(std::array::from_fn(|a| s[a] - d[a]));
            let facing = -dot(n, d);
            if miss > RADIUS - 3.0 * grid().cell
                || dot(n, s) < 0.3
                || dot(n, half) > 0.9
                || facing < 0.8
            {
                continue;
            }
            let fresnel = (1.0 - facing).powi(5);
            let px = img.get_pixel(x, y).0;
            checked += 1;
            for (k, &got) in px.iter().enumerate() {
                let lin = albedo[k] * (look::AMBIENT + look::SUN * dot(n, s))
                    + look::RIM * fresnel * look::REFLECTION[k];
                let expected = srgb8(lin);
                // 6/255: the normal of a trilinear level set at 48³ is off by up to ~2°.
                if (got as i32 - expected as i32).abs() > 6 {
                    off += 1;
                }
            }
        }
    }
    assert!(checked > 500, "only {checked} pixels checked");
    assert!(
        off * 100 < checked,
        "{off} channels of {checked} pixels off the analytic shading"
    );
}

/// A pool with an obstacle and smoke over it, on the floor: every kind of content.
fn everything() -> Stage {
    let grid = Grid {
        n: [40, 24, 32],
        origin: [0.0, 0.0, 0.0],
        cell: 0.025,
    };
    let mut liquid = Vec::new();
    let mut solid = Vec::new();
    let mut smoke = Vec::new();
    let mut colours = Vec::new();
    for p in centres(grid) {
        liquid.push(0.2 - p[1] + 0.05 * (8.0 * p[0]).sin());
        let r = ((p[0] - 0.5).powi(2) + (p[2] - 0.4).powi(2)).sqrt();
        solid.push(0.1 - r);
        let q = ((p[0] - 0.7).powi(2) + (p[1] - 0.45).powi(2) + (p[2] - 0.4).powi(2)).sqrt();
        smoke.push((12.0 * (1.0 - q / 0.15)).max(0.0));
        colours.push([p[0], 0.5, 1.0 - p[0]]);
    }
    Stage {
        grid,
        up: [0.0, 1.0, 0.0],
        liquid: Some(Surface {
            layer: Layer {
                values: liquid,
                level: 0.0,
                outside: -grid.cell,
                width: grid.cell,
                distance: true,
            },
            albedo: Albedo::Cells(colours),
        }),
        solid: Some(Layer {
            values: solid,
            level: 0.0,
            outside: -grid.cell,
            width: grid.cell,
            distance: true,
        }),
        smoke: Some(Smoke {
            extinction: smoke,
            albedo: Albedo::Uniform([0.9, 0.85, 0.8]),
        }),
        floor: true,
    }
}

#[test]
fn the_gpu_draws_what_the_cpu_draws_and_repeats_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    let stage = everything();
    let max = stage.grid.max();
    let (w, h) = (192, 108);
    let cam = Camera::framing(stage.grid.origin, max, stage.up, w, h);
    let view = cam.view(w, h).unwrap();
    let prepared = Prepared::new(&stage).unwrap();
    let cpu = render_cpu(&prepared, &view);
    let mut renderer = GpuRenderer::new(gpu);
    let first = renderer.render(&prepared, &view).unwrap();
    let again = renderer.render(&prepared, &view).unwrap();
    assert_eq!(
        first.as_raw(),
        again.as_raw(),
        "the GPU picture repeats bit for bit"
    );
    // Float rounding (fused multiply–adds, the GPU's exp and pow) may move a surface hit across a march
    // step at a silhouette; elsewhere the two agree to a few levels of 8 bits.
    let mut far = 0;
    let mut worst_close = 0;
    for (a, b) in cpu.pixels().zip(first.pixels()) {
        let diff = (0..3)
            .map(|k| (a.0[k] as i32 - b.0[k] as i32).abs())
            .max()
            .unwrap();
        if diff > 3 {
            far += 1;
        } else {
            worst_close = worst_close.max(diff);
        }
    }
    let total = (w * h) as usize;
    assert!(
        far * 200 < total,
        "{far} of {total} pixels differ by more than 3/255"
    );
    // The picture is not empty: the floor, the liquid and the smoke take many colours.
    let mut distinct: Vec<[u8; 3]> = cpu.pixels().map(|p| p.0).collect();
    distinct.sort();
    distinct.dedup();
    assert!(distinct.len() > 500, "only {} colours", distinct.len());
}
