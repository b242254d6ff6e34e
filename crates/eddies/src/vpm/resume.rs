//! Resuming a vortex particle simulation from a checkpoint ([`crate::checkpoint`]): what of [`VpmSim`]
//! evolves and is read by a later step, as named arrays, and its restoration.

use super::{JerkHistory, VelocityMethod, VpmSim};
use crate::checkpoint::SavedState;
use crate::sim::SimError;
use glam::DVec3;

/// Vectors as x, y, z triples.
fn flat(v: &[DVec3]) -> Vec<f64> {
    v.iter().flat_map(|p| p.to_array()).collect()
}

/// Triples as vectors.
fn vectors(v: &[f64]) -> Vec<DVec3> {
    v.chunks_exact(3).map(DVec3::from_slice).collect()
}

/// The count `name`, as a length.
fn count(state: &SavedState, name: &str) -> Result<usize, SimError> {
    let n = state.u64_scalar(name)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= u32::MAX as usize)
        .ok_or_else(|| SimError::InvalidInput(format!("the checkpoint's `{name}` is {n}: too many")))
}

impl VpmSim {
    /// The arrays of [`Simulation::save_state`](crate::Simulation::save_state) (see its doc in `mod.rs`).
    pub(super) fn save(&self) -> SavedState {
        let mut s = SavedState::default();
        let v = &self.vortons;
        s.push_scalar("vortons.count", v.len() as u64);
        s.push("vortons.position", flat(&v.position));
        s.push("vortons.vorticity", flat(&v.vorticity));
        s.push("vortons.radius", v.radius.clone());
        s.push("vortons.volume", v.volume.clone());
        s.push("vortons.density", v.density.clone());
        s.push("vortons.temperature", v.temperature.clone());
        s.push_scalar("tracers.count", self.tracers.len() as u64);
        s.push("tracers.position", flat(&self.tracers.position));
        s.push_scalar("time", self.time);
        s.push_scalar("steps", self.steps);
        s.push_scalar("max_speed", self.max_speed);
        s.push_scalar("max_strain", self.max_strain);
        let h = &self.history;
        s.push_scalar("jerk.count", h.depth.len() as u64);
        s.push("jerk.velocity", flat(&h.velocity));
        s.push("jerk.acceleration", flat(&h.acceleration));
        s.push("jerk.depth", h.depth.clone());
        s.push("jets.next", self.jets.iter().map(|j| j.1).collect::<Vec<f64>>());
        s.push("jets.seed", self.jets.iter().map(|j| j.0.ring.seed).collect::<Vec<u64>>());
        s.push("puffs.next", self.puffs.iter().map(|p| p.1).collect::<Vec<f64>>());
        s.push("puffs.seed", self.puffs.iter().map(|p| p.0.ball.seed).collect::<Vec<u64>>());
        if self.params.velocity == VelocityMethod::Poisson {
            self.solver.poisson.save_state(&mut s);
        }
        s
    }

    /// [`Simulation::restore_state`](crate::Simulation::restore_state): every array is read and checked
    /// before anything is written.
    pub(super) fn restore(&mut self, s: &SavedState) -> Result<(), SimError> {
        let n = count(s, "vortons.count")?;
        let position = s.f64s("vortons.position", 3 * n)?;
        let vorticity = s.f64s("vortons.vorticity", 3 * n)?;
        let radius = s.f64s("vortons.radius", n)?;
        let volume = s.f64s("vortons.volume", n)?;
        let density = s.f64s("vortons.density", n)?;
        let temperature = s.f64s("vortons.temperature", n)?;
        let m = count(s, "tracers.count")?;
        let tracers = s.f64s("tracers.position", 3 * m)?;
        let time = s.f64_scalar("time")?;
        let steps = s.u64_scalar("steps")?;
        let max_speed = s.f64_scalar("max_speed")?;
        let max_strain = s.f64_scalar("max_strain")?;
        let k = count(s, "jerk.count")?;
        let history = JerkHistory {
            velocity: vectors(s.f64s("jerk.velocity", 3 * k)?),
            acceleration: vectors(s.f64s("jerk.acceleration", 3 * k)?),
            depth: s.u8s("jerk.depth", k)?.to_vec(),
        };
        let jet_next = s.f64s("jets.next", self.jets.len())?;
        let jet_seed = s.u64s("jets.seed", self.jets.len())?;
        let puff_next = s.f64s("puffs.next", self.puffs.len())?;
        let puff_seed = s.u64s("puffs.seed", self.puffs.len())?;
        let poisson = if self.params.velocity == VelocityMethod::Poisson {
            Some(self.solver.poisson.read_state(&self.params.poisson, s)?)
        } else {
            None
        };

        let v = &mut self.vortons;
        v.position = vectors(position);
        v.vorticity = vectors(vorticity);
        v.radius = radius.to_vec();
        v.volume = volume.to_vec();
        v.density = density.to_vec();
        v.temperature = temperature.to_vec();
        self.tracers.position = vectors(tracers);
        self.time = time;
        self.steps = steps;
        self.max_speed = max_speed;
        self.max_strain = max_strain;
        self.history = history;
        for (j, (&next, &seed)) in self.jets.iter_mut().zip(jet_next.iter().zip(jet_seed)) {
            j.1 = next;
            j.0.ring.seed = seed;
        }
        for (p, (&next, &seed)) in self.puffs.iter_mut().zip(puff_next.iter().zip(puff_seed)) {
            p.1 = next;
            p.0.ball.seed = seed;
        }
        if let Some(p) = poisson {
            self.solver.poisson.restore(p);
        }
        Ok(())
    }
}
