//! The vortex particle method ("vortons", Gourlay parts 3, 8, 12 and 20), in 3D.
//!
//! Vortons carry vorticity; velocity comes from vorticity by the Biot–Savart law; passive tracers follow the
//! same velocity. A step:
//!
//! 1. **emit**: jets emit their next ring and puffs their next ball when due;
//! 2. **advect and stretch** (Heun's RK2, or RK4): at each stage, *velocity from vorticity* by one of the
//!    techniques of [`VelocityMethod`] — direct summation or treecode, at the vortons or at the points of a grid
//!    fitted to the vortons and then interpolated, or part 20's vector Poisson solve with integral boundary
//!    values ([`poisson`]) — with optional *auto-mollification* (part 12); vortons and
//!    tracers move with it, and the vorticity changes by *stretching and tilting* `dω/dt = (ω·∇)u`;
//! 3. **baroclinic**: buoyancy turns density gradients into vorticity, `Dω/Dt = (∇ρ × g)/ρ₀` ([`buoyancy`],
//!    part 8), with temperature entering the density by thermal expansion (Boussinesq);
//! 4. **heat**: heat sources warm the vortons inside them, and heat diffuses by particle strength exchange;
//! 5. **diffuse**: viscous diffusion by particle strength exchange ([`diffusion`]);
//! 6. **diagnostics**: total vorticity, linear impulse, enstrophy, energy, centroids, and part 12's *jerk*:
//!    the mean over vortons of |d³x/dt³| from the last three step velocities.
//!
//! Kernel and core profile: [`biot_savart`] (the high-order algebraic core of Winckelmans & Leonard). State
//! is f64; the pair loops run in f32 (see [`biot_savart`]). Every stage gives bit-identical results for any
//! thread count. Method notes: `docs/vpm.md`.

// Runge–Kutta stages and per-vorton loops index several parallel arrays (stage slopes, positions) together.
#![allow(clippy::needless_range_loop)]

pub mod biot_savart;
pub mod blob_splat;
pub mod buoyancy;
pub mod diffusion;
pub mod fmm;
pub mod init;
pub mod mollify;
mod octree;
mod params;
pub mod poisson;
mod resume;
pub mod sampling;
mod state;
pub mod tree;
pub mod velocity;

pub use init::{Ball, Block, HeatSource, Jet, Noise, Puff, Ring, Sheet, Tube};
pub use params::{
    BuoyancyParams, Decimation, Integrator, PoissonParams, PotentialBoundary, Splat, TreeMethod,
    TreeParams, VelocityMethod, VpmParams,
};
pub use state::{Tracers, Vortons};

use crate::checkpoint::SavedState;
use crate::diag::{Quantity, StageTimer};
use crate::par;
use crate::sim::{Advance, Description, Field, FrameSource, SimError, Simulation};
use buoyancy::Buoyancy;
use diffusion::Pse;
use glam::DVec3;
use rayon::prelude::*;
use std::time::Instant;
use velocity::{Query, VelocitySolver};

/// Per-vorton history for the jerk diagnostic: the velocity and acceleration of the previous step.
#[derive(Clone, Debug, Default)]
struct JerkHistory {
    velocity: Vec<DVec3>,
    acceleration: Vec<DVec3>,
    /// Steps of history each vorton has (0, 1 or 2+).
    depth: Vec<u8>,
}

/// A vortex particle simulation.
pub struct VpmSim {
    params: VpmParams,
    vortons: Vortons,
    tracers: Tracers,
    jets: Vec<(Jet, f64)>,
    puffs: Vec<(Puff, f64)>,
    heat_sources: Vec<HeatSource>,
    time: f64,
    steps: u64,
    max_speed: f64,
    /// Largest Frobenius norm of the velocity gradient at a vorton at the last evaluation (1/s).
    max_strain: f64,
    mean_jerk: f64,
    /// Multigrid cycles of the last step's velocity evaluations (Poisson technique).
    step_cycles: usize,
    history: JerkHistory,
    // Scratch, reused every step.
    solver: VelocitySolver,
    buoyancy: Buoyancy,
    pse: Pse,
    x0: Vec<DVec3>,
    w0: Vec<DVec3>,
    t0: Vec<DVec3>,
    ku: Vec<Vec<DVec3>>,
    kw: Vec<Vec<DVec3>>,
    kt: Vec<Vec<DVec3>>,
    alpha: Vec<DVec3>,
}

impl VpmSim {
    /// Bytes a simulation of `vortons` vortons, `tracers` tracers and a grid of `grid_points` points holds,
    /// for refusing scenes too large for memory before allocating: per vorton its state, the Runge–Kutta
    /// stages and the velocity buffers (about 0.6 KiB with stretching), per tracer about 0.2 KiB, per grid
    /// point the velocity and its gradient. In f64, so that absurd counts cannot overflow.
    pub fn estimate_bytes(vortons: f64, tracers: f64, grid_points: f64) -> f64 {
        vortons * 640.0 + tracers * 200.0 + grid_points * 120.0
    }

    /// An empty simulation, or which parameter is out of range.
    pub fn new(params: VpmParams) -> Result<Self, SimError> {
        let bad = |m: String| Err(SimError::InvalidInput(m));
        params.validate()?;
        if params
            .grid_resolution
            .iter()
            .any(|&n| !(2..=1024).contains(&n))
        {
            return bad(format!(
                "grid resolution {:?}: each axis must be in 2..=1024",
                params.grid_resolution
            ));
        }
        let g = params.buoyancy.gravity;
        if !g.iter().all(|g| g.is_finite()) {
            return bad(format!("gravity {g:?}: must be finite"));
        }
        Ok(Self {
            params,
            vortons: Vortons::default(),
            tracers: Tracers::default(),
            jets: Vec::new(),
            puffs: Vec::new(),
            heat_sources: Vec::new(),
            time: 0.0,
            steps: 0,
            max_speed: 0.0,
            max_strain: 0.0,
            mean_jerk: 0.0,
            step_cycles: 0,
            history: JerkHistory::default(),
            solver: VelocitySolver::default(),
            buoyancy: Buoyancy::default(),
            pse: Pse::default(),
            x0: Vec::new(),
            w0: Vec::new(),
            t0: Vec::new(),
            ku: Vec::new(),
            kw: Vec::new(),
            kt: Vec::new(),
            alpha: Vec::new(),
        })
    }

    /// The parameters.
    pub fn params(&self) -> &VpmParams {
        &self.params
    }

    /// Hands the direct Biot–Savart sums of the velocity stage (`direct-vortons`, `direct-grid`, and the
    /// Poisson technique's boundary values with `boundary = "direct"`) to `device` (the GPU backend); a
    /// device failure ends the step that asked with [`SimError::Device`].
    pub fn set_direct_device(&mut self, device: velocity::SharedDevice) {
        self.solver.device = Some(device);
    }

    /// Hands the vector Poisson solve of the Poisson technique (`velocity = "poisson"`) to `device` (the GPU
    /// backend): each component by MGPCG on the box ([`poisson::SharedPoissonDevice`]) instead of the CPU's
    /// box multigrid; the boundary integral stays here (its direct sums go to the device of
    /// [`set_direct_device`](Self::set_direct_device)), the splat and the curl go where
    /// [`set_splat_device`](Self::set_splat_device) and [`set_grid_device`](Self::set_grid_device) send
    /// them. A device failure ends the step with [`SimError::Device`].
    pub fn set_poisson_device(&mut self, device: poisson::SharedPoissonDevice) {
        self.solver.poisson.device = Some(device);
    }

    /// Hands the Poisson technique's splat (`velocity = "poisson"`) to `device` (the GPU backend): by
    /// cloud-in-cell instead of [`mollify::FittedGrid::splat`] (`splat = "cic"`) and by each vorton's
    /// Gaussian instead of [`blob_splat::BlobSplat`] (`splat = "gaussian"`); a device failure ends the step
    /// with [`SimError::Device`].
    pub fn set_splat_device(&mut self, device: poisson::SharedSplatDevice) {
        self.solver.poisson.splat_device = Some(device);
    }

    /// Hands the grid techniques' last stage (`poisson`, `direct-grid`, `tree-grid`) to `device` (the GPU
    /// backend): the velocity at the grid points (the Poisson technique's curl) sampled at the vortons with
    /// its gradient and at the tracers ([`sampling::GridDevice`]); a device failure ends the step with
    /// [`SimError::Device`].
    pub fn set_grid_device(&mut self, device: sampling::SharedGridDevice) {
        self.solver.poisson.grid_device = Some(device.clone());
        self.solver.grid_device = Some(device);
    }

    /// Hands the baroclinic stage's grid work (the density splat, its gradient, the gradient sampled at the
    /// vortons) to `device` (the GPU backend); a device failure ends the step with [`SimError::Device`].
    pub fn set_baroclinic_device(&mut self, device: buoyancy::SharedDensityGradientDevice) {
        self.buoyancy.device = Some(device);
    }

    /// Hands the particle strength exchanges of diffusion and heat to `device` (the GPU backend); a device
    /// failure ends the step with [`SimError::Device`].
    pub fn set_exchange_device(&mut self, device: diffusion::SharedExchangeDevice) {
        self.pse.device = Some(device);
    }

    /// The vortons.
    pub fn vortons(&self) -> &Vortons {
        &self.vortons
    }

    /// The vortons, for editing (e.g. to add vorticity from a game event).
    pub fn vortons_mut(&mut self) -> &mut Vortons {
        &mut self.vortons
    }

    /// The tracers.
    pub fn tracers(&self) -> &Tracers {
        &self.tracers
    }

    /// The tracers, for editing.
    pub fn tracers_mut(&mut self) -> &mut Tracers {
        &mut self.tracers
    }

    /// Adds a vortex ring.
    pub fn add_ring(&mut self, ring: &Ring) {
        ring.add_to(&mut self.vortons, &mut self.tracers);
        self.refresh_speed();
    }

    /// Adds a vortex tube.
    pub fn add_tube(&mut self, tube: &Tube) {
        tube.add_to(&mut self.vortons, &mut self.tracers);
        self.refresh_speed();
    }

    /// Adds a vortex sheet.
    pub fn add_sheet(&mut self, sheet: &Sheet) {
        sheet.add_to(&mut self.vortons);
        self.refresh_speed();
    }

    /// Adds random vorticity.
    pub fn add_noise(&mut self, noise: &Noise) {
        noise.add_to(&mut self.vortons);
        self.refresh_speed();
    }

    /// Adds a ball of heavy, light or hot fluid.
    pub fn add_ball(&mut self, ball: &Ball) {
        ball.add_to(&mut self.vortons, &mut self.tracers);
        self.refresh_speed();
    }

    /// Adds a block of heavy, light or hot fluid.
    pub fn add_block(&mut self, block: &Block) {
        block.add_to(&mut self.vortons, &mut self.tracers);
        self.refresh_speed();
    }

    /// Adds a heat source.
    pub fn add_heat_source(&mut self, source: HeatSource) {
        self.heat_sources.push(source);
    }

    /// Adds a puff that emits balls from `puff.start` on.
    pub fn add_puff(&mut self, puff: Puff) {
        let first = puff.start;
        self.puffs.push((puff, first));
    }

    /// The buoyancy stage's grids (density deviation and its gradient) of the last step.
    pub fn buoyancy(&self) -> &Buoyancy {
        &self.buoyancy
    }

    /// Adds a jet that emits rings from `jet.start` on.
    pub fn add_jet(&mut self, jet: Jet) {
        let first = jet.start;
        self.jets.push((jet, first));
    }

    /// Velocity (m/s) at every vorton for the current state, by the configured technique.
    pub fn vorton_velocities(&mut self) -> Vec<DVec3> {
        self.evaluate(false, None);
        self.solver.u.clone()
    }

    /// The velocity solver (grid, tree statistics) of the last evaluation.
    pub fn solver(&self) -> &VelocitySolver {
        &self.solver
    }

    fn refresh_speed(&mut self) {
        self.evaluate(self.params.stretching, None);
        self.max_speed = self.current_max_speed();
        self.max_strain = self.current_max_strain();
    }

    fn current_max_strain(&self) -> f64 {
        // The largest square first: the square root is monotonic and correctly rounded, so the root of the
        // largest square is the largest root.
        let j = &self.solver.jac;
        par::max(j.len(), |i| j[i].iter().map(|x| x * x).sum::<f64>())
            .max(0.0)
            .sqrt()
    }

    fn current_max_speed(&self) -> f64 {
        let u = &self.solver.u;
        let t = &self.solver.u_tracers;
        // As in `current_max_strain`: the root of the largest square.
        par::max(u.len(), |i| u[i].length_squared())
            .max(par::max(t.len(), |i| t[i].length_squared()))
            .max(0.0)
            .sqrt()
    }

    /// Velocity from vorticity for the current vortons and tracers into the solver's buffers, at Runge–Kutta
    /// stage `stage` of a step (`None` outside one).
    fn evaluate(&mut self, gradient: bool, stage: Option<usize>) {
        let v = &self.vortons;
        self.alpha.clear();
        self.alpha.extend((0..v.len()).map(|i| v.strength(i)));
        self.solver.solve(
            &self.params,
            &Query {
                position: &v.position,
                strength: &self.alpha,
                radius: &v.radius,
                tracers: &self.tracers.position,
                gradient,
                stage,
            },
        );
    }

    /// Total vorticity Σ ω V (m³/s): conserved without stretching (it is the circulation per unit length
    /// summed over the vortons).
    pub fn total_vorticity(&self) -> DVec3 {
        self.moments().total_vorticity
    }

    /// Linear impulse ½ Σ x × ω V (m⁴/s), conserved in unbounded inviscid flow (Saffman 1992, §3.2).
    pub fn impulse(&self) -> DVec3 {
        self.moments().impulse
    }

    /// Centroid of the vortons weighted by |ω| V (m).
    pub fn centroid(&self) -> DVec3 {
        self.moments().centroid
    }

    /// The sums over the vortons behind the step's diagnostics, in one pass (each is summed in the order a
    /// pass of its own would use, so the values are the same).
    fn moments(&self) -> Moments {
        let v = &self.vortons;
        let u = &self.solver.u;
        let s = par::sum_n::<16>(v.len(), |i| {
            let (x, a) = (v.position[i], v.strength(i));
            let energy = u.get(i).map_or(0.0, |u| u.dot(x.cross(a)));
            let enstrophy = v.vorticity[i].length_squared() * v.volume[i];
            let m = v.density[i].max(0.0) * v.volume[i];
            let (xm, impulse, w) = (x * m, x.cross(a) * 0.5, a.length());
            let xw = x * w;
            [
                energy, enstrophy, xm.x, xm.y, xm.z, m, a.x, a.y, a.z, impulse.x, impulse.y,
                impulse.z, xw.x, xw.y, xw.z, w,
            ]
        });
        let weighted = |sum: [f64; 3], weight: f64| {
            if weight > 0.0 {
                DVec3::from_array(sum) / weight
            } else {
                DVec3::ZERO
            }
        };
        Moments {
            energy_integral: s[0],
            enstrophy: s[1],
            density_centroid: weighted([s[2], s[3], s[4]], s[5]),
            total_vorticity: DVec3::new(s[6], s[7], s[8]),
            impulse: DVec3::new(s[9], s[10], s[11]),
            centroid: weighted([s[12], s[13], s[14]], s[15]),
        }
    }

    /// A 64-bit FNV-1a hash of the exact bits of the state (vortons with their density and temperature, and
    /// tracers).
    pub fn checksum(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let v = &self.vortons;
        let vecs = v
            .position
            .iter()
            .chain(&v.vorticity)
            .chain(&self.tracers.position);
        for p in vecs {
            for x in p.to_array() {
                h ^= x.to_bits();
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        for x in v
            .radius
            .iter()
            .chain(&v.volume)
            .chain(&v.density)
            .chain(&v.temperature)
        {
            h ^= x.to_bits();
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }

    fn emit(&mut self) {
        let (v, t) = (&mut self.vortons, &mut self.tracers);
        for (jet, next) in &mut self.jets {
            while *next <= self.time + 1e-12 && *next <= jet.stop {
                jet.ring.add_to(v, t);
                jet.ring.seed = jet.ring.seed.wrapping_add(1);
                *next += jet.period.max(1e-9);
            }
        }
        for (puff, next) in &mut self.puffs {
            while *next <= self.time + 1e-12 && *next <= puff.stop {
                puff.ball.add_to(v, t);
                puff.ball.seed = puff.ball.seed.wrapping_add(1);
                *next += puff.period.max(1e-9);
            }
        }
    }

    /// Heat sources warm the vortons inside them and release smoke; heat diffuses. `time` is the step's
    /// start.
    fn heat(&mut self, time: f64, dt: f64) {
        for s in &self.heat_sources {
            s.apply(&mut self.vortons, &mut self.tracers, time, dt);
        }
        self.pse
            .diffuse_heat_kept(&mut self.vortons, self.params.buoyancy.heat_diffusivity, dt);
    }

    /// Advection of vortons and tracers and stretching of vorticity over `dt` by the configured Runge–Kutta
    /// scheme: each stage evaluates velocity (and its gradient) at the stage's positions.
    fn advect_and_stretch(&mut self, dt: f64) {
        let stretching = self.params.stretching;
        let (weights, offsets): (&[f64], &[f64]) = match self.params.integrator {
            Integrator::Rk2 => (&[0.5, 0.5], &[0.0, 1.0]),
            Integrator::Rk4 => (
                &[1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0],
                &[0.0, 0.5, 0.5, 1.0],
            ),
        };
        let stages = weights.len();
        let last = stages - 1;
        let n = self.vortons.len();
        self.ku.resize_with(last, Vec::new);
        self.kt.resize_with(last, Vec::new);
        self.kw.resize_with(stages, Vec::new);
        for s in 0..stages {
            if s == 1 {
                // The start of the step moves to x₀ (and ω₀, t₀) instead of being copied: the buffers
                // swapped in are written whole at every later stage and at the end. (Both schemes have more
                // than one stage.) Without stretching the vorticity stays as it is.
                std::mem::swap(&mut self.x0, &mut self.vortons.position);
                std::mem::swap(&mut self.t0, &mut self.tracers.position);
                self.vortons.position.resize(n, DVec3::ZERO);
                self.tracers.position.resize(self.t0.len(), DVec3::ZERO);
                if stretching {
                    std::mem::swap(&mut self.w0, &mut self.vortons.vorticity);
                    self.vortons.vorticity.resize(n, DVec3::ZERO);
                }
            }
            if s > 0 {
                let c = offsets[s] * dt;
                let (ku, kw, kt) = (&self.ku[s - 1], &self.kw[s - 1], &self.kt[s - 1]);
                let (x0, w0, t0) = (&self.x0, &self.w0, &self.t0);
                let v = &mut self.vortons;
                par_map(&mut v.position, |i| x0[i] + ku[i] * c);
                if stretching {
                    par_map(&mut v.vorticity, |i| w0[i] + kw[i] * c);
                }
                par_map(&mut self.tracers.position, |i| t0[i] + kt[i] * c);
            }
            self.evaluate(stretching, Some(s));
            if s < last {
                // The solver's buffers are written whole by the next evaluation: this stage's keep theirs.
                std::mem::swap(&mut self.ku[s], &mut self.solver.u);
                std::mem::swap(&mut self.kt[s], &mut self.solver.u_tracers);
            }
            if stretching {
                let kw = &mut self.kw[s];
                kw.resize(n, DVec3::ZERO);
                let jac = &self.solver.jac;
                let w = &self.vortons.vorticity;
                par_map(kw, |i| {
                    let j = &jac[i];
                    DVec3::new(
                        j[0] * w[i].x + j[1] * w[i].y + j[2] * w[i].z,
                        j[3] * w[i].x + j[4] * w[i].y + j[5] * w[i].z,
                        j[6] * w[i].x + j[7] * w[i].y + j[8] * w[i].z,
                    )
                });
            }
        }
        // x₀ + Δt Σ_s b_s k_s, the stages added in order; the last stage's velocities stay in the solver (the
        // next step's CFL estimate reads them).
        let combine = |start: &[DVec3], k: &[&[DVec3]], out: &mut Vec<DVec3>| {
            par_map(out, |i| {
                let mut d = DVec3::ZERO;
                for (k, &b) in k.iter().zip(weights) {
                    d += k[i] * b;
                }
                start[i] + d * dt
            });
        };
        // Every stage's slopes, the last one's still in the solver.
        fn slopes<'a>(earlier: &'a [Vec<DVec3>], last: Option<&'a [DVec3]>) -> Vec<&'a [DVec3]> {
            earlier.iter().map(Vec::as_slice).chain(last).collect()
        }
        let ku = slopes(&self.ku, Some(&self.solver.u));
        let kt = slopes(&self.kt, Some(&self.solver.u_tracers));
        let kw = slopes(&self.kw, None);
        let v = &mut self.vortons;
        combine(&self.x0, &ku, &mut v.position);
        if stretching {
            combine(&self.w0, &kw, &mut v.vorticity);
        }
        combine(&self.t0, &kt, &mut self.tracers.position);
    }

    /// Part 12's jerk metric: each vorton's step velocity `(x' − x)/Δt` is differenced twice in time; the
    /// mean of |d³x/dt³| (m/s³) over vortons with two steps of history.
    fn jerk(&mut self, dt: f64) -> f64 {
        let n = self.vortons.len();
        let h = &mut self.history;
        h.velocity.resize(n, DVec3::ZERO);
        h.acceleration.resize(n, DVec3::ZERO);
        h.depth.resize(n, 0);
        // Differences over Δt by one multiplication each instead of nine divisions per vorton (the
        // diagnostics stage 0.40 → 0.29 ms on `dye-drop`).
        let inv_dt = 1.0 / dt;
        let (mut sum, mut count) = (0.0, 0usize);
        // Every vorton was in `x0`: emission comes before advection.
        let steps = self.vortons.position.iter().zip(&self.x0);
        let history = h
            .velocity
            .iter_mut()
            .zip(&mut h.acceleration)
            .zip(&mut h.depth);
        for ((x, x0), ((v, a), depth)) in steps.zip(history) {
            let vel = (*x - *x0) * inv_dt;
            let acc = (vel - *v) * inv_dt;
            if *depth >= 2 {
                sum += ((acc - *a) * inv_dt).length();
                count += 1;
            }
            *depth = depth.saturating_add(1).min(2);
            *v = vel;
            *a = acc;
        }
        if count > 0 {
            sum / count as f64
        } else {
            0.0
        }
    }

    fn measure(&self) -> Vec<(&'static str, Quantity)> {
        let m = self.moments();
        // E = ρ ∫ u · (x × ω) dV (Saffman 1992, eq. 3.5.10, unbounded fluid at rest at infinity).
        let energy = self.params.ambient_density * m.energy_integral;
        let mut q = vec![
            ("vorton_count", Quantity::Count(self.vortons.len() as u64)),
            ("tracer_count", Quantity::Count(self.tracers.len() as u64)),
            (
                "circulation",
                Quantity::Vector(m.total_vorticity.to_array().to_vec()),
            ),
            ("impulse", Quantity::Vector(m.impulse.to_array().to_vec())),
            ("centroid", Quantity::Vector(m.centroid.to_array().to_vec())),
            (
                "density_centroid",
                Quantity::Vector(m.density_centroid.to_array().to_vec()),
            ),
            ("enstrophy", Quantity::Scalar(m.enstrophy)),
            ("mean_jerk", Quantity::Scalar(self.mean_jerk)),
            ("kinetic_energy", Quantity::Scalar(energy)),
            ("max_speed", Quantity::Scalar(self.max_speed)),
            ("grid_spacing", Quantity::Scalar(self.solver.grid.spacing)),
        ];
        if self.params.velocity == VelocityMethod::Poisson {
            let info = self.solver.poisson.info;
            q.push(("poisson_cycles", Quantity::Count(self.step_cycles as u64)));
            q.push(("poisson_residual", Quantity::Scalar(info.residual)));
        }
        q
    }

    /// Splats `value(i)` (a per-vorton quantity times volume) onto the fitted grid by cloud-in-cell and divides
    /// by the cell volume.
    fn splat(&self, value: impl Fn(usize) -> DVec3 + Sync) -> Vec<DVec3> {
        let g = self.solver.grid;
        let inv = 1.0 / (g.spacing * g.spacing * g.spacing);
        let mut out = Vec::new();
        g.splat(&self.vortons.position, |i| value(i) * inv, &mut out);
        out
    }
}

/// `out[i] = f(i)` for every entry, in parallel (each entry on its own, so the schedule changes nothing).
fn par_map<T: Send>(out: &mut [T], f: impl Fn(usize) -> T + Sync + Send) {
    out.par_chunks_mut(RK_CHUNK).enumerate().for_each(|(c, o)| {
        for (k, o) in o.iter_mut().enumerate() {
            *o = f(c * RK_CHUNK + k);
        }
    });
}

/// Entries per task of [`par_map`].
const RK_CHUNK: usize = 4096;

/// Sums over the vortons (see [`VpmSim::moments`]).
struct Moments {
    /// `Σ u · (x × ω) V` (m⁵/s²): the kinetic energy over the density.
    energy_integral: f64,
    /// `Σ |ω|² V` (m³/s²).
    enstrophy: f64,
    /// Centroid weighted by the positive density deviations (m).
    density_centroid: DVec3,
    /// `Σ ω V` (m³/s).
    total_vorticity: DVec3,
    /// `½ Σ x × ω V` (m⁴/s).
    impulse: DVec3,
    /// Centroid weighted by |ω| V (m).
    centroid: DVec3,
}

/// The grid fields of a vorton simulation: |ω| (1/s), density ρ₀ + ρ' (kg/m³), the density deviation ρ'
/// with thermal expansion (kg/m³), temperature deviation (K), speed |u| and the velocity components (m/s),
/// and |A| (m²/s), each on the grid fitted to the vortons.
pub const FIELDS: &[&str] = &[
    "vorticity_magnitude",
    "density",
    "density_deviation",
    "temperature",
    "speed",
    "velocity_x",
    "velocity_y",
    "velocity_z",
    "vector_potential",
];

/// Stages of a step, in order ([`Description::stages`]); the Poisson technique's four run inside
/// `advect_stretch`, whose time excludes theirs.
pub const STAGES: &[&str] = &[
    "emit",
    "advect_stretch",
    "splat_vorticity",
    "vector_potential",
    "poisson",
    "curl",
    "baroclinic",
    "heat",
    "diffuse",
    "diagnostics",
];

/// What a vortex particle simulation offers: the grid fields of [`FIELDS`], the per-vorton
/// `vorticity_magnitude` (1/s), `strength` (|ω|V, m³/s), `vorticity_x`…`_z` (1/s), core `radius` (m),
/// `density_deviation` (kg/m³) and `temperature` (deviation, K), pictures made from its tracers (or vortons), and the arrays
/// `vorticity_magnitude` and `density` with every frame.
pub fn describe() -> Description {
    Description {
        method: "vpm",
        fields: FIELDS.to_vec(),
        particle_values: vec![
            "vorticity_magnitude",
            "strength",
            "vorticity_x",
            "vorticity_y",
            "vorticity_z",
            "radius",
            "density_deviation",
            "temperature",
        ],
        stages: STAGES,
        array_fields: &["vorticity_magnitude", "density"],
        picture: FrameSource::Particles,
        default_view: "tracers",
    }
}

/// Positions as flat f32 triples, for output.
fn positions_f32(p: &[DVec3]) -> Vec<f32> {
    p.iter()
        .flat_map(|p| [p.x as f32, p.y as f32, p.z as f32])
        .collect()
}

impl Simulation for VpmSim {
    fn dim(&self) -> usize {
        3
    }

    fn resolution(&self) -> [usize; 3] {
        self.solver.grid.dims
    }

    fn cell_size(&self) -> f64 {
        self.solver.grid.spacing
    }

    fn grid_origin(&self) -> [f64; 3] {
        self.solver.grid.origin
    }

    fn time(&self) -> f64 {
        self.time
    }

    fn steps(&self) -> u64 {
        self.steps
    }

    /// The step that moves the fastest vorton or tracer `cfl` times the smallest core radius and, with
    /// stretching, keeps `Δt ‖∇u‖ ≤ cfl/2`: the stretching term rotates ω at rates up to ‖∇u‖, and Runge–Kutta
    /// steps of a rotation grow it unless that product stays small.
    fn max_dt(&self, cfl: f64) -> f64 {
        let r = &self.vortons.radius;
        let sigma = r.iter().copied().fold(f64::INFINITY, f64::min);
        let sigma = if sigma.is_finite() {
            sigma
        } else {
            self.solver.grid.spacing
        };
        let advect = cfl * sigma / self.max_speed.max(1e-12);
        if self.params.stretching && self.max_strain > 0.0 {
            advect.min(0.5 * cfl / self.max_strain)
        } else {
            advect
        }
    }

    fn describe(&self) -> Description {
        describe()
    }

    fn advance(&mut self, dt: f64, timer: &mut StageTimer) -> Result<Advance, SimError> {
        if !self.jets.is_empty() || !self.puffs.is_empty() {
            timer.time("emit", || self.emit());
        }
        // Part 20's stages run inside every velocity evaluation: only this step's are counted (not those of
        // evaluations between steps, e.g. a frame's velocity field).
        self.solver.poisson.take_timings();
        let t = Instant::now();
        self.advect_and_stretch(dt);
        let total = t.elapsed().as_secs_f64() * 1e3;
        let p = self.solver.poisson.take_timings();
        let inner = p.splat + p.boundary + p.poisson + p.curl;
        // The inner stages are timed inside the whole: clock granularity aside, never more.
        timer.add("advect_stretch", (total - inner).max(0.0));
        if self.params.velocity == VelocityMethod::Poisson {
            timer.add("splat_vorticity", p.splat);
            timer.add("vector_potential", p.boundary);
            timer.add("poisson", p.poisson);
            timer.add("curl", p.curl);
            self.step_cycles = p.cycles;
        }
        if let Some(detail) = self.solver.device_error.take() {
            return Err(SimError::Device {
                step: self.steps + 1,
                detail,
            });
        }
        if let Some(source) = self.solver.error.take() {
            return Err(SimError::solve_failed("poisson", self.steps + 1, source));
        }
        let t = Instant::now();
        if self.buoyancy.apply(&mut self.vortons, &self.params, dt) {
            timer.add("baroclinic", t.elapsed().as_secs_f64() * 1e3);
        }
        if let Some(detail) = self.buoyancy.device_error.take() {
            return Err(SimError::Device {
                step: self.steps + 1,
                detail,
            });
        }
        // The exchanges of heat and of vorticity see the same vortons (heat sources change temperatures
        // only): they share one binning, made by the first of them.
        self.pse.forget_bins();
        if !self.heat_sources.is_empty() || self.params.buoyancy.heat_diffusivity > 0.0 {
            timer.time("heat", || self.heat(self.time, dt));
        }
        if self.params.viscosity > 0.0 {
            timer.time("diffuse", || {
                self.pse
                    .diffuse_kept(&mut self.vortons, self.params.viscosity, dt)
            });
        }
        if let Some(detail) = self.pse.device_error.take() {
            return Err(SimError::Device {
                step: self.steps + 1,
                detail,
            });
        }
        let quantities = timer.time("diagnostics", || {
            self.mean_jerk = self.jerk(dt);
            self.time += dt;
            self.steps += 1;
            // The speed of the last stage's evaluation: the next step's CFL estimate.
            self.max_speed = self.current_max_speed();
            self.max_strain = self.current_max_strain();
            self.measure()
        });
        let finite = self
            .vortons
            .position
            .iter()
            .chain(&self.vortons.vorticity)
            .all(|p| p.is_finite())
            && self.max_speed.is_finite();
        if !finite {
            return Err(SimError::Diverged {
                stage: "advect_stretch",
                step: self.steps,
                detail: format!("non-finite vorton state (max speed {})", self.max_speed),
            });
        }
        Ok(Advance {
            substeps: 1,
            quantities,
            clamps: Vec::new(),
        })
    }

    /// See [`FIELDS`]. `speed` and the velocity components need a technique that works on the grid and
    /// `vector_potential` the Poisson technique; otherwise they are `None`.
    fn field(&self, name: &str) -> Option<Field> {
        let g = self.solver.grid;
        let v = &self.vortons;
        let (rho0, beta) = (
            self.params.ambient_density,
            self.params.buoyancy.thermal_expansion,
        );
        let scalar = |f: &(dyn Fn(usize) -> f64 + Sync)| -> Vec<f64> {
            self.splat(|i| DVec3::new(f(i) * v.volume[i], 0.0, 0.0))
                .iter()
                .map(|d| d.x)
                .collect()
        };
        let (data, signed): (Vec<f32>, bool) = match name {
            "vorticity_magnitude" => (
                self.splat(|i| v.strength(i))
                    .iter()
                    .map(|w| w.length() as f32)
                    .collect(),
                false,
            ),
            "density" => (
                scalar(&|i| v.buoyant_density(i, rho0, beta))
                    .iter()
                    .map(|d| (rho0 + d) as f32)
                    .collect(),
                false,
            ),
            "density_deviation" => (
                scalar(&|i| v.buoyant_density(i, rho0, beta))
                    .iter()
                    .map(|&d| d as f32)
                    .collect(),
                true,
            ),
            "temperature" => (
                scalar(&|i| v.temperature[i])
                    .iter()
                    .map(|&d| d as f32)
                    .collect(),
                true,
            ),
            "speed" if self.params.velocity.on_grid() => {
                let u = self.solver.grid_velocity();
                if u.len() != g.len() {
                    return None;
                }
                (
                    u.iter()
                        .map(|u| DVec3::from_array(*u).length() as f32)
                        .collect(),
                    false,
                )
            }
            "velocity_x" | "velocity_y" | "velocity_z" if self.params.velocity.on_grid() => {
                let u = self.solver.grid_velocity();
                if u.len() != g.len() {
                    return None;
                }
                let axis = match name {
                    "velocity_x" => 0,
                    "velocity_y" => 1,
                    _ => 2,
                };
                (u.iter().map(|u| u[axis] as f32).collect(), true)
            }
            "vector_potential" if self.params.velocity == VelocityMethod::Poisson => {
                let a = self.solver.poisson.potential();
                if a.len() != g.len() {
                    return None;
                }
                (a.iter().map(|a| a.length() as f32).collect(), false)
            }
            _ => return None,
        };
        Some(Field {
            shape: vec![g.dims[2], g.dims[1], g.dims[0]],
            data,
            signed,
        })
    }

    fn particle_positions(&self) -> Vec<f32> {
        positions_f32(&self.vortons.position)
    }

    fn tracer_positions(&self) -> Vec<f32> {
        positions_f32(&self.tracers.position)
    }

    /// `vorticity_magnitude`: |ω| (1/s); `strength`: |ω| V (m³/s).
    fn particle_values(&self, name: &str) -> Option<Vec<f32>> {
        let v = &self.vortons;
        match name {
            "vorticity_magnitude" => Some(v.vorticity.iter().map(|w| w.length() as f32).collect()),
            "strength" => Some(
                (0..v.len())
                    .map(|i| v.strength(i).length() as f32)
                    .collect(),
            ),
            "vorticity_x" => Some(v.vorticity.iter().map(|w| w.x as f32).collect()),
            "vorticity_y" => Some(v.vorticity.iter().map(|w| w.y as f32).collect()),
            "vorticity_z" => Some(v.vorticity.iter().map(|w| w.z as f32).collect()),
            "radius" => Some(v.radius.iter().map(|&r| r as f32).collect()),
            "density_deviation" => Some(v.density.iter().map(|&d| d as f32).collect()),
            "temperature" => Some(v.temperature.iter().map(|&t| t as f32).collect()),
            _ => None,
        }
    }

    /// The vortons and tracers and what else a later step reads:
    ///
    /// - `vortons.count` (u64) and every attribute of [`Vortons`]: `vortons.position` and
    ///   `vortons.vorticity` (f64 x, y, z triples), `vortons.radius` (the core radius before
    ///   auto-mollification), `vortons.volume`, `vortons.density` and `vortons.temperature` (f64);
    /// - `tracers.count` (u64) and `tracers.position` (f64 triples);
    /// - `time` and `steps`; `max_speed` and `max_strain`, which [`Simulation::max_dt`] reads (they are the
    ///   last evaluation's, not recomputable without repeating it);
    /// - the jerk diagnostic's per-vorton history: `jerk.count` (u64), `jerk.velocity` and
    ///   `jerk.acceleration` (f64 triples) and `jerk.depth` (u8);
    /// - the emitters' carried state: per jet and per puff its next emission time (`jets.next`, `puffs.next`,
    ///   f64) and the seed of its next ring or ball (`jets.seed`, `puffs.seed`, u64, advanced at each emission);
    /// - with the Poisson technique, the initial guesses of its next solves (`poisson.*`, see
    ///   `PoissonVelocity::save_state` in [`poisson`]).
    ///
    /// Not saved: the scene (parameters, heat sources, the emitters' rings and balls but for their seeds),
    /// which the resumed simulation is built from. Heat sources release smoke counted from `time` and seeded
    /// by a hash of it, auto-mollification derives the radii from the grid fitted at each evaluation, and no
    /// random generator lives across steps, so none of them carries state. `mean_jerk` and `step_cycles` are
    /// set by a step before its diagnostics read them; the velocity solver's buffers (fitted grid, tree,
    /// velocities and gradients, the splat), the Runge–Kutta stages, the buoyancy grids and the diffusion's
    /// bins are rewritten by every step before they are read.
    fn save_state(&self) -> Result<SavedState, SimError> {
        Ok(self.save())
    }

    fn restore_state(&mut self, state: &SavedState) -> Result<(), SimError> {
        self.restore(state)
    }

    fn memory_bytes(&self) -> usize {
        let n = self.vortons.len();
        self.vortons.bytes()
            + self.tracers.len() * 24
            + self.solver.bytes()
            + self.pse.bytes()
            + self.buoyancy.bytes()
            + n * 24 * (3 + 2 * self.ku.len())
    }
}
