use eddies::reint::*;
use eddies::{Shape, Simulation};
fn main() {
    let n = 64;
    let mut cfg = ReintConfig::<2>::default();
    cfg.resolution = [n, n];
    cfg.cell_size = 1.0 / n as f64;
    cfg.params.eos = Eos::Tait { gamma: 1.0 };
    cfg.params.sound_speed = 8.0;
    cfg.params.viscosity = std::env::var("NU").map(|v| v.parse().unwrap()).unwrap_or(3e-2);
    cfg.params.diffusion_radius = std::env::var("R").map(|v| v.parse().unwrap()).unwrap_or(0.55);
    let mut sim = ReintSim::new(cfg).unwrap();
    sim.fill(&Shape::box2([0.0, 0.0], [1.0, 0.4]), 0, 1.0, [0.0, 0.0]);
    let mut peak = 0.0f64;
    for s in 0..8000 {
        let r = sim.step(sim.max_dt(0.5)).unwrap();
        let ke = r.scalar("kinetic_energy").unwrap();
        peak = peak.max(ke);
        if s % 400 == 0 { println!("step {s} t {:.2} KE/peak {:.4} vmax {:.3}", r.time, ke / peak, r.scalar("max_speed").unwrap()); }
    }
    let f = sim.field("speed").unwrap();
    let mut v: Vec<(f32, usize)> = f.data.iter().cloned().zip(0..).collect();
    v.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    let mf = sim.field("density").unwrap();
    for (s, i) in &v[..6] { println!("speed {s:.3} at x {} y {} density {}", i % n, i / n, mf.data[*i]); }
}
