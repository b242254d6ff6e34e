//! Resuming a FLIP liquid from a checkpoint ([`crate::checkpoint`]): what of [`FlipSim`] evolves and is read
//! by a later step, as named arrays, and its restoration.

use super::{mark, FlipSim};
use crate::checkpoint::SavedState;
use crate::shape::Shape;
use crate::sim::SimError;

impl<const D: usize> FlipSim<D> {
    /// The arrays of [`Simulation::save_state`](crate::Simulation::save_state) (see its doc in `mod.rs`).
    pub(super) fn save(&self) -> SavedState {
        let p = &self.particles;
        let mut s = SavedState::default();
        s.push_scalar("particles.count", p.len() as u64);
        s.push("particles.position", p.pos.concat());
        s.push("particles.velocity", p.vel.concat());
        if self.apic() {
            s.push("particles.affine", p.affine.concat().concat());
        }
        s.push_scalar("time", self.time);
        s.push_scalar("steps", self.steps);
        s.push_scalar("substeps", self.substeps_total);
        s.push_scalar("max_speed", self.max_speed);
        s.push("grid.pressure", self.pressure.data.clone());
        s.push("grid.volume_potential", self.excess_potential.data.clone());
        if self.reads_last_velocity() {
            let faces: Vec<f64> = self.u.u.iter().flat_map(|g| g.data.iter().copied()).collect();
            s.push("grid.velocity", faces);
        }
        s
    }

    /// Whether a step reads the grid velocity of the step before: the reseeding band gives new particles the
    /// velocity of the last substep's grid (before `particles_to_grid` replaces it).
    fn reads_last_velocity(&self) -> bool {
        self.cfg.params.min_per_cell > 0
    }

    /// [`Simulation::restore_state`](crate::Simulation::restore_state): every array is read and checked
    /// before anything is written.
    pub(super) fn restore(&mut self, s: &SavedState) -> Result<(), SimError> {
        let count = s.u64_scalar("particles.count")?;
        let n = usize::try_from(count)
            .ok()
            .filter(|&n| n <= u32::MAX as usize)
            .ok_or_else(|| {
                SimError::InvalidInput(format!(
                    "the checkpoint's `particles.count` is {count}: more particles than FLIP indexes"
                ))
            })?;
        let pos = s.f32s("particles.position", D * n)?;
        let vel = s.f32s("particles.velocity", D * n)?;
        let affine = if self.apic() {
            Some(s.f32s("particles.affine", D * D * n)?)
        } else if s.array("particles.affine").is_ok() {
            return Err(SimError::InvalidInput(
                "the checkpoint holds `particles.affine`: it was written by an APIC scene, and this one's \
                 transfer is not APIC"
                    .into(),
            ));
        } else {
            None
        };
        let time = s.f64_scalar("time")?;
        let steps = s.u64_scalar("steps")?;
        let substeps = s.u64_scalar("substeps")?;
        let max_speed = s.f64_scalar("max_speed")?;
        let cells = self.pressure.data.len();
        let pressure = s.f64s("grid.pressure", cells)?;
        let potential = s.f64s("grid.volume_potential", cells)?;
        let velocity = if self.reads_last_velocity() {
            let faces = self.u.u.iter().map(|g| g.data.len()).sum();
            Some(s.f64s("grid.velocity", faces)?)
        } else {
            None
        };

        let p = &mut self.particles;
        for k in 0..D {
            p.pos[k] = pos[k * n..(k + 1) * n].to_vec();
            p.vel[k] = vel[k * n..(k + 1) * n].to_vec();
        }
        for (j, a) in p.affine.iter_mut().flatten().enumerate() {
            *a = affine.map_or_else(Vec::new, |c| c[j * n..(j + 1) * n].to_vec());
        }
        self.time = time;
        self.steps = steps;
        self.substeps_total = substeps;
        self.max_speed = max_speed;
        self.pressure.data.copy_from_slice(pressure);
        self.excess_potential.data.copy_from_slice(potential);
        if let Some(v) = velocity {
            let mut at = 0;
            for g in &mut self.u.u {
                let m = g.data.len();
                g.data.copy_from_slice(&v[at..at + m]);
                at += m;
            }
        }
        // Derived state, as the original holds it: static obstacles are rasterised at the first step only,
        // and the sort's bins must index the new particles. The sort is stable by half cell, so sorting here
        // leaves the next step's sort, and all that follows, as in the uninterrupted run.
        let shapes: Vec<Shape> = self.obstacles.iter().map(|o| o.shape_at(time)).collect();
        mark::mark_solids(&shapes, &mut self.solid_id);
        self.resort();
        Ok(())
    }
}
