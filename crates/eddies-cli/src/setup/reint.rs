//! A reintegration-tracking scene's simulation: its configuration, memory estimate and initial fluid.

use eddies::reint::{Emitter, ReintConfig, ReintSim, Sink, Substance};
use eddies::SimError;

use super::{array, velocity, Filling, DIRECT_ESTIMATE_CELLS};
use crate::scene::Scene;

/// The library configuration of a reint scene.
pub fn config<const D: usize>(scene: &Scene) -> ReintConfig<D> {
    ReintConfig {
        resolution: array(&scene.resolution()),
        cell_size: scene.cell_size(),
        boundary: scene.domain.boundary,
        gravity: array(&scene.gravity()),
        params: scene.reint.clone(),
        substances: scene
            .substances()
            .iter()
            .map(|s| Substance {
                rest_density: s.rest_density as f32,
                color: [s.color[0] as f32, s.color[1] as f32, s.color[2] as f32],
            })
            .collect(),
    }
}

/// Bytes the scene's simulation will hold: the library's estimate, extrapolated per cell beyond
/// [`DIRECT_ESTIMATE_CELLS`] cells.
pub fn estimate_bytes(scene: &Scene) -> f64 {
    let res = scene.resolution();
    let substances = scene.substances().len();
    let cells: u128 = res.iter().map(|&n| n as u128).product();
    let direct = |res: &[usize]| -> f64 {
        if res.len() == 3 {
            ReintSim::<3>::estimate_bytes([res[0], res[1], res[2]], substances) as f64
        } else {
            ReintSim::<2>::estimate_bytes([res[0], res[1]], substances) as f64
        }
    };
    if cells <= DIRECT_ESTIMATE_CELLS {
        direct(&res)
    } else {
        let probe = vec![64; res.len()];
        let probe_cells = 64f64.powi(res.len() as i32);
        direct(&probe) / probe_cells * cells as f64
    }
}

/// The simulation with the scene's obstacles, initial fluid, emitters and sinks.
pub fn build<const D: usize>(scene: &Scene, fill: &mut Filling) -> Result<ReintSim<D>, SimError> {
    let dim = scene.dim();
    let mut sim = ReintSim::<D>::new(config::<D>(scene))?;
    // Shapes were checked by `Scene::validate`; entries without one cannot reach here.
    for o in &scene.obstacle {
        if let Some(shape) = &o.shape {
            sim.add_obstacle(shape.to_shape(dim));
        }
    }
    for (k, r) in scene.region.iter().enumerate() {
        if let Some(shape) = &r.shape {
            let filled = sim.fill(
                &shape.to_shape(dim),
                r.substance as usize,
                r.density as f32,
                velocity(&r.velocity),
            );
            fill.region(scene, k, filled);
        }
    }
    for e in &scene.emitter {
        if let Some(shape) = &e.shape {
            sim.add_emitter(Emitter {
                shape: shape.to_shape(dim),
                substance: e.substance as usize,
                velocity: velocity(&e.velocity),
                density: e.density as f32,
                active: (e.start, e.stop),
            });
        }
    }
    for s in &scene.sink {
        if let Some(shape) = &s.shape {
            sim.add_sink(Sink {
                shape: shape.to_shape(dim),
                rate: s.rate,
            });
        }
    }
    Ok(sim)
}
