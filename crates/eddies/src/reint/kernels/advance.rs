//! Stage "advance", the first half of reintegration tracking (Moroz 2020): velocities from the forces, then
//! the positions the gather spreads from, within the neighbourhood it visits.

use super::{for_each_chunk, CellLayout, State};
use crate::par::SharedSlice;
use multiversion::multiversion;
use std::sync::atomic::{AtomicU64, Ordering};

/// Stage "advance" (first half of reintegration): `V += Δt (a + g)`, speed limited to what one step can
/// carry, then `X' = X + Δt V` clamped to `[−1.5 + r, 1.5 − r]` (cells, from the cell centre) so that the
/// spread box lands inside the 3^D neighbourhood that the gather visits (Moroz's finite search radius).
///
/// Returns how many velocity components of particles that hold mass were held at the speed limit: each one
/// is motion the physics asked for and the step could not carry. The count is an integer sum, the same for
/// any schedule.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn advance<const D: usize>(
    layout: &CellLayout<D>,
    state: &mut State<D>,
    acc: Option<&[Vec<f32>; D]>,
    gravity: [f32; D],
    dt: f32,
    r: f32,
) -> u64 {
    let vmax = speed_limit(dt, r);
    let reach = 1.5 - r;
    let limited = AtomicU64::new(0);
    let mass = &state.mass;
    let pos: Vec<SharedSlice<f32>> = state.pos.iter_mut().map(|v| SharedSlice::new(v)).collect();
    let vel: Vec<SharedSlice<f32>> = state.vel.iter_mut().map(|v| SharedSlice::new(v)).collect();
    for_each_chunk(
        layout,
        || (),
        |_, i0, w| {
            let mut held = 0;
            for a in 0..D {
                // SAFETY: chunks of distinct rows are disjoint.
                let (x, v) =
                    unsafe { (pos[a].slice_mut(i0..i0 + w), vel[a].slice_mut(i0..i0 + w)) };
                let f = acc.map(|acc| &acc[a][i0..i0 + w]);
                if advance_axis(x, v, f, gravity[a], dt, vmax, reach) >= vmax {
                    // Rare: only now look at which of the chunk's particles hold mass.
                    held += (0..w)
                        .filter(|&l| v[l].abs() >= vmax && mass.iter().any(|m| m[i0 + l] > 0.0))
                        .count() as u64;
                }
            }
            if held > 0 {
                limited.fetch_add(held, Ordering::Relaxed);
            }
        },
    );
    limited.into_inner()
}

/// The largest speed (cells per second) that one step of `dt` seconds can carry with boxes of half-size
/// `r`: past it a particle's box would land beyond the neighbourhood that the gather visits.
pub fn speed_limit(dt: f32, r: f32) -> f32 {
    (1.5 - r + 0.5) / dt
}

/// [`advance`] along one axis of a chunk; returns the largest |V| before the limit. A function of its own
/// so that the compiler knows `x`, `v` and `f` do not overlap (they come from shared slices) and vectorises
/// the loops.
#[inline(always)]
fn advance_axis(
    x: &mut [f32],
    v: &mut [f32],
    f: Option<&[f32]>,
    g: f32,
    dt: f32,
    vmax: f32,
    reach: f32,
) -> f32 {
    let w = x.len().min(v.len());
    let mut peak = 0.0f32;
    match f {
        Some(f) => {
            let f = &f[..w];
            for l in 0..w {
                let u = v[l] + dt * (f[l] + g);
                peak = peak.max(u.abs());
                v[l] = u.clamp(-vmax, vmax);
            }
        }
        None => {
            for l in 0..w {
                let u = v[l] + dt * g;
                peak = peak.max(u.abs());
                v[l] = u.clamp(-vmax, vmax);
            }
        }
    }
    for l in 0..w {
        x[l] = (x[l] + dt * v[l]).clamp(-reach, reach);
    }
    peak
}
