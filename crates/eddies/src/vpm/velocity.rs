//! Velocity from vorticity (Gourlay parts 3, 12 and 20): the four integral techniques of [`VelocityMethod`] and
//! the Poisson technique behind one call, with the grid fitted to the vortons and optional auto-mollification.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::biot_savart::{self, DirectDevice, Sources, Targets};
use super::mollify::{self, FittedGrid};
use super::params::{PotentialBoundary, TreeMethod, TreeParams, VelocityMethod, VpmParams};
use super::poisson::{Blobs, BoundaryIntegral, PoissonVelocity};
use super::sampling::{GridField, Sampled, Samples, SharedGridDevice};
use super::tree::Tree;
use crate::grid::Grid;
use crate::linsolve::SolveError;
use crate::par;
use glam::DVec3;
use rayon::prelude::*;

/// Where the velocity is wanted and what comes back.
pub struct Query<'a> {
    /// Vorton positions (m).
    pub position: &'a [DVec3],
    /// Vorton strengths α = ω V (m³/s).
    pub strength: &'a [DVec3],
    /// Vorton core radii before mollification (m).
    pub radius: &'a [f64],
    /// Tracer positions (m).
    pub tracers: &'a [DVec3],
    /// Whether the velocity gradient at the vortons is wanted (for stretching).
    pub gradient: bool,
    /// The Runge–Kutta stage of a time step that asks, `None` outside a step (see
    /// [`PoissonVelocity::set_stage`]).
    pub stage: Option<usize>,
}

/// A [`DirectDevice`] the velocity stage hands its direct sums to, shared by the solver's copies.
#[derive(Clone)]
pub struct SharedDevice(pub Arc<Mutex<dyn DirectDevice>>);

impl std::fmt::Debug for SharedDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedDevice")
    }
}

/// The velocity stage's buffers, reused across steps.
#[derive(Clone, Debug)]
pub struct VelocitySolver {
    /// Where the direct sums run: a device (the GPU), or the CPU without one.
    pub device: Option<SharedDevice>,
    /// How a device failed at the last evaluation, if one did.
    pub device_error: Option<String>,
    /// Where the grid techniques' velocity is sampled at the vortons and tracers (with the Poisson
    /// technique, after its curl): a device (the GPU), or the CPU without one.
    pub grid_device: Option<SharedGridDevice>,
    /// Whether the last evaluation's grid velocity was left in the Poisson technique's potential (its curl
    /// taken on a device): [`grid_velocity`](Self::grid_velocity) takes the curl when asked, into `curled`.
    curl_on_demand: bool,
    curled: OnceLock<Vec<[f64; 3]>>,
    sources: Sources,
    /// The treecode.
    pub tree: Tree,
    /// The Poisson technique's grids and solver.
    pub poisson: PoissonVelocity,
    /// The Poisson solver's error at the last evaluation, if it failed.
    pub error: Option<SolveError>,
    radii: Vec<f64>,
    targets: Vec<DVec3>,
    target_u: Vec<DVec3>,
    grid_u: Grid<[f64; 3], 3>,
    grid_j: Grid<[f64; 9], 3>,
    /// The grid fitted at the last evaluation.
    pub grid: FittedGrid,
    /// Velocity at the vortons (m/s).
    pub u: Vec<DVec3>,
    /// Velocity gradient at the vortons (1/s, row-major ∂uᵢ/∂x_k), when asked for.
    pub jac: Vec<[f64; 9]>,
    /// Velocity at the tracers (m/s).
    pub u_tracers: Vec<DVec3>,
}

impl Default for VelocitySolver {
    fn default() -> Self {
        Self {
            device: None,
            device_error: None,
            grid_device: None,
            curl_on_demand: false,
            curled: OnceLock::new(),
            sources: Sources::default(),
            tree: Tree::default(),
            poisson: PoissonVelocity::default(),
            error: None,
            radii: Vec::new(),
            targets: Vec::new(),
            target_u: Vec::new(),
            grid_u: Grid::new([1, 1, 1], [0.0; 3], 1.0, [0.0; 3]),
            grid_j: Grid::new([1, 1, 1], [0.0; 3], 1.0, [0.0; 9]),
            grid: FittedGrid {
                dims: [1, 1, 1],
                origin: [0.0; 3],
                spacing: 1.0,
            },
            u: Vec::new(),
            jac: Vec::new(),
            u_tracers: Vec::new(),
        }
    }
}

impl VelocitySolver {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.sources.bytes()
            + self.tree.bytes()
            + self.poisson.bytes()
            + (self.radii.capacity()) * 8
            + (self.targets.capacity() + self.target_u.capacity() + self.u.capacity()) * 24
            + self.u_tracers.capacity() * 24
            + self.jac.capacity() * 72
            + (self.grid_u.data.capacity() + self.curled.get().map_or(0, Vec::capacity)) * 24
            + self.grid_j.data.capacity() * 72
    }

    /// Velocity at the grid points of the last evaluation (m/s), for the techniques that work on the grid;
    /// where a device took the Poisson technique's curl, taken here from the potential at the first call.
    pub fn grid_velocity(&self) -> &[[f64; 3]] {
        if !self.curl_on_demand {
            return &self.grid_u.data;
        }
        self.curled.get_or_init(|| {
            let u = self.poisson.velocity(&self.grid);
            u.iter().map(|v| v.to_array()).collect()
        })
    }

    /// Evaluates velocity (and its gradient) at the vortons and tracers of `q` with the technique of `params`.
    pub fn solve(&mut self, params: &VpmParams, q: &Query) {
        let n = q.position.len();
        let tracers = if params.velocity.on_grid() {
            q.tracers
        } else {
            &[]
        };
        self.grid = FittedGrid::fit(
            &[q.position, tracers],
            params.grid_resolution,
            params.grid_margin,
        );
        if params.auto_mollify {
            mollify::mollified_radii(
                q.radius,
                self.grid.spacing,
                params.length_scale,
                &mut self.radii,
            );
        } else {
            self.radii.clear();
            self.radii.extend_from_slice(q.radius);
        }
        self.u.resize(n, DVec3::ZERO);
        self.jac.resize(if q.gradient { n } else { 0 }, [0.0; 9]);
        self.u_tracers.resize(q.tracers.len(), DVec3::ZERO);
        let boundary = params.poisson.boundary;
        match params.velocity {
            VelocityMethod::DirectVortons | VelocityMethod::DirectGrid => {
                self.fill_sources(q);
            }
            VelocityMethod::TreeVortons | VelocityMethod::TreeGrid => {
                self.tree
                    .build(&params.tree, q.position, q.strength, &self.radii);
            }
            VelocityMethod::Poisson => {
                // The boundary integral's set-up counts in its stage's time.
                let t = Instant::now();
                match boundary {
                    PotentialBoundary::Tree => {
                        self.tree
                            .build(&params.tree, q.position, q.strength, &self.radii);
                    }
                    PotentialBoundary::Direct => self.fill_sources(q),
                    PotentialBoundary::Zero => {}
                }
                self.poisson
                    .add_boundary_time(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        self.error = None;
        self.curl_on_demand = false;
        self.curled.take();
        if params.velocity.on_grid() {
            if params.velocity == VelocityMethod::Poisson {
                let (tree, sources) = (&mut self.tree, &self.sources);
                let boundary_tree = TreeParams {
                    theta: params.poisson.boundary_theta,
                    method: TreeMethod::Treecode,
                    ..params.tree
                };
                let mut by_tree = |p: &[DVec3], out: &mut [DVec3]| {
                    tree.evaluate_potential(&boundary_tree, p, out)
                };
                // Direct sums on the direct-sum device where there is one (the GPU backend).
                let (device, device_error) = (&self.device, &mut self.device_error);
                let mut by_sum = |p: &[DVec3], out: &mut [DVec3]| match device {
                    Some(device) => {
                        let mut device = device.0.lock().unwrap_or_else(|p| p.into_inner());
                        if let Err(e) = device.potential(sources, p, out) {
                            *device_error = Some(e);
                        }
                    }
                    None => biot_savart::potential_direct(sources, p, out),
                };
                let integral: Option<&mut BoundaryIntegral> = match boundary {
                    PotentialBoundary::Tree => Some(&mut by_tree),
                    PotentialBoundary::Direct => Some(&mut by_sum),
                    PotentialBoundary::Zero => None,
                };
                self.poisson.set_stage(q.stage);
                if let Err(e) = self.poisson.solve_potential(
                    &params.poisson,
                    &self.grid,
                    Blobs {
                        position: q.position,
                        strength: q.strength,
                        radius: &self.radii,
                    },
                    integral,
                ) {
                    self.error = Some(e);
                    return;
                }
                if self.device_error.is_some() {
                    return;
                }
                if let Some(device) = &self.grid_device {
                    let (at, out) = samples(q, &mut self.u, &mut self.jac, &mut self.u_tracers);
                    let sampled = self.poisson.sample_on(device, &self.grid, at, out);
                    self.curl_on_demand = sampled == Ok(true);
                    if self.done_on_device(sampled) {
                        return;
                    }
                }
                self.poisson.curl_into(&self.grid, &mut self.target_u);
            } else {
                self.grid.points_into(&mut self.targets);
                self.target_u.resize(self.targets.len(), DVec3::ZERO);
                self.at_targets(params, false);
                if let Some(device) = self.grid_device.clone() {
                    self.grid_derivatives(None);
                    let (at, out) = samples(q, &mut self.u, &mut self.jac, &mut self.u_tracers);
                    let field = GridField::Velocity(&self.grid_u.data);
                    let sampled = device.sample(&self.grid, field, at, out);
                    if self.done_on_device(sampled) {
                        return;
                    }
                }
            }
            self.grid_derivatives(q.gradient.then_some(q.position));
            let (gu, gj) = (&self.grid_u, &self.grid_j);
            let sample_u = |p: DVec3| DVec3::from_array(gu.sample(p.to_array()));
            if q.gradient {
                // Both grids have the fitted grid's shape: one stencil per vorton serves both.
                let (u, jac) = (&mut self.u, &mut self.jac);
                u.par_chunks_mut(CHUNK)
                    .zip(jac.par_chunks_mut(CHUNK))
                    .enumerate()
                    .for_each(|(c, (u, jac))| {
                        let first = c * CHUNK;
                        for (k, (u, jac)) in u.iter_mut().zip(jac).enumerate() {
                            let (idx, w) = gu.stencil(q.position[first + k].to_array());
                            *u = DVec3::from_array(gu.sample_at(&idx, &w));
                            *jac = gj.sample_at(&idx, &w);
                        }
                    });
            } else {
                fill(&mut self.u, |i| sample_u(q.position[i]));
            }
            fill(&mut self.u_tracers, |i| sample_u(q.tracers[i]));
        } else if let (Some(device), false) = (&self.device, params.velocity.uses_tree()) {
            // The vortons' direct sums and the tracers' in one round trip of the device.
            let mut device = device.0.lock().unwrap_or_else(|p| p.into_inner());
            let vortons = Targets {
                at: q.position,
                u: &mut self.u,
                jac: q.gradient.then_some(&mut self.jac[..]),
            };
            let tracers = Targets {
                at: q.tracers,
                u: &mut self.u_tracers,
                jac: None,
            };
            if let Err(e) = device.direct_both(&self.sources, [vortons, tracers]) {
                self.device_error = Some(e);
            }
        } else {
            self.targets.clear();
            self.targets.extend_from_slice(q.position);
            self.target_u.resize(n, DVec3::ZERO);
            self.at_targets(params, q.gradient);
            self.u.copy_from_slice(&self.target_u);
            if !q.tracers.is_empty() {
                self.targets.clear();
                self.targets.extend_from_slice(q.tracers);
                self.target_u.resize(q.tracers.len(), DVec3::ZERO);
                self.at_targets(params, false);
                self.u_tracers.copy_from_slice(&self.target_u);
            }
        }
    }

    /// Whether a grid device's sampling ended the evaluation: it took the stage, or it failed (kept in
    /// `device_error`).
    fn done_on_device(&mut self, sampled: Result<bool, String>) -> bool {
        sampled.unwrap_or_else(|e| {
            self.device_error = Some(e);
            true
        })
    }

    /// The vortons as f32 sources of the direct sums, relative to their mean position.
    fn fill_sources(&mut self, q: &Query) {
        let origin = centre(q.position);
        self.sources
            .fill(origin, q.position, q.strength, &self.radii);
    }

    /// Velocity at `self.targets` into `self.target_u` (and the gradient into `self.jac`).
    fn at_targets(&mut self, params: &VpmParams, gradient: bool) {
        let jac = if gradient {
            Some(&mut self.jac[..])
        } else {
            None
        };
        if params.velocity.uses_tree() {
            self.tree
                .evaluate(&params.tree, &self.targets, &mut self.target_u, jac);
        } else if let Some(device) = &self.device {
            let mut device = device.0.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = device.direct(&self.sources, &self.targets, &mut self.target_u, jac) {
                self.device_error = Some(e);
            }
        } else {
            biot_savart::direct(&self.sources, &self.targets, &mut self.target_u, jac);
        }
    }

    /// Moves the grid-point velocities into `grid_u` and, when the gradient is wanted at `points`, takes it by
    /// central differences (one-sided at the faces of the grid) into `grid_j`, at the grid points of the cells
    /// that hold those points only (the others are never read).
    fn grid_derivatives(&mut self, points: Option<&[DVec3]>) {
        let g = self.grid;
        self.grid_u.dims = g.dims;
        self.grid_u.origin = g.origin;
        self.grid_u.spacing = g.spacing;
        self.grid_u.data.clear();
        self.grid_u
            .data
            .par_extend(self.target_u.par_iter().map(|v| v.to_array()));
        let Some(points) = points.filter(|p| !p.is_empty()) else {
            return;
        };
        self.grid_j.dims = g.dims;
        self.grid_j.origin = g.origin;
        self.grid_j.spacing = g.spacing;
        self.grid_j.data.resize(g.len(), [0.0; 9]);
        // The lowest grid point of the points' trilinear stencils, and one past the highest, per axis (minima
        // and maxima: the same whatever the order). `cic` picks the cells that `Grid::stencil` samples below.
        let bounds = |(lo, hi): ([usize; 3], [usize; 3]), (l, h): ([usize; 3], [usize; 3])| {
            (
                std::array::from_fn(|a| lo[a].min(l[a])),
                std::array::from_fn(|a| hi[a].max(h[a])),
            )
        };
        let (lo, hi) = points
            .par_iter()
            .with_min_len(CHUNK)
            .map(|&p| {
                let c = g.cic(p).0;
                (c, c.map(|v| v + 2))
            })
            .reduce(|| ([usize::MAX; 3], [0; 3]), bounds);
        let u = &self.grid_u.data;
        // j[3i + k] = ∂u_i/∂x_k.
        g.differences_in(
            std::array::from_fn(|a| lo[a]..hi[a]),
            |i| u[i],
            &mut self.grid_j.data,
            |d| std::array::from_fn(|q| d[q % 3][q / 3]),
        );
    }
}

/// The points of `q` that a [`GridDevice`](super::sampling::GridDevice) samples, and where it writes.
fn samples<'a>(
    q: &Query<'a>,
    u: &'a mut [DVec3],
    jac: &'a mut [[f64; 9]],
    u_tracers: &'a mut [DVec3],
) -> (Samples<'a>, Sampled<'a>) {
    (
        Samples {
            vortons: q.position,
            gradient: q.gradient,
            tracers: q.tracers,
        },
        Sampled { u, jac, u_tracers },
    )
}

/// Mean of the positions (m): the origin of the f32 source coordinates.
fn centre(p: &[DVec3]) -> DVec3 {
    if p.is_empty() {
        return DVec3::ZERO;
    }
    let s = par::sum_n::<3>(p.len(), |i| p[i].to_array());
    DVec3::from_array(s) / p.len() as f64
}

/// Points per parallel task of the interpolation at vortons and tracers.
const CHUNK: usize = 1024;

/// `out[i] = f(i)` in parallel.
fn fill<T: Send>(out: &mut [T], f: impl Fn(usize) -> T + Sync + Send) {
    let n = out.len();
    let s = par::SharedSlice::new(out);
    par::for_each_chunk(n, CHUNK, |range| {
        // SAFETY: chunks are disjoint.
        let o = unsafe { s.slice_mut(range.clone()) };
        for (x, i) in o.iter_mut().zip(range) {
            *x = f(i);
        }
    });
}
