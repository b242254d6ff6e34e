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
        s.push_scalar("max_speed", self.max_speed);
        s.push("grid.pressure", self.pressure.data.clone());
        s.push("grid.volume_potential", self.excess_potential.data.clone());
        if self.reads_last_velocity() {
            let faces: Vec<f64> = self
                .u
                .u
                .iter()
                .flat_map(|g| g.data.iter().copied())
                .collect();
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
        self.max_speed = max_speed;
        self.pressure.data.copy_from_slice(pressure);
        self.excess_potential.data.copy_from_slice(potential);
        self.potential_kept = None;
        self.grid_behind = None;
        if let Some(v) = velocity {
            let mut at = 0;
            for g in &mut self.u.u {
                let m = g.data.len();
                g.data.copy_from_slice(&v[at..at + m]);
                at += m;
            }
        }
        // Derived state, as the original holds it: static obstacles are rasterised at the first step only,
        // and the counts must be the new particles'. The particles keep their saved order, which the next
        // step's sort (on the CPU, or on a device that keeps them) starts from, as in the uninterrupted run.
        let shapes: Vec<Shape> = self.obstacles.iter().map(|o| o.shape_at(time)).collect();
        mark::mark_solids(&shapes, &mut self.solid_id);
        self.count_in_place();
        self.forget_kept();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Boundary, FlipConfig, FlipParams, Inflow, Obstacle, Sink, Transfer};
    use super::*;
    use crate::sim::testing::{assert_every_array_is_read, assert_refused, check_resume};
    use crate::Simulation;
    use glam::DVec3;

    /// A box, the first `D` axes of `lo..hi` (m).
    fn cuboid<const D: usize>(lo: [f64; 3], hi: [f64; 3]) -> Shape {
        if D == 2 {
            Shape::box2([lo[0], lo[1]], [hi[0], hi[1]])
        } else {
            Shape::Box {
                min: DVec3::from_array(lo),
                max: DVec3::from_array(hi),
            }
        }
    }

    /// A 16ᴰ tank with everything that carries state from step to step: a column of liquid, a moving and
    /// rotating ball, an inflow, a drain and the reseeding band (whose new particles read the last grid
    /// velocity); `boundary` open lets particles leave (NaN positions until the next sort).
    fn scene<const D: usize>(transfer: Transfer, boundary: Boundary, n: usize) -> FlipSim<D> {
        let mut sim = still_scene::<D>(transfer, boundary, n);
        let center: [f64; D] = std::array::from_fn(|k| [0.7, 0.3, 0.5][k]);
        sim.add_obstacle(Obstacle {
            shape: Shape::Sphere {
                center: DVec3::new(0.7, 0.3, if D == 3 { 0.5 } else { 0.0 }),
                radius: 0.12,
            },
            velocity: std::array::from_fn(|k| [-0.3, 0.1, 0.0][k]),
            angular_velocity: [0.0, 0.0, 2.0],
            center,
        });
        sim
    }

    /// [`scene`] with its static obstacle only: the obstacle cells are then marked at the first step alone.
    fn still_scene<const D: usize>(transfer: Transfer, boundary: Boundary, n: usize) -> FlipSim<D> {
        let per_cell = 1usize << D;
        let cfg = FlipConfig::<D> {
            resolution: [n; D],
            cell_size: 1.0 / n as f64,
            boundary,
            params: FlipParams {
                transfer,
                min_per_cell: per_cell - 1,
                max_per_cell: 2 * per_cell,
                ..Default::default()
            },
            seed: 7,
            ..Default::default()
        };
        let mut sim = FlipSim::new(cfg).expect("a valid scene");
        sim.fill(&cuboid::<D>([0.0; 3], [0.4, 0.5, 1.0]), [0.3; D]);
        sim.add_obstacle(Obstacle::fixed(cuboid::<D>(
            [0.85, 0.0, 0.0],
            [1.0, 0.1, 1.0],
        )));
        sim.add_inflow(Inflow {
            shape: cuboid::<D>([0.6, 0.8, 0.4], [0.75, 0.9, 0.6]),
            velocity: std::array::from_fn(|k| [0.2, -1.0, 0.0][k]),
            active: (0.0, 10.0),
        });
        sim.add_sink(Sink {
            shape: cuboid::<D>([0.0, 0.0, 0.0], [0.2, 0.15, 1.0]),
            rate: 30.0,
        });
        sim
    }

    /// The particles of `a` and `b` the same, bit for bit, attribute by attribute.
    fn assert_same_particles<const D: usize>(a: &FlipSim<D>, b: &FlipSim<D>) {
        let (p, q) = (a.particles(), b.particles());
        let bits = |v: &Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let arrays = |p: &'_ super::super::Particles<D>| {
            p.pos
                .iter()
                .chain(&p.vel)
                .chain(p.affine.iter().flatten())
                .map(bits)
                .collect::<Vec<_>>()
        };
        assert!(arrays(p) == arrays(q), "particle attributes differ");
        assert_eq!(a.checksum(), b.checksum());
        assert_eq!(a.max_speed.to_bits(), b.max_speed.to_bits());
    }

    fn check<const D: usize>(transfer: Transfer, boundary: Boundary, k: usize) {
        let (a, b) = check_resume(|| scene::<D>(transfer, boundary, 16), k, 5, 2.0);
        assert_same_particles(&a, &b);
        assert!(a.particles().len() > 20, "the liquid is still there");
    }

    #[test]
    fn flip_2d_open_resumes_bit_identically() {
        check::<2>(Transfer::Flip, Boundary::Open, 6);
    }

    #[test]
    fn apic_2d_closed_resumes_bit_identically() {
        check::<2>(Transfer::Apic, Boundary::Closed, 6);
    }

    #[test]
    fn apic_3d_closed_resumes_bit_identically() {
        check::<3>(Transfer::Apic, Boundary::Closed, 4);
    }

    #[test]
    fn flip_3d_open_resumes_bit_identically() {
        check::<3>(Transfer::Flip, Boundary::Open, 4);
    }

    #[test]
    fn static_obstacles_resume_bit_identically() {
        let (a, b) = check_resume(
            || still_scene::<2>(Transfer::Flip, Boundary::Closed, 16),
            6,
            5,
            2.0,
        );
        assert_same_particles(&a, &b);
    }

    #[test]
    fn every_saved_array_is_read() {
        let build = || scene::<2>(Transfer::Apic, Boundary::Closed, 16);
        assert_every_array_is_read(build, 6, 5, 2.0, &[]);
    }

    #[test]
    fn a_state_saved_at_step_zero_resumes() {
        check::<2>(Transfer::Apic, Boundary::Closed, 0);
    }

    #[test]
    fn states_of_other_scenes_are_refused_and_change_nothing() {
        let mut sim = scene::<2>(Transfer::Apic, Boundary::Closed, 16);
        crate::sim::testing::run(&mut sim, 2, 1.0);
        let mut other_grid = scene::<2>(Transfer::Apic, Boundary::Closed, 8);
        crate::sim::testing::run(&mut other_grid, 1, 1.0);
        let state = other_grid.save_state().unwrap();
        assert_refused(&mut sim, &state, "`grid.pressure`");
        let flat = scene::<3>(Transfer::Apic, Boundary::Closed, 16)
            .save_state()
            .unwrap();
        assert_refused(&mut sim, &flat, "`particles.position`");
        let flip = scene::<2>(Transfer::Flip, Boundary::Closed, 16)
            .save_state()
            .unwrap();
        assert_refused(&mut sim, &flip, "`particles.affine`");
        // Another method's state (reintegration tracking's arrays).
        let mut reint = crate::checkpoint::SavedState::default();
        reint.push("cells.position", vec![0.0f32; 8]);
        reint.push_scalar("time", 0.5f64);
        assert_refused(&mut sim, &reint, "`particles.count`");
        // One attribute shorter than the others.
        let mut short = sim.save_state().unwrap();
        for (name, a) in &mut short.arrays {
            if name == "particles.velocity" {
                if let crate::checkpoint::StateArray::F32(v) = a {
                    v.pop();
                }
            }
        }
        assert_refused(&mut sim, &short, "`particles.velocity`");
        let mut apic = scene::<2>(Transfer::Flip, Boundary::Closed, 16);
        let with_affine = sim.save_state().unwrap();
        assert_refused(&mut apic, &with_affine, "`particles.affine`");
    }
}
