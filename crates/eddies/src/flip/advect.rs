//! Particle advection through the grid velocity (Bridson, §3.1 and §7.6): second-order Runge–Kutta
//! (midpoint), then solid push-out and the domain walls.

use super::params::Boundary;
use super::particles::Particles;
use super::transfer::PARTICLE_CHUNK;
use crate::grid::{to_dvec3, MacGrid};
use crate::par::{self, SharedSlice};
use crate::shape::Shape;

/// Distance (in cells) a pushed-out particle is left outside an obstacle's surface or inside a closed wall.
const MARGIN: f64 = 1e-3;

/// Moves every particle by the midpoint rule `x ← x + Δt u(x + ½Δt u(x))` with `u` the extrapolated grid
/// velocity. A particle that ends inside an obstacle (`shapes`, at the end of the step) is moved back out
/// along the obstacle's normal to just outside its surface; with closed walls particles are clamped into the
/// domain, with open ones a particle that left it gets a NaN position and is dropped at the next sort.
pub(crate) fn advect<const D: usize>(
    p: &mut Particles<D>,
    u: &MacGrid<D>,
    shapes: &[Shape],
    boundary: Boundary,
    dt: f64,
) {
    let n = p.len();
    let h = u.spacing;
    let lo: [f64; D] = std::array::from_fn(|k| u.origin[k] + MARGIN * h);
    let hi: [f64; D] = std::array::from_fn(|k| u.origin[k] + (u.dims[k] as f64 - MARGIN) * h);
    let pos: [SharedSlice<f32>; D] = {
        let mut it = p.pos.iter_mut();
        std::array::from_fn(|_| SharedSlice::new(it.next().expect("D position arrays")))
    };
    par::for_each_chunk(n, PARTICLE_CHUNK, |r| {
        // SAFETY: chunks are disjoint.
        let xs: [&mut [f32]; D] = {
            let mut k = 0;
            [(); D].map(|_| {
                let s = unsafe { pos[k].slice_mut(r.clone()) };
                k += 1;
                s
            })
        };
        for j in 0..r.len() {
            let x0: [f64; D] = std::array::from_fn(|k| xs[k][j] as f64);
            let v0 = u.sample(x0);
            let mid: [f64; D] = std::array::from_fn(|k| x0[k] + 0.5 * dt * v0[k]);
            let v1 = u.sample(mid);
            let mut x: [f64; D] = std::array::from_fn(|k| x0[k] + dt * v1[k]);
            for s in shapes {
                let q = to_dvec3(x);
                let d = s.sdf(q);
                if d < MARGIN * h {
                    let nrm = s.normal(q, 0.25 * h);
                    for k in 0..D {
                        x[k] += (MARGIN * h - d) * nrm[k];
                    }
                }
            }
            let mut gone = false;
            for k in 0..D {
                match boundary {
                    Boundary::Closed => x[k] = x[k].clamp(lo[k], hi[k]),
                    Boundary::Open => gone |= !(x[k] >= u.origin[k] && x[k] < hi[k]),
                }
            }
            for k in 0..D {
                xs[k][j] = if gone { f32::NAN } else { x[k] as f32 };
            }
        }
    });
}
