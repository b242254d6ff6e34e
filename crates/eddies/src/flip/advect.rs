//! Particle advection through the grid velocity (Bridson, §3.1 and §7.6): second-order Runge–Kutta
//! (midpoint), then solid push-out and the domain walls; fused with the grid-to-particle transfer, which
//! samples the grid at the same point as advection's first stage.

use super::params::{Boundary, Transfer};
use super::particles::{Particles, PARTICLE_CHUNK};
use super::transfer::{
    self, particles_to_grid, sort_particles, Advection, CpuTransfer, Displacement, FaceStencils,
    GridSums, HalfCellBins, TransferDevice, SAMPLE_BATCH,
};
use crate::grid::{to_dvec3, MacGrid};
use crate::par::{self, SharedSlice};
use crate::shape::Shape;
use multiversion::multiversion;

/// Distance (in cells) a pushed-out particle is left outside an obstacle's surface or inside a closed wall.
const MARGIN: f64 = 1e-3;

/// One [`SharedSlice`] per axis array.
fn shared<const D: usize>(arrays: &mut [Vec<f32>; D]) -> [SharedSlice<'_, f32>; D] {
    let mut it = arrays.iter_mut();
    std::array::from_fn(|_| SharedSlice::new(it.next().expect("D arrays")))
}

/// The range `r` of every array of `a`.
///
/// # Safety
/// As [`SharedSlice::slice_mut`]: no other live borrow may overlap `r`.
#[allow(clippy::mut_from_ref)]
unsafe fn take<'a, const D: usize>(
    a: &'a [SharedSlice<'_, f32>; D],
    r: std::ops::Range<usize>,
) -> [&'a mut [f32]; D] {
    let mut k = 0;
    [(); D].map(|_| {
        // SAFETY: forwarded to the caller.
        let s = unsafe { a[k].slice_mut(r.clone()) };
        k += 1;
        s
    })
}

/// The face fields that the particle pass reads, as f32: the particles store their velocities and positions in
/// f32, and the FLIP update adds the difference `u − u_old`, rounded once, rather than two large nearly equal
/// values.
#[derive(Clone, Debug)]
pub(crate) struct Packed<const D: usize> {
    /// `[u, u − u_old, d, 0]` face by face (`d` the volume correction's displacement, or 0), so that one
    /// 16-byte load per stencil corner serves the sample at the particle's start.
    fields: [Vec<[f32; 4]>; D],
    /// `u` alone, for advection's midpoint sample: a quarter of the bytes, so that it stays in cache.
    u: [Vec<[f32; 1]>; D],
}

impl<const D: usize> Default for Packed<D> {
    fn default() -> Self {
        Packed {
            fields: std::array::from_fn(|_| Vec::new()),
            u: std::array::from_fn(|_| Vec::new()),
        }
    }
}

impl<const D: usize> Packed<D> {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.fields.iter().map(|f| f.capacity() * 16).sum::<usize>()
            + self.u.iter().map(|u| u.capacity() * 4).sum::<usize>()
    }
}

/// Fills `packed` from the grids, both arrays in one pass.
fn pack<const D: usize>(
    u: &MacGrid<D>,
    u_old: &MacGrid<D>,
    disp: Option<&MacGrid<D>>,
    packed: &mut Packed<D>,
) {
    for (k, (fields, only)) in packed.fields.iter_mut().zip(&mut packed.u).enumerate() {
        let (uk, ok) = (&u.u[k].data, &u_old.u[k].data);
        let dk = disp.map(|d| &d.u[k].data[..]);
        fields.resize(uk.len(), [0.0; 4]);
        only.resize(uk.len(), [0.0]);
        let (fields, only) = (SharedSlice::new(fields), SharedSlice::new(only));
        par::for_each_chunk(uk.len(), PARTICLE_CHUNK, |r| {
            // SAFETY: chunks are disjoint.
            let (f, o) = unsafe { (fields.slice_mut(r.clone()), only.slice_mut(r.clone())) };
            for ((j, f), o) in r.zip(f.iter_mut()).zip(o.iter_mut()) {
                let d = dk.map_or(0.0, |d| d[j]);
                *f = [uk[j] as f32, (uk[j] - ok[j]) as f32, d as f32, 0.0];
                *o = [uk[j] as f32];
            }
        });
    }
}

/// The grid-to-particle transfer ([`transfer::grid_to_particles`]) and advection of every particle, in one
/// pass over the particles (both read the grid velocity at the particle). `disp` (m), the volume correction's
/// displacement ([`super::project::volume_displacement`]) sampled at the particle's start, is added to its move.
/// The pass reads `u`, `u − u_old` and `disp` from `packed` ([`pack`]), which it fills first.
///
/// Advection moves a particle by the midpoint rule `x ← x + Δt u(x + ½Δt u(x))` with `u` the extrapolated grid
/// velocity. A particle that ends inside an obstacle (`shapes`, at the end of the step) is moved back out
/// along the obstacle's normal to just outside its surface; with closed walls particles are clamped into the
/// domain, with open ones a particle that left it gets a NaN position and is dropped at the next sort.
#[allow(clippy::too_many_arguments)]
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn transfer_and_advect<const D: usize>(
    p: &mut Particles<D>,
    u: &MacGrid<D>,
    u_old: &MacGrid<D>,
    transfer: Transfer,
    pic_ratio: f64,
    disp: Option<&MacGrid<D>>,
    packed: &mut Packed<D>,
    shapes: &[Shape],
    boundary: Boundary,
    dt: f64,
) {
    pack(u, u_old, disp, packed);
    let packed = &*packed;
    let strides: [[usize; D]; D] = std::array::from_fn(|k| u.u[k].strides());
    let n = p.len();
    let h = u.spacing;
    let inv_h = 1.0 / h;
    let origin = u.origin;
    let lo: [f64; D] = std::array::from_fn(|k| origin[k] + MARGIN * h);
    let hi: [f64; D] = std::array::from_fn(|k| origin[k] + (u.dims[k] as f64 - MARGIN) * h);
    let apic = transfer == Transfer::Apic;
    let pos = shared(&mut p.pos);
    let vel = shared(&mut p.vel);
    let affine: Vec<SharedSlice<f32>> = if apic {
        p.affine
            .iter_mut()
            .flatten()
            .map(|a| SharedSlice::new(a))
            .collect()
    } else {
        Vec::new()
    };
    par::for_each_chunk(n, PARTICLE_CHUNK, |r| {
        // SAFETY: chunks are disjoint, and each array is borrowed once per chunk.
        let (xs, mut vs) = unsafe { (take(&pos, r.clone()), take(&vel, r.clone())) };
        let mut cs: Vec<&mut [f32]> = affine
            .iter()
            // SAFETY: as above.
            .map(|a| unsafe { a.slice_mut(r.clone()) })
            .collect();
        // Batch by batch: the stencils of all its particles, then their samples, and so on (see
        // [`FaceStencils`]). Slots past the batch's end hold the domain's corner and are not used.
        for first in (0..r.len()).step_by(SAMPLE_BATCH) {
            let batch = first..r.len().min(first + SAMPLE_BATCH);
            let mut s0 = [[0.0f64; SAMPLE_BATCH]; D];
            for k in 0..D {
                for (s, &x) in s0[k].iter_mut().zip(&xs[k][batch.clone()]) {
                    *s = (x as f64 - origin[k]) * inv_h;
                }
            }
            let at = FaceStencils::new(&s0, u.dims, &strides);
            let mut here = [[[0.0f64; 4]; D]; SAMPLE_BATCH];
            for (j, here) in here.iter_mut().enumerate().take(batch.len()) {
                for k in 0..D {
                    here[k] = at.sample(k, j, &packed.fields[k], strides[k]);
                }
            }
            // `u` and `u − u_old` at each particle, per component, for the loops across the batch.
            let mut un = [[0.0f64; SAMPLE_BATCH]; D];
            let mut du = [[0.0f64; SAMPLE_BATCH]; D];
            for (j, here) in here.iter().enumerate() {
                for k in 0..D {
                    un[k][j] = here[k][0];
                    du[k][j] = here[k][1];
                }
            }
            transfer::grid_to_particles(
                u,
                transfer,
                pic_ratio,
                batch.clone(),
                &xs,
                &un,
                &du,
                &mut vs,
                &mut cs,
            );
            let mut mid = s0;
            for k in 0..D {
                for (m, &v) in mid[k].iter_mut().zip(&un[k]) {
                    *m += 0.5 * dt * inv_h * v;
                }
            }
            let at = FaceStencils::new(&mid, u.dims, &strides);
            // The move through the midpoint's velocity, plus the volume correction's displacement sampled at
            // the particle's start.
            let mut x = [[0.0f64; SAMPLE_BATCH]; D];
            for j in 0..batch.len() {
                for k in 0..D {
                    x[k][j] = at.sample(k, j, &packed.u[k], strides[k])[0];
                }
            }
            for k in 0..D {
                for (j, (x, &x0)) in x[k].iter_mut().zip(&xs[k][batch.clone()]).enumerate() {
                    *x = x0 as f64 + dt * *x + here[j][k][2];
                }
            }
            for j in 0..batch.len() {
                for s in shapes {
                    let q = to_dvec3::<D>(std::array::from_fn(|k| x[k][j]));
                    let d = s.sdf(q);
                    if d < MARGIN * h {
                        let nrm = s.normal(q, 0.25 * h);
                        for k in 0..D {
                            x[k][j] += (MARGIN * h - d) * nrm[k];
                        }
                    }
                }
            }
            match boundary {
                Boundary::Closed => {
                    for k in 0..D {
                        for (out, &x) in xs[k][batch.clone()].iter_mut().zip(&x[k]) {
                            *out = x.clamp(lo[k], hi[k]) as f32;
                        }
                    }
                }
                Boundary::Open => {
                    for j in 0..batch.len() {
                        let gone = (0..D).any(|k| !(x[k][j] >= origin[k] && x[k][j] < hi[k]));
                        for k in 0..D {
                            xs[k][first + j] = if gone { f32::NAN } else { x[k][j] as f32 };
                        }
                    }
                }
            }
        }
    });
}

impl<const D: usize> TransferDevice<D> for CpuTransfer {
    fn particles_to_grid(
        &mut self,
        particles: &Particles<D>,
        grid: &MacGrid<D>,
        transfer: Transfer,
        out: GridSums<'_, D>,
    ) -> Result<bool, String> {
        let mut p = particles.clone();
        let mut bins = HalfCellBins::new(grid.dims);
        sort_particles(&mut p, &mut bins, grid.origin, grid.spacing);
        let mut u = MacGrid::new(grid.dims, grid.origin, grid.spacing);
        let mut sums = std::array::from_fn(|k| u.u[k].same_shape([0.0f32; 2]));
        particles_to_grid(&p, &bins, &mut u, &mut sums, transfer);
        out.take_from(&sums);
        Ok(true)
    }

    fn grid_to_particles_advect(
        &mut self,
        particles: &mut Particles<D>,
        step: &Advection<'_, D>,
    ) -> Result<bool, String> {
        let displacement = match step.displacement {
            Displacement::None => None,
            Displacement::Host(d) => Some(d),
            Displacement::Device => {
                return Err("the CPU's transfer reads no displacement on a device".into())
            }
        };
        transfer_and_advect(
            particles,
            step.u,
            step.u_old,
            step.transfer,
            step.pic_ratio,
            displacement,
            &mut Packed::default(),
            step.obstacles,
            step.boundary,
            step.dt,
        );
        Ok(true)
    }
}
