//! Velocity extrapolation into the air (seed 001 "Velocity Extrapolation"; Bridson, §4.4): particles near the
//! surface interpolate faces outside the liquid, which hold no projected velocity, so the known velocities are
//! spread outwards layer by layer.

use super::project::face_cells;
use crate::grid::{CellFlag, Grid, MacGrid};

/// Marks the known faces of every component: those with a fluid cell on either side (projected, or held at a
/// solid's velocity). `valid[k]` is resized to the face count of component `k`.
pub(crate) fn mark_valid<const D: usize>(
    u: &MacGrid<D>,
    flags: &Grid<CellFlag, D>,
    valid: &mut [Vec<u8>; D],
) {
    let dims = u.dims;
    for k in 0..D {
        let mut data = std::mem::take(&mut valid[k]);
        data.resize(u.u[k].data.len(), 0);
        let mut g = Grid::from_data(u.u[k].dims, u.u[k].origin, u.spacing, data);
        g.par_for_each_mut(|_, f, m| {
            let (a, b) = face_cells(dims, k, f);
            *m = [a, b]
                .into_iter()
                .flatten()
                .any(|c| flags[c] == CellFlag::Fluid) as u8;
        });
        valid[k] = g.data;
    }
}

/// Extends the known faces `layers` times: each unknown face next to a known one (along any axis, same
/// component) takes the mean of its known neighbours and becomes known. Each layer reads only the previous
/// one (Jacobi order), so the result does not depend on the traversal. Faces never reached keep their value.
pub(crate) fn extrapolate<const D: usize>(
    u: &mut MacGrid<D>,
    valid: &mut [Vec<u8>; D],
    layers: usize,
    next_valid: &mut Vec<u8>,
    next_value: &mut Vec<f64>,
) {
    for k in 0..D {
        let g = &mut u.u[k];
        let dims = g.dims;
        let strides = g.strides();
        for _ in 0..layers {
            next_valid.clear();
            next_valid.extend_from_slice(&valid[k]);
            next_value.clear();
            next_value.extend_from_slice(&g.data);
            let known = &valid[k];
            let mut changed = false;
            {
                let mut out =
                    Grid::from_data(dims, g.origin, g.spacing, std::mem::take(next_value));
                let mut mask =
                    Grid::from_data(dims, g.origin, g.spacing, std::mem::take(next_valid));
                let values = &g.data;
                let mask_ptr = crate::par::SharedSlice::new(&mut mask.data);
                out.par_for_each_mut(|i, c, v| {
                    if known[i] != 0 {
                        return;
                    }
                    let mut sum = 0.0;
                    let mut n = 0u32;
                    for a in 0..D {
                        if c[a] > 0 && known[i - strides[a]] != 0 {
                            sum += values[i - strides[a]];
                            n += 1;
                        }
                        if c[a] + 1 < dims[a] && known[i + strides[a]] != 0 {
                            sum += values[i + strides[a]];
                            n += 1;
                        }
                    }
                    if n > 0 {
                        *v = sum / n as f64;
                        // SAFETY: index i is written by the task that owns cell i only.
                        unsafe { mask_ptr.slice_mut(i..i + 1)[0] = 1 };
                    }
                });
                *next_value = out.data;
                *next_valid = mask.data;
                if next_valid != &valid[k] {
                    changed = true;
                }
            }
            std::mem::swap(&mut g.data, next_value);
            std::mem::swap(&mut valid[k], next_valid);
            if !changed {
                break;
            }
        }
    }
}
