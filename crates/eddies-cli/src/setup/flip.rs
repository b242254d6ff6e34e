//! A PIC/FLIP scene's simulation: its configuration, memory estimate and initial liquid.

use eddies::flip::{self, FlipConfig, FlipParams, FlipSim};
use eddies::SimError;

use super::{array, vec_d, Filling};
use crate::scene::Scene;

/// The library configuration of a flip scene: `[flip]` with the liquid's density from substance 0.
pub fn config<const D: usize>(scene: &Scene) -> FlipConfig<D> {
    FlipConfig {
        resolution: array(&scene.resolution()),
        cell_size: scene.cell_size(),
        boundary: scene.domain.boundary,
        gravity: array(&scene.gravity()),
        params: FlipParams {
            density: scene.substances()[0].rest_density,
            ..scene.flip.clone()
        },
        seed: scene.seed as u64,
    }
}

/// Bytes the scene's simulation will hold at most: the library's estimate with the whole domain seeded.
pub fn estimate_bytes(scene: &Scene) -> f64 {
    let res = scene.resolution();
    let p = &scene.flip;
    if res.len() == 3 {
        FlipSim::<3>::estimate_bytes([res[0], res[1], res[2]], p)
    } else {
        FlipSim::<2>::estimate_bytes([res[0], res[1]], p)
    }
}

/// The scene's obstacles with their motion.
pub fn obstacles<const D: usize>(scene: &Scene) -> Vec<flip::Obstacle<D>> {
    let dim = scene.dim();
    // Shapes were checked by `Scene::validate`; entries without one cannot reach here.
    scene
        .obstacle
        .iter()
        .filter_map(|o| {
            let shape = o.shape.as_ref()?;
            let w = o.angular_velocity.clone().unwrap_or_default();
            let angular_velocity = if D == 2 {
                [0.0, 0.0, w.first().copied().unwrap_or(0.0)]
            } else {
                std::array::from_fn(|k| w.get(k).copied().unwrap_or(0.0))
            };
            Some(flip::Obstacle {
                shape: shape.to_shape(dim),
                velocity: vec_d(&o.velocity),
                angular_velocity,
                center: vec_d(&o.center),
            })
        })
        .collect()
}

/// The simulation with the scene's obstacles, initial liquid, emitters and sinks.
pub fn build<const D: usize>(scene: &Scene, fill: &mut Filling) -> Result<FlipSim<D>, SimError> {
    let dim = scene.dim();
    let mut sim = FlipSim::<D>::new(config::<D>(scene))?;
    // Shapes were checked by `Scene::validate`; entries without one cannot reach here.
    for obstacle in obstacles::<D>(scene) {
        sim.add_obstacle(obstacle);
    }
    for (k, r) in scene.region.iter().enumerate() {
        if let Some(shape) = &r.shape {
            let seeded = sim.fill(&shape.to_shape(dim), vec_d(&r.velocity));
            fill.region(scene, k, seeded);
        }
    }
    for e in &scene.emitter {
        if let Some(shape) = &e.shape {
            sim.add_inflow(flip::Inflow {
                shape: shape.to_shape(dim),
                velocity: vec_d(&e.velocity),
                active: (e.start, e.stop),
            });
        }
    }
    for s in &scene.sink {
        if let Some(shape) = &s.shape {
            sim.add_sink(flip::Sink {
                shape: shape.to_shape(dim),
                rate: s.rate,
            });
        }
    }
    Ok(sim)
}
