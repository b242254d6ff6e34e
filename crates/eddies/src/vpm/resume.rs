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
        .ok_or_else(|| {
            SimError::InvalidInput(format!("the checkpoint's `{name}` is {n}: too many"))
        })
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
        s.push(
            "jets.next",
            self.jets.iter().map(|j| j.1).collect::<Vec<f64>>(),
        );
        s.push(
            "jets.seed",
            self.jets
                .iter()
                .map(|j| j.0.ring.seed)
                .collect::<Vec<u64>>(),
        );
        s.push(
            "puffs.next",
            self.puffs.iter().map(|p| p.1).collect::<Vec<f64>>(),
        );
        s.push(
            "puffs.seed",
            self.puffs
                .iter()
                .map(|p| p.0.ball.seed)
                .collect::<Vec<u64>>(),
        );
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

#[cfg(test)]
mod tests {
    use super::super::{Ball, BuoyancyParams, HeatSource, Integrator, Jet, Puff, Ring, VpmParams};
    use super::*;
    use crate::sim::testing::{assert_every_array_is_read, assert_refused, check_resume, run};
    use crate::Simulation;

    /// A few hundred vortons with everything that carries state from step to step: a ring with tracers, a
    /// heavy and hot ball under gravity (baroclinic generation), a heat source releasing smoke, heat and
    /// viscous diffusion, a jet and a puff that emit during the run, stretching and auto-mollification.
    fn scene(velocity: VelocityMethod, integrator: Integrator) -> VpmSim {
        let mut sim = calm(velocity, integrator);
        sim.add_jet(Jet {
            ring: Ring {
                center: DVec3::new(-0.6, 0.0, 0.0),
                radius: 0.1,
                core_radius: 0.03,
                circulation: 0.3,
                vortons: 40,
                tracers: 10,
                ..Default::default()
            },
            period: 0.02,
            start: 0.0,
            stop: 10.0,
        });
        sim.add_puff(Puff {
            ball: Ball {
                center: DVec3::new(0.5, -0.3, 0.0),
                radius: 0.06,
                density_deviation: -0.3,
                vortons: 30,
                tracers: 5,
                ..Default::default()
            },
            period: 0.03,
            start: 0.01,
            stop: 10.0,
        });
        sim
    }

    /// The scene without emitters: the grid fitted to the vortons keeps its shape from step to step, so that
    /// the Poisson technique starts from the history of its solutions.
    fn calm(velocity: VelocityMethod, integrator: Integrator) -> VpmSim {
        let params = VpmParams {
            velocity,
            integrator,
            stretching: true,
            auto_mollify: true,
            viscosity: 1e-4,
            grid_resolution: [16; 3],
            buoyancy: BuoyancyParams {
                heat_diffusivity: 1e-4,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut sim = VpmSim::new(params).expect("valid parameters");
        sim.add_ring(&Ring {
            radius: 0.3,
            core_radius: 0.08,
            vortons: 200,
            tracers: 50,
            ..Default::default()
        });
        sim.add_ball(&Ball {
            center: DVec3::new(0.0, 0.5, 0.0),
            radius: 0.15,
            density_deviation: 0.5,
            temperature_deviation: 10.0,
            vortons: 150,
            tracers: 30,
            ..Default::default()
        });
        sim.add_heat_source(HeatSource {
            center: DVec3::new(0.0, 0.45, 0.0),
            radius: 0.2,
            rate: 50.0,
            temperature: 30.0,
            smoke: 500.0,
            seed: 3,
        });
        sim
    }

    /// The vortons, tracers and jerk history of `a` and `b` the same, bit for bit.
    fn assert_same_vortons(a: &VpmSim, b: &VpmSim) {
        let (v, w) = (a.vortons(), b.vortons());
        let vecs = |x: &[DVec3]| flat(x).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let reals = |x: &[f64]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(vecs(&v.position) == vecs(&w.position), "positions");
        assert!(vecs(&v.vorticity) == vecs(&w.vorticity), "vorticity");
        assert!(reals(&v.radius) == reals(&w.radius), "radius");
        assert!(reals(&v.volume) == reals(&w.volume), "volume");
        assert!(reals(&v.density) == reals(&w.density), "density");
        assert!(
            reals(&v.temperature) == reals(&w.temperature),
            "temperature"
        );
        assert!(
            vecs(&a.tracers().position) == vecs(&b.tracers().position),
            "tracers"
        );
        assert!(
            vecs(&a.history.velocity) == vecs(&b.history.velocity),
            "jerk history"
        );
        assert!(
            vecs(&a.history.acceleration) == vecs(&b.history.acceleration),
            "jerk history"
        );
        assert_eq!(a.history.depth, b.history.depth);
        assert_eq!(a.checksum(), b.checksum());
        assert_eq!(a.max_strain.to_bits(), b.max_strain.to_bits());
        assert_eq!(a.mean_jerk.to_bits(), b.mean_jerk.to_bits());
    }

    fn check(velocity: VelocityMethod, integrator: Integrator, k: usize) {
        let (a, b) = check_resume(|| scene(velocity, integrator), k, 4, 1.0);
        assert_same_vortons(&a, &b);
        let start = scene(velocity, integrator);
        assert!(
            a.vortons().len() > start.vortons().len(),
            "the emitters emitted"
        );
        assert!(
            a.tracers().len() > start.tracers().len(),
            "the smoke was released"
        );
    }

    #[test]
    fn tree_rk2_resumes_bit_identically() {
        check(VelocityMethod::TreeVortons, Integrator::Rk2, 4);
    }

    #[test]
    fn poisson_rk4_resumes_bit_identically() {
        check(VelocityMethod::Poisson, Integrator::Rk4, 4);
    }

    /// Without emitters the fitted grid keeps its shape, so the Poisson solves start warm: from the solver's
    /// last solution (after step 0), from the other stage's (after step 1) and from each stage's
    /// extrapolated history (later).
    #[test]
    fn warm_poisson_solves_resume_bit_identically() {
        for (integrator, k) in [
            (Integrator::Rk2, 0),
            (Integrator::Rk2, 1),
            (Integrator::Rk2, 4),
            (Integrator::Rk4, 3),
        ] {
            let (a, b) = check_resume(|| calm(VelocityMethod::Poisson, integrator), k, 3, 1.0);
            assert_same_vortons(&a, &b);
            assert!(a.tracers().len() > calm(VelocityMethod::Poisson, integrator).tracers().len());
        }
    }

    #[test]
    fn poisson_state_saved_at_step_zero_resumes() {
        check(VelocityMethod::Poisson, Integrator::Rk2, 0);
    }

    #[test]
    fn every_saved_array_is_read() {
        // With stretching the time step is the strain's limit, which leaves the speed unread; without, the
        // strain is unread.
        let build = || scene(VelocityMethod::Poisson, Integrator::Rk2);
        // The emitters change the grid's shape, which restarts the solves from zero: the histories are read
        // in the calm scene.
        let histories = [
            "poisson.history_0_last",
            "poisson.history_0_before",
            "poisson.history_1_last",
            "poisson.history_1_before",
        ];
        assert_every_array_is_read(build, 4, 3, 1.0, &[&["max_speed"][..], &histories].concat());
        let calm = || calm(VelocityMethod::Poisson, Integrator::Rk2);
        assert_every_array_is_read(calm, 4, 3, 1.0, &["max_speed"]);
        // At step 0 the Poisson solver's own last solution is the next guess (later, a stage's history is;
        // with the emitters the first ring changes the grid's shape). Where the last solution is matters
        // after the first step only, when a stage has one solution of its own and starts from the other
        // stage's.
        assert_every_array_is_read(calm, 0, 2, 1.0, &["max_speed", "poisson.latest"]);
        // (After one step no vorton has the two steps of history that read its acceleration.)
        assert_every_array_is_read(calm, 1, 3, 1.0, &["max_speed", "jerk.acceleration"]);
        let build = || {
            let mut sim = scene(VelocityMethod::Poisson, Integrator::Rk2);
            sim.params.stretching = false;
            sim
        };
        assert_every_array_is_read(build, 4, 3, 1.0, &["max_strain"]);
    }

    #[test]
    fn states_of_other_scenes_are_refused_and_change_nothing() {
        let mut sim = scene(VelocityMethod::Poisson, Integrator::Rk2);
        run(&mut sim, 2, 1.0);
        // Another method's state (FLIP's arrays).
        let mut flip = crate::checkpoint::SavedState::default();
        flip.push_scalar("particles.count", 2u64);
        flip.push("particles.position", vec![0.0f32; 6]);
        assert_refused(&mut sim, &flip, "`vortons.count`");
        let mut tree = scene(VelocityMethod::TreeVortons, Integrator::Rk2);
        run(&mut tree, 1, 1.0);
        let no_poisson = tree.save_state().unwrap();
        assert_refused(&mut sim, &no_poisson, "`poisson.grid`");
        let mut without_jet = VpmSim::new(*sim.params()).unwrap();
        without_jet.add_ring(&Ring {
            vortons: 50,
            ..Default::default()
        });
        assert_refused(&mut sim, &without_jet.save_state().unwrap(), "`jets.next`");
        let mut short = sim.save_state().unwrap();
        for (name, a) in &mut short.arrays {
            if name == "vortons.vorticity" {
                if let crate::checkpoint::StateArray::F64(v) = a {
                    v.truncate(v.len() - 3);
                }
            }
        }
        assert_refused(&mut sim, &short, "`vortons.vorticity`");
    }
}
