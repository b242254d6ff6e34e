use eddies::reint::*;
use eddies::{Shape, Simulation};
use std::time::Instant;
fn bench<const D: usize>(n: usize, forces: bool, reps: usize) -> f64 {
    let mut cfg = ReintConfig::<D>::default();
    cfg.resolution = [n; D];
    cfg.cell_size = 1.0 / n as f64;
    let mut sim = ReintSim::new(cfg).unwrap();
    let mut hi = [1.0; D];
    hi[1] = 0.6;
    let shape = if D == 2 { Shape::box2([0.0, 0.0], [0.5, 0.6]) } else { Shape::Box { min: glam::DVec3::ZERO, max: glam::DVec3::new(0.5, 0.6, 1.0) } };
    sim.fill(&shape, 0, 1.0, [0.5; D]);
    for _ in 0..10 { let dt = sim.max_dt(0.5); sim.step(dt).unwrap(); }
    let mut times = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        if forces { let dt = sim.max_dt(0.5); sim.step(dt).unwrap(); } else { sim.advect(1e-4); }
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = times[reps / 2];
    (n.pow(D as u32)) as f64 / med
}
fn main() {
    println!("2D reint  {:.3e} cells/s", bench::<2>(1024, false, 21));
    println!("2D step   {:.3e} cells/s", bench::<2>(1024, true, 21));
    println!("3D reint  {:.3e} cells/s", bench::<3>(128, false, 11));
    println!("3D step   {:.3e} cells/s", bench::<3>(128, true, 11));
}
