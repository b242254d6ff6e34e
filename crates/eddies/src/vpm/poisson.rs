//! Velocity from vorticity by a vector Poisson solve with integral boundary values (Gourlay part 20).
//!
//! The velocity of an unbounded incompressible flow is `u = ∇ × A`, where the vector potential solves
//! `∇²A = −ω` and, in free space, is the integral `A(x) = (1/4π) ∫ ω(y)/|x − y| dy`. Part 20's recipe on the
//! grid fitted to the vortons:
//!
//! 1. **splat**: the vortons' strengths α = ω V are shared out to the grid points and divided by the cell
//!    volume (the grid carries the vortons' total vorticity exactly): by part 20's cloud-in-cell (the
//!    default) or by a Gaussian as wide as each vorton's core ([`super::blob_splat`], for cores wider than a
//!    cell; [`Splat`]);
//! 2. **boundary**: `A` on the outermost layer of grid points from the integral over the vortons — by the
//!    treecode, by direct summation, or zero ([`super::PotentialBoundary`]) — optionally *decimated*
//!    ([`Decimation`]): part 20's every other point along a row (about half the cost), or every other point
//!    both ways on each face (about a quarter, the default); the points between take the mean of their two or
//!    four computed neighbours. Part 20 copies one neighbour instead; the mean costs the same and is
//!    second-order accurate (`docs/vpm.md`);
//! 3. **poisson**: the interior from the box multigrid of [`crate::linsolve`] ([`BoxMultigrid`]), the three
//!    components in the same passes, the boundary layer as Dirichlet values that the up-sampling never
//!    overwrites (part 20's `INTERIOR_ONLY`);
//! 4. **curl**: `u = ∇ × A` by central differences (one-sided at the faces); on a device together with the
//!    sampling at the vortons that follows ([`PoissonVelocity::sample_on`], [`super::sampling`]).
//!
//! With zero boundary values the boundary acts as a wall the flow cannot cross (`A × n = 0` there), which is
//! part 20's Figure 1 bottom row; with the integral the domain is open and the grid solution approaches the
//! Biot–Savart velocity at second order in the grid spacing.
//!
//! The kernel of the integral is the stream function of the vortons' core ([`super::biot_savart`]): for the
//! high-order algebraic core `G(r) = (r² + 3σ²/2)/(r² + σ²)^{3/2}`, whose curl is exactly the velocity kernel.
//!
//! Every stage is deterministic: the splat sums each grid value in a fixed order (even, then odd plane groups,
//! each in point order), and the solver and curl are stencils over fixed chunks.

use super::blob_splat::BlobSplat;
use super::mollify::FittedGrid;
use super::params::{Decimation, PoissonParams, Splat};
use super::sampling::{GridField, Sampled, Samples, SharedGridDevice};
use crate::checkpoint::{SavedState, StateArray};
use crate::linsolve::vector::CHUNK;
use crate::linsolve::{
    BoxMultigrid, BoxMultigridParams, CellKind, DomainBoundary, Info, PcgParams, PoissonDevice,
    PoissonOperator, PoissonSolver, PreconditionerKind, SolveError, StopReason,
};
use crate::sim::SimError;
use glam::DVec3;
use multiversion::multiversion;
use rayon::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The boundary integral: `(points, out)` writes `(1/4π) Σ αⱼ G(x − xⱼ)` at each point into `out`.
pub type BoundaryIntegral<'a> = dyn FnMut(&[DVec3], &mut [DVec3]) + 'a;

/// The vortons whose vorticity the Poisson technique splats.
#[derive(Clone, Copy, Debug)]
pub struct Blobs<'a> {
    /// Positions (m).
    pub position: &'a [DVec3],
    /// Strengths α = ω V (m³/s).
    pub strength: &'a [DVec3],
    /// Core radii σ (m): the width of [`Splat::Gaussian`]'s spread.
    pub radius: &'a [f64],
}

/// Statistics of the last solve.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoissonInfo {
    /// Boundary points of the grid.
    pub boundary_points: usize,
    /// Boundary points whose integral was computed (the rest the mean of computed neighbours, with
    /// decimation).
    pub computed_points: usize,
    /// Multigrid iterations: V-cycles, and the initial sweep of the finest level when it ran (each one of
    /// the three components together).
    pub cycles: usize,
    /// Final residual of the three components together, relative to its value for the boundary values
    /// alone.
    pub residual: f64,
}

/// Milliseconds spent in each stage, and the multigrid cycles, since the last
/// [`PoissonVelocity::take_timings`] (a step's velocity evaluations together).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoissonTimings {
    /// Multigrid iterations (as [`PoissonInfo::cycles`]) of every solve.
    pub cycles: usize,
    /// Vorticity splatted to the grid.
    pub splat: f64,
    /// Boundary values of the vector potential, with the integral's set-up (the treecode's build).
    pub boundary: f64,
    /// The vector Poisson solve.
    pub poisson: f64,
    /// The curl, and on a [`GridDevice`](super::sampling::GridDevice) the sampling at the vortons that
    /// follows it.
    pub curl: f64,
}

/// A device that solves the vector Poisson problem's components (the GPU backend), shared by the
/// simulation's copies.
#[derive(Clone)]
pub struct SharedPoissonDevice(pub Arc<Mutex<dyn PoissonDevice<3>>>);

impl std::fmt::Debug for SharedPoissonDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedPoissonDevice")
    }
}

/// A device that splats the vortons' vorticity onto the grid in place of the CPU (the GPU backend's
/// `eddies_gpu::vpm::GpuSplat`): by cloud-in-cell as [`FittedGrid::splat`], or by each vorton's Gaussian as
/// [`BlobSplat`]; the same weights, each grid point's sum in a fixed order of the device's own.
pub trait SplatDevice: Send {
    /// Vorticity (1/s) at every point of `grid` into `out` (x fastest): each `strength[i]` (m³/s) at
    /// `position[i]` shared out by cloud-in-cell ([`FittedGrid::cic`]) and divided by the cell volume.
    /// `Ok(false)` leaves the splat to the CPU (a device that cannot take it); the error says how the device
    /// failed.
    fn splat(
        &mut self,
        grid: &FittedGrid,
        position: &[DVec3],
        strength: &[DVec3],
        out: &mut Vec<DVec3>,
    ) -> Result<bool, String>;

    /// Vorticity (1/s) at every point of `grid` into `out` (x fastest): each vorton of `blobs` spread by the
    /// Gaussian of its core ([`Splat::Gaussian`], the stamps of [`super::blob_splat::BlobStamp`]) and
    /// divided by the cell volume. `Ok(false)` and the error as for [`splat`](Self::splat).
    fn splat_blobs(
        &mut self,
        grid: &FittedGrid,
        blobs: Blobs,
        out: &mut Vec<DVec3>,
    ) -> Result<bool, String>;

    /// The field into which [`right_hand_side`](Self::right_hand_side) writes: an id that a Poisson device
    /// reading the same memory reports as its [`PoissonDevice::face_field`], which then takes each
    /// component's right-hand side from it ([`PoissonDevice::solve_rhs_in_faces`]). `None` (the default):
    /// this device keeps no vorticity for the solve.
    fn rhs_field(&self) -> Option<u64> {
        None
    }

    /// Splats as [`splat`](Self::splat) or [`splat_blobs`](Self::splat_blobs) by `splat`, but keeps the
    /// vorticity on the device for [`right_hand_sides`](Self::right_hand_sides) instead of returning it.
    /// `Ok(false)` (the default): not offered for this splat, which the caller then asks for with a
    /// read-back.
    fn splat_kept(
        &mut self,
        grid: &FittedGrid,
        blobs: Blobs,
        splat: Splat,
    ) -> Result<bool, String> {
        let _ = (grid, blobs, splat);
        Ok(false)
    }

    /// The vorticity of the last [`splat_kept`](Self::splat_kept) into `out`, as
    /// [`splat`](Self::splat) returns it (for a solve that cannot take its right-hand sides on the device).
    fn kept_vorticity(&mut self, out: &mut Vec<DVec3>) -> Result<(), String> {
        let _ = out;
        Err("this splat device keeps no vorticity".into())
    }

    /// Forms the vector solve's right-hand sides from the vorticity of the last
    /// [`splat_kept`](Self::splat_kept), as [`PoissonVelocity`]'s device solve does on the host: on each
    /// interior point of the grid, in the padded layout of a box of its shape
    /// ([`Layout`](crate::linsolve::Layout)), `scale` times the vorticity's component in f64, plus the values
    /// of its neighbours on the grid's outer layer (`boundary`, one per boundary point in storage order:
    /// z, then y, then x slowest to fastest), axis by axis, the lower neighbour first; 0 elsewhere. Writes
    /// each component's sums of squares of runs of [`RHS_RUN`] padded entries (each in index order) into
    /// `squares`, component after component, for [`rhs_norm`]; keeps the right-hand sides' inputs for
    /// [`right_hand_side`](Self::right_hand_side).
    fn right_hand_sides(
        &mut self,
        scale: f64,
        boundary: &[DVec3],
        squares: &mut Vec<f64>,
    ) -> Result<(), String> {
        let _ = (scale, boundary, squares);
        Err("this splat device keeps no vorticity".into())
    }

    /// Writes component `component`'s right-hand side of the last
    /// [`right_hand_sides`](Self::right_hand_sides) into the field [`rhs_field`](Self::rhs_field), as f64 in
    /// the padded layout.
    fn right_hand_side(&mut self, component: usize) -> Result<(), String> {
        let _ = component;
        Err("this splat device keeps no vorticity".into())
    }
}

/// Padded entries of each partial sum of squares of the vector solve's right-hand sides, added in index
/// order; the partial sums are added in order ([`rhs_norm`]). A device takes each run in one thread and
/// gets the host's bits.
pub const RHS_RUN: usize = 256;

// The host takes whole runs in each parallel chunk.
const _: () = assert!(CHUNK.is_multiple_of(RHS_RUN));

/// The norm of a right-hand side from its runs' sums of squares ([`RHS_RUN`]), added in order.
pub fn rhs_norm(squares: &[f64]) -> f64 {
    squares.iter().fold(0.0, |sum, &s| sum + s).sqrt()
}

/// A [`SplatDevice`] shared by the simulation's copies.
#[derive(Clone)]
pub struct SharedSplatDevice(pub Arc<Mutex<dyn SplatDevice>>);

impl std::fmt::Debug for SharedSplatDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedSplatDevice")
    }
}

/// The Poisson technique's buffers, reused across steps.
#[derive(Clone, Debug, Default)]
pub struct PoissonVelocity {
    /// Multigrid hierarchy of the last grid shape (unit spacing: the right-hand side carries h²).
    mg: Option<BoxMultigrid>,
    /// Where the vector Poisson solve runs instead of [`BoxMultigrid`]: a device (the GPU), each component by
    /// MGPCG on the box ([`device_solve`]).
    pub device: Option<SharedPoissonDevice>,
    /// Where the cloud-in-cell splat runs instead of [`FittedGrid::splat`]: a device (the GPU).
    pub splat_device: Option<SharedSplatDevice>,
    /// The box's operator and MGPCG hierarchy for the device, and its padded vectors.
    device_solver: Option<PoissonSolver<3>>,
    device_b: Vec<f64>,
    device_x: Vec<f64>,
    /// Vorticity at the grid points (1/s); empty while it is on the splat device
    /// ([`rhs_on_device`](Self::rhs_on_device)).
    pub vorticity: Vec<DVec3>,
    /// Whether the last splat left the vorticity on the splat device, which forms the solve's right-hand
    /// sides for the Poisson device ([`SplatDevice::splat_kept`]).
    rhs_on_device: bool,
    /// The grid device that takes the potential from the Poisson device's solutions where the two share a
    /// field ([`GridDevice::begin_potential`](super::sampling::GridDevice::begin_potential)), so that it
    /// need not be sent for the curl ([`sample_on`](Self::sample_on)).
    pub grid_device: Option<SharedGridDevice>,
    /// Whether [`grid_device`](Self::grid_device) holds the last solve's potential.
    potential_on_device: bool,
    /// The Gaussian splat's buffers.
    blobs: BlobSplat,
    /// The solution of a grid without interior points (its boundary values), component-major.
    flat: Vec<f64>,
    /// Where the last solution is.
    latest: Latest,
    /// Grid index of each boundary point, in storage order.
    boundary: Vec<usize>,
    /// For each boundary point, the two boundary points (positions in `boundary`) whose integrals it
    /// averages: itself twice when it is computed.
    source: Vec<(u32, u32)>,
    /// Decimated points on rows along y (the x faces), resolved after the rest.
    late: Vec<u32>,
    /// Lattice decimation: each point between computed ones and its four sources (two repeated when it lies
    /// between two), all computed points.
    between: Vec<(u32, [u32; 4])>,
    /// Positions in `boundary` of the computed points.
    computed: Vec<u32>,
    /// Position in `boundary` of each grid point (`u32::MAX` inside).
    slot: Vec<u32>,
    points: Vec<DVec3>,
    computed_values: Vec<DVec3>,
    values: Vec<DVec3>,
    /// Statistics of the last solve.
    pub info: PoissonInfo,
    timings: PoissonTimings,
    /// Grid shape and decimation that the boundary lists were made for.
    listed: Option<([usize; 3], Decimation)>,
    /// Runge–Kutta stage of the next solve ([`set_stage`](Self::set_stage)).
    stage: Option<usize>,
    /// The last two solutions of each stage, newest first, in the solver's layout.
    history: Vec<[Vec<f64>; 2]>,
}

/// Where the last solution of [`PoissonVelocity`] is kept (component `c` of point `i` at `c·n + i`, as in
/// the solver). Solutions move between the solver and the stage histories by exchanging buffers, so that
/// none is copied.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Latest {
    /// No solve yet.
    #[default]
    Nothing,
    /// In the solver (a solve outside a Runge–Kutta stage).
    Solver,
    /// The newest entry of a stage's history.
    Stage(usize),
    /// In `flat`.
    Flat,
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

impl PoissonVelocity {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.vorticity.capacity()
            + self.points.capacity()
            + self.computed_values.capacity()
            + self.values.capacity())
            * 24
            + self
                .history
                .iter()
                .flatten()
                .map(Vec::capacity)
                .sum::<usize>()
                * 8
            + (self.boundary.capacity() + self.flat.capacity()) * 8
            + self.source.capacity() * 8
            + self.between.capacity() * 20
            + (self.computed.capacity() + self.late.capacity() + self.slot.capacity()) * 4
            + self.mg.as_ref().map_or(0, BoxMultigrid::bytes)
            + self.blobs.bytes()
    }

    /// Adds `ms` milliseconds to the boundary stage's time: the boundary integral's set-up outside
    /// [`solve`](Self::solve) (the treecode's build, the direct sum's packed sources).
    pub fn add_boundary_time(&mut self, ms: f64) {
        self.timings.boundary += ms;
    }

    /// The stage times accumulated since the last call, and a reset.
    pub fn take_timings(&mut self) -> PoissonTimings {
        std::mem::take(&mut self.timings)
    }

    /// Velocity (m/s) at every point of `grid` into `u` (x fastest), from the vortons `blobs`. `integral(points, out)` evaluates the boundary integral
    /// `(1/4π) Σ αⱼ G(x − xⱼ)` at the given points; it is not called for zero boundaries.
    ///
    /// # Errors
    /// The multigrid solver's, which for a well-formed grid means it did not converge.
    pub fn solve(
        &mut self,
        params: &PoissonParams,
        grid: &FittedGrid,
        blobs: Blobs,
        integral: Option<&mut BoundaryIntegral>,
        u: &mut Vec<DVec3>,
    ) -> Result<(), SolveError> {
        self.solve_potential(params, grid, blobs, integral)?;
        self.curl_into(grid, u);
        Ok(())
    }

    /// Stages 1 to 3 of [`solve`](Self::solve): the vector potential, kept for [`curl_into`](Self::curl_into),
    /// [`sample_on`](Self::sample_on) and [`potential`](Self::potential).
    ///
    /// # Errors
    /// As [`solve`](Self::solve).
    pub fn solve_potential(
        &mut self,
        params: &PoissonParams,
        grid: &FittedGrid,
        blobs: Blobs,
        integral: Option<&mut BoundaryIntegral>,
    ) -> Result<(), SolveError> {
        let t = Instant::now();
        let Blobs {
            position,
            strength,
            radius,
        } = blobs;
        let keep = self.keeps_vorticity(grid);
        self.rhs_on_device = false;
        self.potential_on_device = false;
        let on_device = match &self.splat_device {
            Some(device) => {
                let mut device = device.0.lock().unwrap_or_else(|p| p.into_inner());
                let out = &mut self.vorticity;
                if keep {
                    self.rhs_on_device = device
                        .splat_kept(grid, blobs, params.splat)
                        .map_err(SolveError::Device)?;
                }
                if self.rhs_on_device {
                    out.clear();
                    true
                } else {
                    match params.splat {
                        Splat::Cic => device.splat(grid, position, strength, out),
                        Splat::Gaussian => device.splat_blobs(grid, blobs, out),
                    }
                    .map_err(SolveError::Device)?
                }
            }
            None => false,
        };
        if !on_device {
            match params.splat {
                Splat::Cic => {
                    let inv = 1.0 / (grid.spacing * grid.spacing * grid.spacing);
                    grid.splat(position, |i| strength[i] * inv, &mut self.vorticity);
                }
                Splat::Gaussian => {
                    self.blobs
                        .splat(grid, position, strength, radius, &mut self.vorticity)
                }
            }
        }
        self.timings.splat += ms(t);
        self.potential_from_vorticity(params, grid, integral)
    }

    /// As [`solve`](Self::solve), from the vorticity already in [`vorticity`](Self::vorticity) (1/s, one
    /// value per point of `grid`): stages 2 to 4.
    ///
    /// # Errors
    /// As [`solve`](Self::solve).
    pub fn solve_vorticity(
        &mut self,
        params: &PoissonParams,
        grid: &FittedGrid,
        integral: Option<&mut BoundaryIntegral>,
        u: &mut Vec<DVec3>,
    ) -> Result<(), SolveError> {
        self.rhs_on_device = false;
        self.potential_on_device = false;
        self.potential_from_vorticity(params, grid, integral)?;
        self.curl_into(grid, u);
        Ok(())
    }

    /// Whether the splat on `grid` can leave the vorticity on the splat device: it shares its right-hand
    /// sides' field with the Poisson device, and the grid has interior points.
    fn keeps_vorticity(&self, grid: &FittedGrid) -> bool {
        let (Some(splat), Some(solve)) = (&self.splat_device, &self.device) else {
            return false;
        };
        let field = splat
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .rhs_field();
        let faces = solve
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .face_field();
        field.is_some() && field == faces && grid.dims.iter().all(|&d| d >= 3)
    }

    /// Stages 2 and 3 from the vorticity in [`vorticity`](Self::vorticity), or on the splat device.
    fn potential_from_vorticity(
        &mut self,
        params: &PoissonParams,
        grid: &FittedGrid,
        integral: Option<&mut BoundaryIntegral>,
    ) -> Result<(), SolveError> {
        assert!(
            self.rhs_on_device || self.vorticity.len() == grid.len(),
            "one vorticity per grid point"
        );
        let t = Instant::now();
        self.boundary_values(params, grid, integral);
        self.timings.boundary += ms(t);

        let t = Instant::now();
        self.solve_interior(params, grid)?;
        self.timings.poisson += ms(t);
        Ok(())
    }

    /// Stage 4: the velocity `u = ∇ × A` of the last solve at every point of `grid` (the grid it was solved
    /// on) into `u`, timed as the curl.
    ///
    /// # Panics
    /// Before any solve.
    pub fn curl_into(&mut self, grid: &FittedGrid, u: &mut Vec<DVec3>) {
        let t = Instant::now();
        curl(grid, self.solution().expect("a solve before the curl"), u);
        self.timings.curl += ms(t);
    }

    /// Stage 4 and the sampling that follows it on `device`: the curl of the last solve's potential on
    /// `grid` (the grid it was solved on), sampled at the points of `at` into `out`
    /// ([`GridDevice`](super::sampling::GridDevice)), timed as the curl. `Ok(false)`: the device left both
    /// to the CPU.
    ///
    /// # Errors
    /// How the device failed.
    ///
    /// # Panics
    /// Before any solve.
    pub fn sample_on(
        &mut self,
        device: &SharedGridDevice,
        grid: &FittedGrid,
        at: Samples,
        out: Sampled,
    ) -> Result<bool, String> {
        let t = Instant::now();
        let a = self.solution().expect("a solve before the curl");
        let kept = self.potential_on_device
            && self
                .grid_device
                .as_ref()
                .is_some_and(|d| Arc::ptr_eq(&d.0, &device.0));
        let field = match kept {
            true => GridField::KeptPotential,
            false => GridField::Potential(a),
        };
        let taken = device.sample(grid, field, at, out)?;
        if taken {
            self.timings.curl += ms(t);
        }
        Ok(taken)
    }

    /// Lists the boundary points of a grid of `dims` points with their decimation sources.
    fn list_boundary(&mut self, dims: [usize; 3], decimate: Decimation) {
        let [nx, ny, nz] = dims;
        let face = |c: usize, n: usize| c == 0 || c == n - 1;
        self.boundary.clear();
        self.source.clear();
        self.computed.clear();
        self.late.clear();
        self.between.clear();
        self.slot.clear();
        self.slot.resize(nx * ny * nz, u32::MAX);
        for k in 0..nz {
            for j in 0..ny {
                for i in 0..nx {
                    let (fx, fy, fz) = (face(i, nx), face(j, ny), face(k, nz));
                    if !(fx || fy || fz) {
                        continue;
                    }
                    let idx = i + nx * (j + ny * k);
                    let here = self.boundary.len() as u32;
                    self.slot[idx] = here;
                    self.boundary.push(idx);
                    if decimate == Decimation::Off {
                        self.source.push((here, here));
                        self.computed.push(here);
                        continue;
                    }
                    if decimate == Decimation::Lattice {
                        // Computed where every coordinate is even or the last: on each face a lattice of
                        // every other point both ways. The others lie between two or four computed points
                        // of their face (a boundary point has at most two such coordinates).
                        self.source.push((here, here));
                        let c = [i, j, k];
                        let strides = [1, nx, nx * ny];
                        let between_axis = |a: usize| c[a] % 2 == 1 && c[a] != dims[a] - 1;
                        let mut odd = (0..3).filter(|&a| between_axis(a));
                        match [odd.next(), odd.next(), odd.next()] {
                            [None, ..] => self.computed.push(here),
                            [Some(a), None, _] => {
                                let (lo, hi) =
                                    ((idx - strides[a]) as u32, (idx + strides[a]) as u32);
                                self.between.push((here, [lo, hi, lo, hi]));
                            }
                            [Some(a), Some(b), None] => {
                                let (sa, sb) = (strides[a], strides[b]);
                                self.between.push((
                                    here,
                                    [
                                        (idx - sa - sb) as u32,
                                        (idx + sa - sb) as u32,
                                        (idx - sa + sb) as u32,
                                        (idx + sa + sb) as u32,
                                    ],
                                ));
                            }
                            _ => unreachable!("a boundary point has a face coordinate"),
                        }
                        continue;
                    }
                    // Decimate along x on the y and z faces, along y on the x faces (a row along x would
                    // leave an x face): odd points take the mean of their two even neighbours in the row,
                    // or copy the one before at the row's end.
                    let (c, n, stride) = if fy || fz { (i, nx, 1) } else { (j, ny, nx) };
                    if c % 2 == 0 {
                        self.source.push((here, here));
                        self.computed.push(here);
                    } else {
                        // Slots of later points are set when they are listed: keep grid indices for now.
                        let next = if c + 1 < n {
                            idx + stride
                        } else {
                            idx - stride
                        };
                        self.source.push(((idx - stride) as u32, next as u32));
                        if !(fy || fz) {
                            self.late.push(here);
                        }
                    }
                }
            }
        }
        // Turn the decimated points' grid indices into positions in `boundary`.
        let slot = &self.slot;
        for (_, src) in &mut self.between {
            *src = src.map(|g| slot[g as usize]);
        }
        for (q, src) in self.source.iter_mut().enumerate() {
            if src.0 as usize != q || src.1 as usize != q {
                *src = (self.slot[src.0 as usize], self.slot[src.1 as usize]);
            }
        }
    }

    /// Sets the Runge–Kutta stage of the solves that follow, `None` for solves outside a time step. Within a
    /// run, the vorticity at one stage changes smoothly from step to step (baroclinic generation adds about the
    /// same amount each step), so the interior starts from the linear extrapolation `2 A₁ − A₂` of the last
    /// two solutions at the same stage rather than from the last solution, which belongs to another stage
    /// and misses a step's change: on `dye-drop` that takes one multigrid cycle off most component solves.
    pub fn set_stage(&mut self, stage: Option<usize>) {
        self.stage = stage;
    }

    /// The last solution, component-major (see [`Latest`]).
    fn solution(&self) -> Option<&[f64]> {
        match self.latest {
            Latest::Nothing => None,
            Latest::Solver => self.mg.as_ref().map(BoxMultigrid::solution),
            Latest::Stage(s) => Some(&self.history[s][0]),
            Latest::Flat => Some(&self.flat),
        }
    }

    /// The vector potential of the last solve at the grid points (m²/s), x fastest; empty before any.
    pub fn potential(&self) -> Vec<DVec3> {
        let Some(a) = self.solution() else {
            return Vec::new();
        };
        let n = a.len() / 3;
        (0..n)
            .map(|i| DVec3::new(a[i], a[n + i], a[2 * n + i]))
            .collect()
    }

    /// The velocity of the last solve at the points of `grid` (the grid it was solved on), the curl of its
    /// potential (untimed: for outputs); empty before any.
    pub fn velocity(&self, grid: &FittedGrid) -> Vec<DVec3> {
        let mut u = Vec::new();
        if let Some(a) = self.solution() {
            curl(grid, a, &mut u);
        }
        u
    }

    /// The integral's values at the boundary points into `values` (the points listed again only when the
    /// grid's shape or the decimation changed).
    fn boundary_values(
        &mut self,
        params: &PoissonParams,
        grid: &FittedGrid,
        integral: Option<&mut BoundaryIntegral>,
    ) {
        let [nx, ny, _] = grid.dims;
        if self.listed != Some((grid.dims, params.decimate)) {
            self.list_boundary(grid.dims, params.decimate);
            self.listed = Some((grid.dims, params.decimate));
        }
        self.info.boundary_points = self.boundary.len();
        self.values.clear();
        self.values.resize(self.boundary.len(), DVec3::ZERO);
        self.info.computed_points = 0;
        if let Some(f) = integral {
            let h = grid.spacing;
            self.points.clear();
            self.points.extend(self.computed.iter().map(|&q| {
                let idx = self.boundary[q as usize];
                let c = [idx % nx, (idx / nx) % ny, idx / (nx * ny)];
                DVec3::from_array(std::array::from_fn(|a| {
                    grid.origin[a] + (c[a] as f64 + 0.5) * h
                }))
            }));
            self.computed_values.clear();
            self.computed_values.resize(self.points.len(), DVec3::ZERO);
            f(&self.points, &mut self.computed_values);
            for (&q, &v) in self.computed.iter().zip(&self.computed_values) {
                self.values[q as usize] = v;
            }
            // Rows along x (on the y and z faces) take computed points only; rows along y (on the x faces)
            // may end on a y or z face point that is itself a mean, so they come second.
            let resolve = |values: &mut Vec<DVec3>, q: usize, (a, b): (u32, u32)| {
                values[q] = (values[a as usize] + values[b as usize]) * 0.5;
            };
            for q in 0..self.boundary.len() {
                let src = self.source[q];
                if src != (q as u32, q as u32) && self.late.binary_search(&(q as u32)).is_err() {
                    resolve(&mut self.values, q, src);
                }
            }
            for &q in &self.late {
                resolve(&mut self.values, q as usize, self.source[q as usize]);
            }
            for &(q, [a, b, c, d]) in &self.between {
                let v = &self.values;
                self.values[q as usize] =
                    ((v[a as usize] + v[b as usize]) + (v[c as usize] + v[d as usize])) * 0.25;
            }
            self.info.computed_points = self.points.len();
        }
    }

    /// Solves `−∇²A = ω` in the interior with the boundary `values` as Dirichlet values, the three
    /// components together ([`BoxMultigrid`]), into `potential`.
    fn solve_interior(
        &mut self,
        params: &PoissonParams,
        grid: &FittedGrid,
    ) -> Result<(), SolveError> {
        let dims = grid.dims;
        let n = grid.len();
        let len = 3 * n;
        self.info.cycles = 0;
        self.info.residual = 0.0;
        if dims.iter().any(|&d| d < 3) {
            // Every point is on the boundary.
            self.flat.clear();
            self.flat.resize(len, 0.0);
            for (&idx, &v) in self.boundary.iter().zip(&self.values) {
                for c in 0..3 {
                    self.flat[c * n + idx] = v[c];
                }
            }
            self.latest = Latest::Flat;
            return Ok(());
        }
        let mg_params = multigrid_params(params);
        let warm = matches!(&self.mg, Some(mg) if mg.dims() == dims && *mg.params() == mg_params);
        if !warm {
            // A new shape has no usable last solution: the interior starts from zero.
            self.mg = Some(BoxMultigrid::new(dims, mg_params)?);
            self.history.clear();
            self.latest = Latest::Solver;
        }
        let mut mg = self.mg.take().expect("built above");
        // With unit spacing in the stencil, −∇²₁ A = h² ω. Component c of point i sits at c·n + i.
        let h2 = grid.spacing * grid.spacing;
        if !self.rhs_on_device {
            scaled_vorticity(&self.vorticity, h2, mg.fields_mut().0);
        }
        // The interior's initial guess: the stage's extrapolation 2·last − before (`set_stage`), written over
        // `before` and exchanged into the solver; or else the last solution.
        let history = match self.stage {
            Some(s) => self
                .history
                .get_mut(s)
                .filter(|h| h[0].len() == len && h[1].len() == len),
            None => None,
        };
        if let Some([last, before]) = history {
            before
                .par_chunks_mut(CHUNK)
                .zip(last.par_chunks(CHUNK))
                .for_each(|(b, l)| {
                    for (b, &l) in b.iter_mut().zip(l) {
                        *b = 2.0 * l - *b;
                    }
                });
            mg.swap_solution(before);
        } else if let Latest::Stage(s) = self.latest {
            mg.fields_mut().1.copy_from_slice(&self.history[s][0]);
        }
        let x = mg.fields_mut().1;
        for (&idx, &v) in self.boundary.iter().zip(&self.values) {
            for c in 0..3 {
                x[c * n + idx] = v[c];
            }
        }
        let solved = match &self.device {
            Some(device) => {
                let on_splat = match &self.splat_device {
                    Some(splat) if self.rhs_on_device => Some(OnSplat {
                        device: splat,
                        scale: h2,
                    }),
                    _ => None,
                };
                let faces = device
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .face_field();
                let on_grid = self.grid_device.as_ref().filter(|g| {
                    let field =
                        g.0.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .potential_field();
                    field.is_some() && field == faces
                });
                let sides = Sides {
                    on_splat,
                    on_grid,
                    boundary: &self.values,
                };
                let buffers = (&mut self.device_b, &mut self.device_x);
                let tolerance = params.tolerance;
                let solver = &mut self.device_solver;
                let mut solved = device_solve(device, sides, solver, buffers, &mut mg, tolerance);
                if let (Ok(None), Some(splat)) = (&solved, &self.splat_device) {
                    // The Poisson device declined the right-hand sides on the splat device: the host forms
                    // them from the vorticity read back.
                    let mut splat = splat.0.lock().unwrap_or_else(|p| p.into_inner());
                    let read = splat.kept_vorticity(&mut self.vorticity);
                    drop(splat);
                    self.rhs_on_device = false;
                    if let Err(e) = read {
                        self.mg = Some(mg);
                        return Err(SolveError::Device(e));
                    }
                    scaled_vorticity(&self.vorticity, h2, mg.fields_mut().0);
                    let buffers = (&mut self.device_b, &mut self.device_x);
                    let sides = Sides {
                        on_splat: None,
                        on_grid,
                        boundary: &self.values,
                    };
                    solved = device_solve(device, sides, solver, buffers, &mut mg, tolerance);
                }
                solved.map(|solved| {
                    let (info, kept) =
                        solved.expect("a device solve with the host's right-hand sides");
                    self.potential_on_device = kept;
                    info
                })
            }
            None => mg.solve(),
        };
        if let Ok(info) = &solved {
            self.info.cycles = info.iterations;
            self.timings.cycles += info.iterations;
            self.info.residual = info.residual;
            // The solution becomes the newest entry of the stage's history, the older entry's buffer the
            // solver's (its contents are replaced before the next solve reads them).
            self.latest = match self.stage {
                Some(s) => {
                    if self.history.len() <= s {
                        self.history.resize_with(s + 1, Default::default);
                    }
                    let h = &mut self.history[s];
                    h.swap(0, 1);
                    h[0].resize(len, 0.0);
                    mg.swap_solution(&mut h[0]);
                    Latest::Stage(s)
                }
                None => Latest::Solver,
            };
        }
        self.mg = Some(mg);
        solved.map(|_| ())
    }
}

/// `h² ω` (`scale` times the vorticity) into the multigrid's right-hand side `b`: component `c` of point `i`
/// at `c·n + i`.
fn scaled_vorticity(vorticity: &[DVec3], scale: f64, b: &mut [f64]) {
    let n = vorticity.len();
    b[..3 * n]
        .par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(c, b)| {
            for (b, w) in b.iter_mut().zip(vorticity) {
                *b = w[c] * scale;
            }
        });
}

/// The right-hand sides of a device solve formed on the splat device that holds the vorticity
/// ([`SplatDevice::right_hand_sides`]).
struct OnSplat<'a> {
    device: &'a SharedSplatDevice,
    /// `h²`: the vorticity's factor.
    scale: f64,
}

/// The other devices of a device solve: where its right-hand sides are formed and where its solutions go.
struct Sides<'a> {
    /// The splat device that forms the right-hand sides; `None`: the host forms them.
    on_splat: Option<OnSplat<'a>>,
    /// The grid device that takes each solution from the field it shares with the Poisson device, for the
    /// curl ([`GridDevice::potential_component`](super::sampling::GridDevice::potential_component)).
    on_grid: Option<&'a SharedGridDevice>,
    /// The boundary values, one per boundary point in storage order.
    boundary: &'a [DVec3],
}

/// The vector Poisson solve of [`PoissonVelocity::solve_interior`] on a device: the fields of `mg` (the
/// right-hand side `h²ω` and, in `x`, the boundary values and the interior's initial guess) as three scalar
/// problems on the box's interior points, each solved by MGPCG on `device` (the box's operator with unit
/// spacing, its boundary layer Dirichlet; the boundary values moved to the right-hand side), the solutions
/// written back into `x`. The stopping rule is the box multigrid's: each component's residual at most
/// `tolerance` times the three components' reference residual together (the boundary values alone), so a
/// nearly zero component takes no iterations. The [`Info`] counts the most iterations a component took (each
/// one V-cycle), and its residual is the three components' together.
///
/// With `sides.on_splat` the right-hand sides are formed on the splat device, which holds the vorticity
/// (`mg`'s right-hand side is not read), and go to `device` through their shared field without crossing
/// the bus; `Ok(None)`: `device` declined them, and the host is to form them. The splat device's sums of
/// squares are the host's, run by run ([`RHS_RUN`]), so both give the same bits. With `sides.on_grid`
/// each solution goes on to the grid device through the field too; the second value returned says
/// whether it holds the whole potential.
fn device_solve(
    device: &SharedPoissonDevice,
    sides: Sides,
    solver: &mut Option<PoissonSolver<3>>,
    (b, x): (&mut Vec<f64>, &mut Vec<f64>),
    mg: &mut BoxMultigrid,
    tolerance: f64,
) -> Result<Option<(Info, bool)>, SolveError> {
    let Sides {
        on_splat,
        on_grid,
        boundary,
    } = sides;
    let dims = mg.dims();
    if solver
        .as_ref()
        .is_none_or(|s| s.operator().layout().dims != dims)
    {
        let boundary = |c: [usize; 3]| (0..3).any(|a| c[a] == 0 || c[a] + 1 == dims[a]);
        let op = PoissonOperator::new(dims, 1.0, DomainBoundary::Open, |c| {
            if boundary(c) {
                CellKind::Dirichlet
            } else {
                CellKind::Unknown
            }
        })?;
        *solver = Some(PoissonSolver::new(
            op,
            PreconditionerKind::Multigrid,
            PcgParams::default(),
        )?);
    }
    let solver = solver.as_mut().expect("built above");
    let n: usize = dims.iter().product();
    let (fb, fx) = mg.fields_mut();
    let layout = solver.operator().layout().clone();
    let len = layout.len();
    let runs = len.div_ceil(RHS_RUN);
    if on_splat.is_none() {
        b.resize(3 * len, 0.0);
    }
    x.resize(3 * len, 0.0);
    // b on the unknowns plus the Dirichlet neighbours' values (unit spacing); the guess on the unknowns.
    let kinds = solver.operator().kinds();
    let mut squares = vec![0.0; 3 * runs];
    if let Some(on) = &on_splat {
        let mut splat = on.device.0.lock().unwrap_or_else(|p| p.into_inner());
        splat
            .right_hand_sides(on.scale, boundary, &mut squares)
            .map_err(SolveError::Device)?;
        if squares.len() != 3 * runs {
            return Err(SolveError::Device(format!(
                "the splat device gave {} sums of squares, not {}",
                squares.len(),
                3 * runs
            )));
        }
    }
    let mut references = [0.0; 3];
    for c in 0..3 {
        let xc = &mut x[c * len..(c + 1) * len];
        let fxc = &fx[c * n..(c + 1) * n];
        layout.pad_from(|i| fxc[i], xc);
        let squares = &mut squares[c * runs..(c + 1) * runs];
        if on_splat.is_none() {
            let bc = &mut b[c * len..(c + 1) * len];
            let fbc = &fb[c * n..(c + 1) * n];
            layout.pad_from(|i| fbc[i], bc);
            let strides = layout.strides;
            // Each run's sum of squares in index order; the runs are added in order: the same bits for any
            // number of threads, and the splat device's.
            bc.par_chunks_mut(CHUNK)
                .zip(squares.par_chunks_mut(CHUNK / RHS_RUN))
                .enumerate()
                .for_each(|(k, (chunk, squares))| {
                    for (r, (run, sum)) in chunk.chunks_mut(RHS_RUN).zip(squares).enumerate() {
                        *sum = 0.0;
                        for (o, b) in run.iter_mut().enumerate() {
                            let i = k * CHUNK + r * RHS_RUN + o;
                            if kinds[i] != CellKind::Unknown {
                                *b = 0.0;
                                continue;
                            }
                            let mut v = *b;
                            for s in strides {
                                for j in [i - s, i + s] {
                                    if kinds[j] == CellKind::Dirichlet {
                                        v += xc[j];
                                    }
                                }
                            }
                            *b = v;
                            *sum += v * v;
                        }
                    }
                });
        }
        xc.par_iter_mut()
            .zip(kinds)
            .with_min_len(CHUNK)
            .for_each(|(x, &k)| {
                if k != CellKind::Unknown {
                    *x = 0.0;
                }
            });
        references[c] = rhs_norm(squares);
    }
    let reference = references.iter().map(|r| r * r).sum::<f64>().sqrt();
    if !reference.is_finite() {
        return Err(SolveError::BadInput(
            "non-finite right-hand side or boundary values".into(),
        ));
    }
    fn lock(
        g: &SharedGridDevice,
    ) -> std::sync::MutexGuard<'_, dyn super::sampling::GridDevice + 'static> {
        g.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    let mut kept = match on_grid {
        Some(g) => lock(g)
            .begin_potential(dims, boundary)
            .map_err(SolveError::Device)?,
        None => false,
    };
    let mut iterations = 0;
    let mut squares = 0.0;
    for c in 0..3 {
        let xc = &mut x[c * len..(c + 1) * len];
        if references[c] == 0.0 {
            xc.fill(0.0);
            if let (true, Some(g)) = (kept, on_grid) {
                lock(g)
                    .potential_component(c, false)
                    .map_err(SolveError::Device)?;
            }
            continue;
        }
        solver.params = PcgParams {
            tolerance: tolerance * reference / references[c],
            max_iterations: 200,
        };
        let on_device = match &on_splat {
            Some(on) => {
                let mut splat = on.device.0.lock().unwrap_or_else(|p| p.into_inner());
                splat.right_hand_side(c).map_err(SolveError::Device)?;
                drop(splat);
                let mut d = device.0.lock().unwrap_or_else(|p| p.into_inner());
                match d.solve_rhs_in_faces(solver, &[], xc)? {
                    Some(info) => Some(info),
                    None => return Ok(None),
                }
            }
            None => {
                let mut d = device.0.lock().unwrap_or_else(|p| p.into_inner());
                d.solve(solver, &b[c * len..(c + 1) * len], xc)?
            }
        };
        let info = match on_device {
            Some(info) => {
                // The device's first batch of the next solve: as long as this one.
                solver.expect_iterations(Some(info.iterations));
                if let (true, Some(g)) = (kept, on_grid) {
                    let mut d = device.0.lock().unwrap_or_else(|p| p.into_inner());
                    kept = d.solution_to_faces(solver)?;
                    drop(d);
                    if kept {
                        lock(g)
                            .potential_component(c, true)
                            .map_err(SolveError::Device)?;
                    }
                }
                info
            }
            None => {
                kept = false;
                solver.solve(&b[c * len..(c + 1) * len], xc)?
            }
        };
        iterations = iterations.max(info.iterations);
        squares += (info.residual * references[c]).powi(2);
    }
    // The interior back into the solver's solution, plane by plane in parallel; its boundary values stay.
    let (_, fx) = mg.fields_mut();
    let [nx, ny, nz] = dims;
    for c in 0..3 {
        let xc = &x[c * len..(c + 1) * len];
        let out = &mut fx[c * n..(c + 1) * n];
        out.par_chunks_mut(nx * ny)
            .enumerate()
            .filter(|(k, _)| (1..nz - 1).contains(k))
            .for_each(|(k, plane)| {
                for j in 1..ny - 1 {
                    let start = layout.index([1, j, k]);
                    plane[j * nx + 1..(j + 1) * nx - 1].copy_from_slice(&xc[start..start + nx - 2]);
                }
            });
    }
    let residual = if reference > 0.0 {
        squares.sqrt() / reference
    } else {
        0.0
    };
    let info = Info {
        iterations,
        residual,
        history: vec![residual],
        stop: if reference > 0.0 {
            StopReason::Converged
        } else {
            StopReason::ZeroRhs
        },
    };
    Ok(Some((info, kept)))
}

/// The multigrid settings of [`PoissonVelocity::solve_interior`]: V(1,1) cycles after one sweep of the finest
/// level. With the extrapolated initial guess (`set_stage`) a solve starts within a factor of about two of the
/// tolerance, which one V(1,1) cycle (a factor of 0.3–0.4) reaches at half the smoothing of a V(2,2) cycle (a
/// factor of 0.1, more than needed). Most of that start's excess is rough, so one sweep of the finest level
/// goes first: on `dye-drop` it alone meets the tolerance in about four solves of five, at a third of a
/// cycle's cost.
fn multigrid_params(params: &PoissonParams) -> BoxMultigridParams {
    BoxMultigridParams {
        tolerance: params.tolerance,
        restriction: params.restriction,
        pre_sweeps: 1,
        post_sweeps: 1,
        initial_sweeps: 1,
        ..Default::default()
    }
}

/// What of a [`PoissonVelocity`] the next solves read, read out of a checkpoint and checked
/// ([`PoissonVelocity::read_state`]) before [`PoissonVelocity::restore`] writes it.
pub(crate) struct PoissonResume {
    /// The hierarchy of the saved grid shape, with the saved solution as its `x` where that is the last one.
    mg: Option<BoxMultigrid>,
    latest: Latest,
    history: Vec<[Vec<f64>; 2]>,
}

/// Names of the history arrays of stage `s`.
fn history_names(s: usize) -> [String; 2] {
    [
        format!("poisson.history_{s}_last"),
        format!("poisson.history_{s}_before"),
    ]
}

/// The f64 array `name` of any length, or an error naming it.
fn any_f64s<'a>(state: &'a SavedState, name: &str) -> Result<&'a [f64], SimError> {
    match state.array(name)? {
        StateArray::F64(v) => Ok(v),
        _ => Err(SimError::InvalidInput(format!(
            "the checkpoint's `{name}` is not an f64 array: it was written by another version"
        ))),
    }
}

impl PoissonVelocity {
    /// Adds the initial guesses of the next solves to `state`: `poisson.grid` (u64, the multigrid
    /// hierarchy's points per axis, empty before any solve; its shape decides whether a solve starts warm),
    /// `poisson.latest` (u64 `[where, stage]`: 0 no solve, 1 the solver, 2 a stage's history, 3 a flat
    /// grid), `poisson.solution` (f64, the solver's last solution, which is the guess of a solve without a
    /// stage history; empty where another buffer holds the latest), `poisson.stages` (u64) and per stage
    /// `poisson.history_{s}_last` and `_before` (f64, the last two solutions that the stage extrapolates
    /// from, each empty or of the grid's length).
    ///
    /// The rest is rebuilt or rewritten by every solve: the boundary lists (from the grid's shape), the
    /// splatted vorticity, the boundary values, the flat grid's solution, the statistics and timings.
    pub(crate) fn save_state(&self, state: &mut SavedState) {
        let dims = self
            .mg
            .as_ref()
            .map_or_else(Vec::new, |m| m.dims().map(|d| d as u64).to_vec());
        state.push("poisson.grid", dims);
        let latest = match self.latest {
            Latest::Nothing => [0, 0],
            Latest::Solver => [1, 0],
            Latest::Stage(s) => [2, s as u64],
            Latest::Flat => [3, 0],
        };
        state.push("poisson.latest", latest.to_vec());
        let solution = match (&self.mg, self.latest) {
            (Some(mg), l) if !matches!(l, Latest::Stage(_)) => mg.solution().to_vec(),
            _ => Vec::new(),
        };
        state.push("poisson.solution", solution);
        state.push_scalar("poisson.stages", self.history.len() as u64);
        for (s, h) in self.history.iter().enumerate() {
            for (name, v) in history_names(s).into_iter().zip(h) {
                state.push(name, v.clone());
            }
        }
    }

    /// Reads and checks what [`save_state`](Self::save_state) wrote, for a simulation with `params`.
    pub(crate) fn read_state(
        &self,
        params: &PoissonParams,
        state: &SavedState,
    ) -> Result<PoissonResume, SimError> {
        let bad = |name: &str, what: String| {
            SimError::InvalidInput(format!("the checkpoint's `{name}` {what}"))
        };
        let dims = state.u64s("poisson.grid", 3).ok();
        let mg = match dims {
            Some(d) => {
                let dims: [usize; 3] =
                    std::array::from_fn(|a| usize::try_from(d[a]).unwrap_or(usize::MAX));
                if dims.iter().any(|&d| !(3..=4096).contains(&d)) {
                    return Err(bad(
                        "poisson.grid",
                        format!("holds {dims:?} points per axis"),
                    ));
                }
                // A fresh hierarchy: only its finest level's solution carries over between solves.
                Some(
                    BoxMultigrid::new(dims, multigrid_params(params))
                        .map_err(|e| bad("poisson.grid", format!("is unusable: {e}")))?,
                )
            }
            None => {
                state.u64s("poisson.grid", 0)?;
                None
            }
        };
        let len = mg.as_ref().map_or(0, |m| m.solution().len());
        let latest = match state.u64s("poisson.latest", 2)? {
            [0, _] => Latest::Nothing,
            [1, _] => Latest::Solver,
            [2, s] => Latest::Stage(usize::try_from(*s).unwrap_or(usize::MAX)),
            [3, _] => Latest::Flat,
            other => return Err(bad("poisson.latest", format!("is {other:?}"))),
        };
        let stages = state.u64_scalar("poisson.stages")?;
        if stages > 16 {
            return Err(bad("poisson.stages", format!("is {stages}")));
        }
        let mut history = Vec::new();
        for s in 0..stages as usize {
            let names = history_names(s);
            let mut pair: [Vec<f64>; 2] = Default::default();
            for (name, v) in names.iter().zip(&mut pair) {
                let a = any_f64s(state, name)?;
                if !(a.is_empty() || a.len() == len) {
                    return Err(bad(
                        name,
                        format!("holds {} values, not 0 or {len}", a.len()),
                    ));
                }
                *v = a.to_vec();
            }
            history.push(pair);
        }
        if let Latest::Stage(s) = latest {
            if history.get(s).is_none_or(|h| h[0].len() != len || len == 0) {
                return Err(bad(
                    "poisson.latest",
                    format!("names stage {s}, which holds no solution"),
                ));
            }
        }
        let solution = any_f64s(state, "poisson.solution")?;
        let mut mg = mg;
        match &mut mg {
            Some(m) if !matches!(latest, Latest::Stage(_)) => {
                if solution.len() != len {
                    return Err(bad(
                        "poisson.solution",
                        format!("holds {} values where the grid needs {len}", solution.len()),
                    ));
                }
                m.fields_mut().1.copy_from_slice(solution);
            }
            _ => {}
        }
        Ok(PoissonResume {
            mg,
            latest,
            history,
        })
    }

    /// Continues from `resume` ([`read_state`](Self::read_state)).
    pub(crate) fn restore(&mut self, resume: PoissonResume) {
        self.mg = resume.mg;
        self.latest = resume.latest;
        self.history = resume.history;
    }
}

/// `u = ∇ × A` on the grid by central differences, one-sided at the faces, into `u`, from `a` with component
/// `c` of point `i` at `c·n + i` (`n` points).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn curl(grid: &FittedGrid, a: &[f64], u: &mut Vec<DVec3>) {
    let n = grid.len();
    assert_eq!(a.len(), 3 * n, "three components per grid point");
    u.resize(n, DVec3::ZERO);
    // d[k] = ∂A/∂x_k.
    grid.differences(
        |i| [a[i], a[n + i], a[2 * n + i]],
        u,
        |d| DVec3::new(d[1][2] - d[2][1], d[2][0] - d[0][2], d[0][1] - d[1][0]),
    );
}
