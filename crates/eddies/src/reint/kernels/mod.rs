//! The per-cell stages of reintegration tracking (Moroz 2020), as gathers over the 3^D neighbourhood, one
//! file per stage: [`density`](mod@density), [`forces`], [`advance`](mod@advance) and the reintegration
//! [`gather`]. This module holds what they share: the chunk loops and the occupancy map that lets them
//! skip empty chunks, the mirror-symmetric sum order, and the fixed-size windows of a neighbour row.
//!
//! Every stage is written once for one row of cells and run over rows in parallel; each cell writes only its
//! own outputs, so results are independent of the thread count. Inner loops run over chunks of [`LANES`]
//! cells of a row with fixed-size accumulators, so the compiler vectorises across cells (no float
//! reassociation is involved: each lane computes exactly what the scalar loop would).

// Lane loops index several same-length arrays at `l` on purpose: written so, they vectorise, and the
// iterator forms clippy suggests would zip up to eight slices for no gain in clarity.
#![allow(clippy::needless_range_loop)]

mod advance;
mod density;
mod forces;
mod gather;

pub(crate) use advance::advance;
pub use advance::speed_limit;
pub(crate) use density::density;
pub(crate) use forces::{sph_forces, ForceConsts};
pub(crate) use gather::{normalise, reintegrate, Totals};

use super::state::{CellLayout, State};
use multiversion::multiversion;
use rayon::prelude::*;

/// Cells per inner chunk: the accumulators of one chunk stay in L1 and the loop vectorises over it.
pub(crate) const LANES: usize = 128;

/// Rows per parallel task: enough work to amortise scheduling, small enough to balance.
fn grain(row_len: usize) -> usize {
    (4096 / row_len.max(1)).max(1)
}

/// `max(x, 0)` written so that it compiles to one vector instruction.
#[inline(always)]
fn pos_part(x: f32) -> f32 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// Copies a chunk's `dst.len()` (at most [`LANES`]) values out of a lane array. A full chunk copies a
/// fixed-size block, which compiles to a few vector moves rather than a call to `memcpy`.
#[inline(always)]
fn store(dst: &mut [f32], src: &[f32; LANES]) {
    match <&mut [f32; LANES]>::try_from(&mut *dst) {
        Ok(full) => *full = *src,
        Err(_) => dst.copy_from_slice(&src[..dst.len()]),
    }
}

/// Copies a chunk's `src.len()` (at most [`LANES`]) values into the front of a lane array, as [`store`].
#[inline(always)]
fn load(dst: &mut [f32; LANES], src: &[f32]) {
    match <&[f32; LANES]>::try_from(src) {
        Ok(full) => *dst = *full,
        Err(_) => dst[..src.len()].copy_from_slice(src),
    }
}

/// Runs `f(scratch, first_index, len)` over the chunks of every interior row, rows in parallel. Each worker
/// job builds its scratch once with `init`; kernels overwrite every scratch value they read, so results do
/// not depend on which job ran which row.
fn for_each_chunk<const D: usize, T>(
    layout: &CellLayout<D>,
    init: impl Fn() -> T + Sync + Send,
    f: impl Fn(&mut T, usize, usize) + Sync + Send,
) {
    let nx = layout.n[0];
    (0..layout.rows())
        .into_par_iter()
        .with_min_len(grain(nx))
        .for_each_init(init, |scratch, row| {
            let start = layout.row_start(row);
            let mut x = 0;
            while x < nx {
                let w = LANES.min(nx - x);
                f(scratch, start + x, w);
                x += w;
            }
        });
}

/// Chunks of [`LANES`] cells per row (the last one may be shorter).
fn chunks_per_row<const D: usize>(layout: &CellLayout<D>) -> usize {
    layout.n[0].div_ceil(LANES)
}

/// Length of the occupancy map: one flag per chunk of every padded row, halo rows included.
pub(crate) fn occupancy_len<const D: usize>(layout: &CellLayout<D>) -> usize {
    layout.len() / layout.padded[0] * chunks_per_row(layout)
}

/// The occupancy flag of the chunk that starts at padded index `i0`.
#[inline]
fn chunk_index<const D: usize>(layout: &CellLayout<D>, i0: usize) -> usize {
    let (row, x) = (i0 / layout.padded[0], i0 % layout.padded[0] - 1);
    row * chunks_per_row(layout) + x / LANES
}

/// Marks which chunks of [`LANES`] cells along x hold any mass. Halo rows count as occupied: closed walls
/// put mirrored mass there (the halo cells at the ends of a row mirror the row's own first and last cells,
/// so they hold mass only where the first or last chunk does). Kernels skip chunks whose neighbourhood is
/// empty, writing what the computation would give (vacuum), so a sparse scene costs less than a full one
/// and the result does not change.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn occupancy<const D: usize>(
    layout: &CellLayout<D>,
    state: &State<D>,
    occupied: &mut [bool],
) {
    occupied.fill(true);
    let (nx, cpr) = (layout.n[0], chunks_per_row(layout));
    let rows: Vec<(usize, Vec<bool>)> = (0..layout.rows())
        .into_par_iter()
        .with_min_len(grain(nx))
        .map(|row| {
            let start = layout.row_start(row);
            let any = (0..cpr)
                .map(|c| {
                    let (a, b) = (start + c * LANES, start + ((c + 1) * LANES).min(nx));
                    state.mass.iter().any(|m| m[a..b].iter().any(|&q| q > 0.0))
                })
                .collect();
            (start / layout.padded[0], any)
        })
        .collect();
    for (row, any) in rows {
        occupied[row * cpr..(row + 1) * cpr].copy_from_slice(&any);
    }
}

/// Whether the chunk starting at padded index `i0` holds mass.
#[inline]
fn chunk_occupied<const D: usize>(layout: &CellLayout<D>, occupied: &[bool], i0: usize) -> bool {
    occupied[chunk_index(layout, i0)]
}

/// Whether any cell within one cell of the chunk starting at padded index `i0` may hold mass: the chunk and
/// its two neighbours along x in each of the 3^(D−1) rows around.
#[inline]
fn neighbourhood_occupied<const D: usize>(
    layout: &CellLayout<D>,
    occupied: &[bool],
    i0: usize,
) -> bool {
    let cpr = chunks_per_row(layout);
    let rows = layout.neighbours.len() / 3;
    let c = (i0 % layout.padded[0] - 1) / LANES;
    (0..rows).any(|ro| {
        let delta = layout.neighbours[3 * ro + 1].0;
        let first = (i0 as isize + delta) as usize / layout.padded[0] * cpr;
        (c.saturating_sub(1)..(c + 2).min(cpr)).any(|k| occupied[first + k])
    })
}

/// Per-lane sums of one quantity over the 3^D neighbourhood, added in mirror-symmetric order: within a row
/// `(left + right) + centre`, then rows and planes the same way. Float addition is commutative, so a cell and
/// its mirror image add the very same numbers in the very same pairs and get the same bits — a
/// mirror-symmetric scene stays exactly symmetric, however long it runs.
#[derive(Clone)]
pub(crate) struct SumOrder {
    row: [[f32; LANES]; 3],
    plane: [[f32; LANES]; 3],
}

impl SumOrder {
    pub(crate) const fn new() -> Self {
        Self {
            row: [[0.0; LANES]; 3],
            plane: [[0.0; LANES]; 3],
        }
    }

    /// Adds one x-offset's values `value(lane)` to neighbour row `ro`, in the order left, right, centre
    /// (`first` for the left one), giving the row sum `(left + right) + centre`.
    #[inline(always)]
    fn put(&mut self, ro: usize, first: bool, mut value: impl FnMut(usize) -> f32) {
        // Values are computed in place (not copied from a scratch array, which compiles to a memcpy call).
        let row = &mut self.row[ro % 3];
        if first {
            for l in 0..LANES {
                row[l] = value(l);
            }
        } else {
            for l in 0..LANES {
                row[l] += value(l);
            }
        }
    }

    /// Folds the plane's three rows `(row₀ + row₂) + row₁` once row `ro` completes it (after [`SumOrder::put`]).
    #[inline(always)]
    fn end_row(&mut self, ro: usize) {
        if ro % 3 == 2 {
            let plane = &mut self.plane[ro / 3];
            for l in 0..LANES {
                plane[l] = (self.row[0][l] + self.row[2][l]) + self.row[1][l];
            }
        }
    }

    /// The neighbourhood sum of lane `l` (after every row has been set and folded).
    #[inline(always)]
    fn total<const D: usize>(&self, l: usize) -> f32 {
        if D == 2 {
            self.plane[0][l]
        } else {
            (self.plane[0][l] + self.plane[2][l]) + self.plane[1][l]
        }
    }
}

/// The three members of neighbour row `ro`: `(slot, shift, offset)` for the x-offsets −1, +1 and 0 — `slot`
/// is where their results go (left, right, centre), `shift` their first source index from `j0 − 1`, and
/// `offset` the centre offset (cells) of the source's cell.
#[inline(always)]
fn row_members<const D: usize>(roff: [f32; D]) -> [(usize, usize, [f32; D]); 3] {
    let with_x =
        |ox: f32| -> [f32; D] { std::array::from_fn(|a| if a == 0 { ox } else { roff[a] }) };
    [
        (0, 0, with_x(-1.0)),
        (1, 2, with_x(1.0)),
        (2, 1, with_x(0.0)),
    ]
}

/// Sources of one neighbour row of a chunk: its cells and one more on each side.
const SPAN: usize = LANES + 2;

/// The inputs of a neighbour row's sources as fixed-size windows (`P = &[f32; SPAN]`), or the scratch
/// (`P = [f32; SPAN]`) that holds zero-padded copies of them for a chunk shorter than [`LANES`].
#[derive(Clone)]
struct NeighbourRow<P, const D: usize, const S: usize> {
    pos: [P; D],
    vel: [P; D],
    mass: [P; S],
    deficit: [P; S],
    scale: [P; 1],
}

impl<const D: usize, const S: usize> NeighbourRow<[f32; SPAN], D, S> {
    const fn new() -> Self {
        Self {
            pos: [[0.0; SPAN]; D],
            vel: [[0.0; SPAN]; D],
            mass: [[0.0; SPAN]; S],
            deficit: [[0.0; SPAN]; S],
            scale: [[0.0; SPAN]; 1],
        }
    }
}

/// The values `start..start + SPAN` of each of `inputs` as fixed-size windows, so that lane loops over
/// them compile to whole vectors. A full chunk (`span == SPAN`) reads the inputs in place; a shorter one
/// gets zero-padded copies in `pads`.
#[inline(always)]
fn windows<'a, const K: usize>(
    inputs: [&'a [f32]; K],
    start: usize,
    span: usize,
    pads: &'a mut [[f32; SPAN]; K],
) -> [&'a [f32; SPAN]; K] {
    if span == SPAN {
        inputs.map(|x| x[start..start + SPAN].try_into().unwrap())
    } else {
        for (pad, x) in pads.iter_mut().zip(inputs) {
            pad[..span].copy_from_slice(&x[start..start + span]);
            pad[span..].fill(0.0);
        }
        let pads: &'a [[f32; SPAN]; K] = pads;
        std::array::from_fn(|k| &pads[k])
    }
}
