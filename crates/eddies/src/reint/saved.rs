//! What a checkpoint holds of reintegration tracking (see [`crate::checkpoint`]): the particle of every
//! interior cell, the clock, the speed the next time step is chosen from, and the running totals of the
//! emitters and sinks. Everything else is either rebuilt from the scene (obstacles, emitter cells, constants)
//! or rewritten by every step before it is read (the halo's mirrored ghosts, densities, forces, the gather's
//! buffers). The CPU and GPU backends save the same arrays in the same units, so a checkpoint of one resumes
//! on the other.

use super::{InteriorState, ReintSim};
use crate::checkpoint::SavedState;
use crate::sim::SimError;

/// The evolving state of a reintegration-tracking simulation, in the method's units.
#[derive(Clone, Debug, PartialEq)]
pub struct ReintSaved<const D: usize> {
    /// The particle of each interior cell (cells, cells/s, quanta).
    pub cells: InteriorState<D>,
    /// Simulated time (s).
    pub time: f64,
    /// Steps taken.
    pub steps: u64,
    /// Largest particle speed of the last step (cells/s): the next adaptive time step reads it.
    pub max_speed: f32,
    /// Mass put in by emitters since the start, per substance (kg).
    pub injected: Vec<f64>,
    /// Mass taken out by sinks since the start, per substance (kg).
    pub removed: Vec<f64>,
}

impl<const D: usize> ReintSaved<D> {
    /// The named arrays of a checkpoint: `cells.position` (D blocks of one value per cell, x fastest),
    /// `cells.velocity`, `cells.mass` (one block per substance), `time`, `steps`, `max_speed`,
    /// `mass_injected`, `mass_removed`.
    pub fn to_state(&self) -> SavedState {
        let mut s = SavedState::default();
        s.push("cells.position", self.cells.pos.concat());
        s.push("cells.velocity", self.cells.vel.concat());
        s.push("cells.mass", self.cells.mass.concat());
        s.push_scalar("time", self.time);
        s.push_scalar("steps", self.steps);
        s.push_scalar("max_speed", self.max_speed);
        s.push("mass_injected", self.injected.clone());
        s.push("mass_removed", self.removed.clone());
        s
    }

    /// Reads the arrays of [`ReintSaved::to_state`] for a grid of `cells` interior cells and `substances`
    /// substances, or says which array does not fit.
    pub fn from_state(
        state: &SavedState,
        cells: usize,
        substances: usize,
    ) -> Result<Self, SimError> {
        let split = |v: &[f32], parts: usize| -> Vec<Vec<f32>> {
            v.chunks_exact(cells.max(1))
                .take(parts)
                .map(<[f32]>::to_vec)
                .collect()
        };
        let pos = split(state.f32s("cells.position", D * cells)?, D);
        let vel = split(state.f32s("cells.velocity", D * cells)?, D);
        let mass = split(state.f32s("cells.mass", substances * cells)?, substances);
        let max_speed = state.f32s("max_speed", 1)?[0];
        let time = state.f64_scalar("time")?;
        if !(time.is_finite() && time >= 0.0 && max_speed.is_finite()) {
            return Err(SimError::InvalidInput(format!(
                "the checkpoint's time ({time} s) or speed ({max_speed} cells/s) is not a valid state"
            )));
        }
        Ok(Self {
            cells: InteriorState {
                pos: std::array::from_fn(|a| pos.get(a).cloned().unwrap_or_default()),
                vel: std::array::from_fn(|a| vel.get(a).cloned().unwrap_or_default()),
                mass,
            },
            time,
            steps: state.u64_scalar("steps")?,
            max_speed,
            injected: state.f64s("mass_injected", substances)?.to_vec(),
            removed: state.f64s("mass_removed", substances)?.to_vec(),
        })
    }
}

impl<const D: usize> ReintSim<D> {
    /// The evolving state, for a checkpoint.
    pub fn saved(&self) -> ReintSaved<D> {
        let s = self.cfg.substances.len();
        ReintSaved {
            cells: self.interior_state(),
            time: self.time,
            steps: self.steps,
            max_speed: self.max_speed,
            injected: self.injected[..s].to_vec(),
            removed: self.removed[..s].to_vec(),
        }
    }

    /// Continues from a saved state of a simulation built from the same scene (its arrays already checked
    /// against this grid by [`ReintSaved::from_state`]).
    pub fn resume_from(&mut self, saved: &ReintSaved<D>) {
        self.set_interior_state(&saved.cells);
        self.time = saved.time;
        self.steps = saved.steps;
        self.max_speed = saved.max_speed;
        let s = saved.injected.len();
        self.injected[..s].copy_from_slice(&saved.injected);
        self.removed[..s].copy_from_slice(&saved.removed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Checkpoint;
    use crate::reint::{Emitter, ReintConfig, Sink, Substance};
    use crate::{Shape, Simulation};

    /// A 2D tank with everything that carries state between steps: two substances, an emitter that runs for
    /// part of the time, a sink, an obstacle.
    fn tank() -> ReintSim<2> {
        let n = 40;
        let cfg = ReintConfig::<2> {
            resolution: [n, n],
            cell_size: 1.0 / n as f64,
            substances: vec![
                Substance::default(),
                Substance {
                    rest_density: 1200.0,
                    color: [1.0, 0.0, 0.0],
                },
            ],
            ..Default::default()
        };
        let mut sim = ReintSim::new(cfg).expect("valid config");
        sim.add_obstacle(Shape::Sphere {
            center: glam::DVec3::new(0.6, 0.3, 0.0),
            radius: 0.08,
        });
        sim.fill(&Shape::box2([0.0, 0.0], [0.4, 0.5]), 0, 1.0, [0.5, 0.0]);
        sim.add_emitter(Emitter {
            shape: Shape::box2([0.1, 0.8], [0.2, 0.9]),
            substance: 1,
            velocity: [0.5, -1.0],
            density: 1.0,
            active: (0.0, 0.05),
        });
        sim.add_sink(Sink {
            shape: Shape::box2([0.8, 0.0], [1.0, 0.1]),
            rate: 20.0,
        });
        sim
    }

    fn run(sim: &mut dyn Simulation, steps: usize) -> Vec<String> {
        (0..steps)
            .map(|_| {
                let rec = sim.step(sim.max_dt(0.8)).expect("stable");
                format!("{} {:?} {:?}", rec.dt.to_bits(), rec.time, rec.quantities)
            })
            .collect()
    }

    /// A simulation rebuilt from its scene and given the state saved at step 30 (through the file format)
    /// takes the next 40 steps exactly as the original does: the same time steps, diagnostics and bits.
    #[test]
    fn resumed_run_repeats_the_original_bit_for_bit() {
        let mut original = tank();
        run(&mut original, 30);
        let file = Checkpoint {
            meta: Vec::new(),
            state: original.save_state().unwrap(),
        }
        .encode();
        let expected = run(&mut original, 40);
        let mut resumed = tank();
        resumed
            .restore_state(&Checkpoint::decode(&file).unwrap().state)
            .unwrap();
        assert_eq!(resumed.steps(), 30);
        assert_eq!(run(&mut resumed, 40), expected);
        assert_eq!(resumed.checksum(), original.checksum());
        assert_eq!(resumed.mass_exchanged(), original.mass_exchanged());
        assert_eq!(resumed.field("density"), original.field("density"));
    }

    /// A state of another grid or substance count is refused, naming the array, and changes nothing.
    #[test]
    fn a_state_of_another_scene_is_refused_and_changes_nothing() {
        let mut sim = tank();
        run(&mut sim, 3);
        let before = sim.checksum();
        let small = ReintSim::<2>::new(ReintConfig {
            resolution: [8, 8],
            cell_size: 1.0 / 8.0,
            ..Default::default()
        })
        .unwrap();
        let err = sim.restore_state(&small.save_state().unwrap()).unwrap_err();
        assert!(err.to_string().contains("cells.position"), "{err}");
        assert_eq!((sim.checksum(), sim.steps()), (before, 3));
    }
}
