//! A vortex-particle scene's simulation: its parameters, memory estimate and initial vortons.

use eddies::vpm::{self, VpmParams, VpmSim};
use eddies::SimError;
use glam::DVec3;

use crate::scene::Scene;

/// The library parameters of a vpm scene: `[vpm]` with the domain's resolution and gravity.
pub fn params(scene: &Scene) -> VpmParams {
    let mut p = scene.vpm.params;
    let res = scene.resolution();
    p.grid_resolution = [res[0], res[1], res[2]];
    let g = scene.gravity();
    p.buoyancy.gravity = [g[0], g[1], g.get(2).copied().unwrap_or(0.0)];
    p
}

/// Bytes the scene's simulation will hold: the library's estimate for the vortons and tracers the scene's
/// distributions place and the grid.
pub fn estimate_bytes(scene: &Scene) -> f64 {
    let v = &scene.vpm;
    let count = |n: i64| n.max(0) as f64;
    let vortons: f64 = v.ring.iter().map(|r| count(r.vortons)).sum::<f64>()
        + v.tube.iter().map(|t| count(t.vortons)).sum::<f64>()
        + v.sheet
            .iter()
            .map(|s| count(s.vortons_per_edge).powi(2))
            .sum::<f64>()
        + v.noise.iter().map(|n| count(n.vortons)).sum::<f64>()
        + v.ball.iter().map(|b| count(b.vortons)).sum::<f64>()
        + v.block.iter().map(|b| count(b.vortons)).sum::<f64>();
    let tracers: f64 = v.ring.iter().map(|r| count(r.tracers)).sum::<f64>()
        + v.tube.iter().map(|t| count(t.tracers)).sum::<f64>()
        + v.ball.iter().map(|b| count(b.tracers)).sum::<f64>()
        + v.block.iter().map(|b| count(b.tracers)).sum::<f64>();
    let points: f64 = scene.resolution().iter().map(|&n| n as f64).product();
    VpmSim::estimate_bytes(vortons, tracers, points)
}

fn vec3(v: &[f64]) -> DVec3 {
    DVec3::new(v[0], v[1], v[2])
}

/// The simulation with the scene's vortons, tracers, jets, balls and heat sources.
pub fn build(scene: &Scene) -> Result<VpmSim, SimError> {
    let mut sim = VpmSim::new(params(scene))?;
    let v = &scene.vpm;
    // Each distribution draws from its own stream of the scene's seed.
    let seed = |k: usize| {
        (scene.seed as u64)
            .wrapping_mul(1_000_003)
            .wrapping_add(k as u64)
    };
    for (i, r) in v.ring.iter().enumerate() {
        sim.add_ring(&vpm::Ring {
            center: vec3(&r.center),
            axis: vec3(&r.axis),
            radius: r.radius,
            core_radius: r.core_radius,
            circulation: r.circulation,
            vortons: r.vortons as usize,
            filament: r.filament,
            tracers: r.tracers as usize,
            seed: seed(i),
        });
    }
    for (i, t) in v.tube.iter().enumerate() {
        sim.add_tube(&vpm::Tube {
            center: vec3(&t.center),
            axis: vec3(&t.axis),
            length: t.length,
            core_radius: t.core_radius,
            circulation: t.circulation,
            vortons: t.vortons as usize,
            wiggle: t.wiggle,
            tracers: t.tracers as usize,
            seed: seed(100 + i),
        });
    }
    for s in &v.sheet {
        sim.add_sheet(&vpm::Sheet {
            center: vec3(&s.center),
            normal: vec3(&s.normal),
            velocity_jump: vec3(&s.velocity_jump),
            size: s.size,
            vortons_per_edge: s.vortons_per_edge as usize,
        });
    }
    for (i, n) in v.noise.iter().enumerate() {
        sim.add_noise(&vpm::Noise {
            min: vec3(&n.min),
            max: vec3(&n.max),
            amplitude: n.amplitude,
            vortons: n.vortons as usize,
            seed: seed(200 + i),
        });
    }
    for (i, j) in v.jet.iter().enumerate() {
        sim.add_jet(vpm::Jet {
            ring: vpm::Ring {
                center: vec3(&j.center),
                axis: vec3(&j.axis),
                radius: j.radius,
                core_radius: j.core_radius,
                circulation: j.circulation,
                vortons: j.vortons as usize,
                filament: false,
                tracers: j.tracers as usize,
                seed: seed(300 + i),
            },
            period: j.period,
            start: j.start,
            stop: j.stop,
        });
    }
    for (i, b) in v.ball.iter().enumerate() {
        let ball = vpm::Ball {
            center: vec3(&b.center),
            radius: b.radius,
            density_deviation: b.density_deviation,
            temperature_deviation: b.temperature_deviation,
            vortons: b.vortons as usize,
            halo: b.halo,
            tracers: b.tracers as usize,
            seed: seed(400 + i),
        };
        if b.period > 0.0 || b.start > 0.0 {
            let period = if b.period > 0.0 {
                b.period
            } else {
                f64::INFINITY
            };
            sim.add_puff(vpm::Puff {
                ball,
                period,
                start: b.start,
                stop: b.stop,
            });
        } else {
            sim.add_ball(&ball);
        }
    }
    for (i, b) in v.block.iter().enumerate() {
        sim.add_block(&vpm::Block {
            min: vec3(&b.min),
            max: vec3(&b.max),
            density_deviation: b.density_deviation,
            temperature_deviation: b.temperature_deviation,
            vortons: b.vortons as usize,
            jitter: b.jitter,
            tracers: b.tracers as usize,
            seed: seed(500 + i),
        });
    }
    for (i, h) in v.heat_source.iter().enumerate() {
        sim.add_heat_source(vpm::HeatSource {
            center: vec3(&h.center),
            radius: h.radius,
            rate: h.rate,
            temperature: h.temperature,
            smoke: h.smoke,
            seed: seed(600 + i),
        });
    }
    Ok(sim)
}
