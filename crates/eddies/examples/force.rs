use eddies::reint::*;
use eddies::{Shape, Simulation};
use glam::DVec3;
fn run(obstacle: bool, forces: bool, subs: usize) {
    let n = 24;
    let mut cfg = ReintConfig::<3>::default();
    cfg.resolution = [n, n, n];
    cfg.cell_size = 1.0 / n as f64;
    cfg.params.forces = forces;
    cfg.substances = (0..subs).map(|_| Substance::default()).collect();
    let mut sim = ReintSim::new(cfg).unwrap();
    if obstacle { sim.add_obstacle(Shape::Cylinder { center: DVec3::new(0.6, 0.5, 0.5), axis: DVec3::Y, radius: 0.1, height: 1.0 }); }
    sim.fill(&Shape::Box { min: DVec3::ZERO, max: DVec3::new(0.3, 0.7, 1.0) }, 0, 1.0, [2.0, 0.0, 0.5]);
    let m0 = sim.total_mass();
    let mut worst = 0.0f64;
    for s in 0..200 {
        let dt = sim.max_dt(0.8);
        let r = sim.step(dt).unwrap();
        let d = (sim.total_mass() - m0) / m0;
        if d.abs() > worst.abs() * 2.0 + 1e-12 { println!("  step {s} drift {d:e} vmax {:.2}", r.scalar("max_speed").unwrap()); worst = d; }
    }
    println!("obstacle={obstacle} forces={forces} subs={subs}: drift {:e}", (sim.total_mass() - m0) / m0);
}
fn main() { run(false, false, 1); run(false, true, 1); run(true, true, 1); }
