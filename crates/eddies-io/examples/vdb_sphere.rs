//! Writes a smoke-like test volume, a sphere of density with temperature and a swirling velocity, as a `.vdb`
//! file to open in Blender or Houdini or inspect with OpenVDB's `vdb_print`, and prints the encode time.
//!
//! `cargo run --release -p eddies-io --example vdb_sphere -- sphere.vdb [n]` (n³ cells, 256 by default).

use std::time::Instant;

use eddies_io::vdb::{write_vdb, GridClass, VdbGrid, VdbValues};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: vdb_sphere OUT.vdb [n]")?;
    let n: usize = args.next().map_or(Ok(256), |s| s.parse())?;
    // A 1 m box with its lower corner at (-0.5, -0.5, 0): a sphere of radius 0.35 m centred in it.
    let h = 1.0 / n as f64;
    let origin = [-0.5, -0.5, 0.0];
    let (mut density, mut temperature, mut velocity) = (
        vec![0f32; n * n * n],
        vec![0f32; n * n * n],
        vec![[0f32; 3]; n * n * n],
    );
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                let p = [i, j, k].map(|c| (c as f64 + 0.5) * h - 0.5);
                let r = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
                let inside = ((0.35 - r) / 0.05).clamp(0.0, 1.0);
                let c = i + n * (j + n * k);
                density[c] = inside as f32;
                temperature[c] = (300.0 * inside) as f32;
                // Rigid rotation about z at 1 rad/s, inside the sphere only.
                velocity[c] = [(-p[1] * inside) as f32, (p[0] * inside) as f32, 0.0];
            }
        }
    }
    let grids = [
        VdbGrid {
            name: "density",
            class: GridClass::FogVolume,
            values: VdbValues::Float(&density),
        },
        VdbGrid {
            name: "temperature",
            class: GridClass::Unknown,
            values: VdbValues::Float(&temperature),
        },
        VdbGrid {
            name: "velocity",
            class: GridClass::Unknown,
            values: VdbValues::Vec3(&velocity),
        },
    ];
    let start = Instant::now();
    let density_only = write_vdb(&grids[..1], [n; 3], h, origin, 1e-6)?;
    let one = start.elapsed();
    let start = Instant::now();
    let bytes = write_vdb(&grids, [n; 3], h, origin, 1e-6)?;
    let all = start.elapsed();
    std::fs::write(&path, &bytes)?;
    println!(
        "{n}³: density alone {:.1} ms ({:.1} MB); density + temperature + velocity {:.1} ms ({:.1} MB) -> {path}",
        one.as_secs_f64() * 1e3,
        density_only.len() as f64 / 1e6,
        all.as_secs_f64() * 1e3,
        bytes.len() as f64 / 1e6
    );
    Ok(())
}
