//! Stage "density" of reintegration tracking: the density and pressure term of every cell from its substance
//! masses (Moroz 2020).

use super::{for_each_chunk, CellLayout, State};
use crate::par::SharedSlice;
use crate::reint::eos::EosTerm;
use multiversion::multiversion;

/// Stage "density": ρ = M / V_cell and the pressure term q = P/ρ² of every cell, from its substance masses.
///
/// Masses are in quanta: `unit[k]` is the mass of one quantum of substance k (kg) and `quanta_per_rest` the
/// quanta of a cell at rest density, so `s = Σₖ mₖ / quanta_per_rest` is the compression of the cell against
/// the rest density of its own substance mix. Cells lighter than `rho_min` count as vacuum. Without `tension`
/// negative pressures are clamped to zero (see [`crate::reint::ReintParams::tension`]).
#[allow(clippy::too_many_arguments)]
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn density<const D: usize, const S: usize>(
    layout: &CellLayout<D>,
    state: &State<D>,
    inv_cell_volume: f32,
    unit: [f32; S],
    inv_quanta_per_rest: f32,
    rho_min: f32,
    eos: EosTerm,
    tension: bool,
    rho: &mut [f32],
    q: &mut [f32],
) {
    let mass: [&[f32]; S] = std::array::from_fn(|k| state.mass[k].as_slice());
    let rho_out = SharedSlice::new(rho);
    let q_out = SharedSlice::new(q);
    for_each_chunk(
        layout,
        || (),
        |_, i0, w| {
            // SAFETY: chunks of distinct rows are disjoint.
            let (rho, q) = unsafe { (rho_out.slice_mut(i0..i0 + w), q_out.slice_mut(i0..i0 + w)) };
            let m: [&[f32]; S] = std::array::from_fn(|k| &mass[k][i0..i0 + w]);
            let chunk = |law: EosTerm| {
                density_chunk(
                    rho,
                    q,
                    m,
                    unit,
                    inv_cell_volume,
                    inv_quanta_per_rest,
                    rho_min,
                    |s| law.q_times_rest(s, tension),
                )
            };
            // One loop per law: the choice is not made per cell.
            eos.specialise(chunk)
        },
    );
}

/// [`density`] over one chunk, with `q·ρ₀` from `q_rest(s)`. A function of its own so that the compiler
/// knows `rho` and `q` (from shared slices) do not overlap, and vectorises the loop.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn density_chunk<const S: usize>(
    rho: &mut [f32],
    q: &mut [f32],
    m: [&[f32]; S],
    unit: [f32; S],
    inv_cell_volume: f32,
    inv_quanta_per_rest: f32,
    rho_min: f32,
    q_rest: impl Fn(f32) -> f32,
) {
    let w = rho.len().min(q.len());
    for l in 0..w {
        let mut total = 0.0;
        let mut s = 0.0;
        for k in 0..S {
            total += m[k][l] * unit[k];
            s += m[k][l];
        }
        let s = s * inv_quanta_per_rest;
        // Specks thinner than rho_min take no part in the forces.
        let r = total * inv_cell_volume;
        let present = r > rho_min;
        rho[l] = if present { r } else { 0.0 };
        // ρ₀ = ρ/s for the mix, so q = (q·ρ₀)·s/ρ.
        q[l] = if present { q_rest(s) * s / r } else { 0.0 };
    }
}
