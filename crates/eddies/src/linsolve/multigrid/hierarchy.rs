//! The multigrid hierarchy: its levels ([`MultigridLevel`]: operator, vectors, inverse diagonal, ghost shell), their
//! build from the finest operator ([`Multigrid::set_operator`]), the coarsening of the cell flags and of the
//! Dirichlet links (McAdams, Sifakis & Teran 2010, §4; Gibou et al. 2002 for the boundary distance), and the
//! ghost cells that a coarse correction is extended into.

use super::{check_params, Multigrid, MultigridParams};
use crate::grid::Real;
use crate::linsolve::poisson::{CellKind, PoissonOperator};
use crate::linsolve::SolveError;
use rayon::prelude::*;
use std::sync::Arc;

/// One level of the hierarchy: its operator and vectors, in precision `T`.
#[derive(Clone, Debug)]
pub(super) struct MultigridLevel<const D: usize, T> {
    /// The level's operator; the finest is shared with the solver that owns the hierarchy.
    pub(super) op: Arc<PoissonOperator<D>>,
    /// The cells around the unknowns that a correction is extended into ([`extend`]); none on the finest level.
    pub(super) ghost: Ghosts,
    pub(super) b: Vec<T>,
    pub(super) x: Vec<T>,
    /// Residual and smoothing ping-pong buffer.
    pub(super) t: Vec<T>,
    /// Restriction's intermediate: coarse along x, fine across (empty on the finest level).
    pub(super) half: Vec<T>,
    /// `1 / A_ii` in units of `h²` for the unknowns, 0 elsewhere (the smoother multiplies by it).
    pub(super) inv: Vec<T>,
}

impl<const D: usize, T: Real> Multigrid<D, T> {
    /// The hierarchy of `op` in precision `T`.
    pub(super) fn build(
        op: Arc<PoissonOperator<D>>,
        params: MultigridParams,
    ) -> Result<Self, SolveError> {
        check_params(&params)?;
        let mut mg = Multigrid {
            levels: Vec::new(),
            params,
        };
        mg.set_shared_operator(op);
        Ok(mg)
    }

    /// Rebuilds the hierarchy for a new finest operator (new cell flags), keeping the vectors of every level
    /// whose size is unchanged: a simulation calls this each step instead of allocating a new solver.
    pub fn set_operator(&mut self, op: PoissonOperator<D>) {
        self.set_shared_operator(Arc::new(op));
    }

    /// As [`set_operator`](Self::set_operator), for an operator that its caller keeps too (no copy).
    pub(crate) fn set_shared_operator(&mut self, op: Arc<PoissonOperator<D>>) {
        let params = self.params;
        let mut old = std::mem::take(&mut self.levels).into_iter();
        // `half` is 0 on the finest level, which is never extended into (only coarse corrections are).
        let mut level = |op: Arc<PoissonOperator<D>>, half: usize| {
            let n = op.layout().len();
            let ghost = if half == 0 {
                Ghosts::default()
            } else {
                ghost_coefficients(&op)
            };
            let inv = inverse_diagonal(&op);
            match old.next() {
                Some(l) if l.x.len() == n && l.half.len() == half => MultigridLevel {
                    op,
                    ghost,
                    inv,
                    ..l
                },
                _ => MultigridLevel {
                    ghost,
                    inv,
                    op,
                    b: vec![T::ZERO; n],
                    x: vec![T::ZERO; n],
                    t: vec![T::ZERO; n],
                    half: vec![T::ZERO; half],
                },
            }
        };
        let coarse_levels = params.level_dims(op.layout().dims).len() - 1;
        let mut levels = vec![level(op, 0)];
        for _ in 0..coarse_levels {
            let fine = &levels.last().expect("the finest level").op;
            let fine_rows = fine.layout().rows();
            let Some(op) = coarsen(fine) else { break };
            let half = fine_rows * op.layout().row_len();
            levels.push(level(Arc::new(op), half));
        }
        // Only the coarsest level projects out its null space (the finest has its own labels).
        if levels.len() > 1 {
            let coarsest = &mut levels.last_mut().expect("a coarse level").op;
            Arc::get_mut(coarsest)
                .expect("coarse operators are the hierarchy's own")
                .label_null_space();
        }
        self.levels = levels;
    }
}

/// `1 / A_ii` in units of `h²` for the unknowns of `op`, 0 elsewhere, in precision `T` (the smoother
/// multiplies by it).
pub(super) fn inverse_diagonal<T: Real, const D: usize>(op: &PoissonOperator<D>) -> Vec<T> {
    op.diagonal_units()
        .par_iter()
        .map(|&d| {
            if d > 0.0 {
                T::from_f64(1.0 / d as f64)
            } else {
                T::ZERO
            }
        })
        .collect()
}

/// The coarse operator of `fine` (see the module documentation), or `None` when it would have no unknowns.
pub(super) fn coarsen<const D: usize>(fine: &PoissonOperator<D>) -> Option<PoissonOperator<D>> {
    let fl = fine.layout();
    let dims = fl.dims.map(|n| n.div_ceil(2));
    let kinds = fine.kinds();
    // Dirichlet if a child is, else unknown if a child is, else solid.
    let rank = |k: CellKind| match k {
        CellKind::Solid => 0u8,
        CellKind::Unknown => 1,
        CellKind::Dirichlet => 2,
    };
    let fill = |c: [usize; D], row: &mut [CellKind]| {
        row.fill(CellKind::Solid);
        for combo in 0..1usize << (D - 1) {
            let mut f = [0; D];
            let mut inside = true;
            for a in 1..D {
                f[a] = 2 * c[a] + ((combo >> (a - 1)) & 1);
                inside &= f[a] < fl.dims[a];
            }
            if !inside {
                continue;
            }
            let start = fl.index(f);
            let children = &kinds[start..start + fl.dims[0]];
            for (x, k) in row.iter_mut().enumerate() {
                for &child in children.iter().skip(2 * x).take(2) {
                    if rank(child) > rank(*k) {
                        *k = child;
                    }
                }
            }
        }
    };
    let mut coarse =
        PoissonOperator::from_rows(dims, 2.0 * fine.spacing(), fine.outside(), fill).ok()?;
    // The weights only scale links to Dirichlet cells: with none (a closed container) they are all 1, as they
    // start.
    if coarse.kinds().contains(&CellKind::Dirichlet) {
        coarse.set_link_weights(dirichlet_link_weights(fine, &coarse));
    }
    Some(coarse)
}

/// Weights of the coarse links to Dirichlet cells that put the boundary where the fine level has it.
///
/// A Dirichlet value of a cell-centred grid sits at that cell's centre, which moves as cells merge: on the
/// finest level the boundary is one fine spacing `h` from the last unknown, but a coarse Dirichlet cell's centre
/// is `2h` from its neighbour's. A coarse operator that ignored this would solve for a boundary in the wrong
/// place, and the V-cycle would stall near 0.6 per cycle. Instead, the link is weighted `1/θ` with `θ` the true
/// distance in coarse spacings, as in the ghost-fluid treatment of a boundary between cell centres (Gibou et
/// al. 2002): along each column of children facing the Dirichlet neighbour, the distance from the coarse centre
/// to the first fine Dirichlet cell, averaged over the columns as `1/θ`.
fn dirichlet_link_weights<const D: usize>(
    fine: &PoissonOperator<D>,
    coarse: &PoissonOperator<D>,
) -> Vec<f32> {
    let (fl, cl) = (fine.layout(), coarse.layout());
    let (fk, ck) = (fine.kinds(), coarse.kinds());
    let mut weights = vec![1.0f32; cl.len() * 2 * D];
    weights
        .par_chunks_mut(2 * D)
        .enumerate()
        .for_each(|(i, w)| {
            if ck[i] != CellKind::Unknown {
                return;
            }
            let c = cl.padded_coords(i).map(|v| v - 1);
            for axis in 0..D {
                for upper in [false, true] {
                    let j = if upper {
                        i + cl.strides[axis]
                    } else {
                        i - cl.strides[axis]
                    };
                    if ck[j] != CellKind::Dirichlet {
                        continue;
                    }
                    let (mut inverse_theta, mut columns) = (0.0, 0);
                    for t in 0..1usize << D {
                        if (t >> axis) & 1 != 0 {
                            continue;
                        }
                        let mut a = [0; D];
                        let mut inside = true;
                        for k in 0..D {
                            a[k] = 2 * c[k]
                                + if k == axis {
                                    upper as usize
                                } else {
                                    (t >> k) & 1
                                };
                            inside &= a[k] < fl.dims[k];
                        }
                        if !inside {
                            continue;
                        }
                        let ia = fl.index(a);
                        if fk[ia] != CellKind::Unknown {
                            continue;
                        }
                        let step = |k: usize| {
                            if upper {
                                k + fl.strides[axis]
                            } else {
                                k - fl.strides[axis]
                            }
                        };
                        let n1 = step(ia);
                        // Distance (fine spacings) from the child's centre to the boundary along this column.
                        let delta = match fk[n1] {
                            CellKind::Dirichlet => 1.0 / fine.link_weight(ia, axis, upper),
                            CellKind::Unknown if fk[step(n1)] == CellKind::Dirichlet => {
                                1.0 + 1.0 / fine.link_weight(n1, axis, upper)
                            }
                            _ => continue,
                        };
                        inverse_theta += 2.0 / (delta + 0.5);
                        columns += 1;
                    }
                    if columns > 0 {
                        w[2 * axis + upper as usize] = (inverse_theta / columns as f64) as f32;
                    }
                }
            }
        });
    weights
}

/// Coefficients of the extension `E` of a correction beyond the unknowns, so that interpolation near a wall or
/// a free surface follows the boundary condition instead of being pulled towards zero:
/// * a solid cell takes the mean of its unknown neighbours (zero normal gradient);
/// * a Dirichlet cell takes, from each unknown neighbour `j`, `(1 − wⱼ) xⱼ` averaged: the straight line
///   through `xⱼ` that vanishes where the boundary really is, `1/wⱼ` coarse spacings from `j` (see
///   [`dirichlet_link_weights`]); on the finest level `w = 1` and the value is zero.
fn ghost_coefficients<const D: usize>(op: &PoissonOperator<D>) -> Ghosts {
    let l = op.layout();
    let kind = op.kinds();
    let len = l.len();
    // Each task scans a block of rows into its own list; the lists are joined in order. A neighbour index
    // that wraps around a row or a plane lands in the halo, which holds no unknown, so a range test stands
    // in for the cell's coordinates.
    let block = l.rows_per_task() * l.row_len();
    let found: Vec<Vec<(usize, bool, [f64; 6])>> = (0..len.div_ceil(block))
        .into_par_iter()
        .map(|t| {
            let mut out = Vec::new();
            for i in t * block..((t + 1) * block).min(len) {
                if kind[i] == CellKind::Unknown {
                    continue;
                }
                let mut g = [0.0; 6];
                let mut m = 0;
                for a in 0..D {
                    let s = l.strides[a];
                    for upper in [false, true] {
                        let j = if upper { i + s } else { i.wrapping_sub(s) };
                        if j < len && kind[j] == CellKind::Unknown {
                            m += 1;
                            g[2 * a + upper as usize] = match kind[i] {
                                CellKind::Solid => 1.0,
                                // The link seen from j points the other way.
                                _ => 1.0 - op.link_weight(j, a, !upper),
                            };
                        }
                    }
                }
                if m > 0 {
                    for c in g.iter_mut() {
                        *c /= m as f64;
                    }
                    out.push((i, kind[i] == CellKind::Dirichlet, g));
                }
            }
            out
        })
        .collect();
    let found = found.iter().flatten();
    Ghosts {
        index: found.clone().map(|f| f.0).collect(),
        dirichlet: found.clone().map(|f| f.1).collect(),
        coef: found.flat_map(|f| f.2.into_iter().take(2 * D)).collect(),
    }
}

/// The cells next to the unknowns of a level that are not unknowns themselves, with the coefficients of
/// [`ghost_coefficients`]: a thin shell, so [`extend`] and [`fold`] visit it cell by cell.
#[derive(Clone, Debug, Default)]
pub(super) struct Ghosts {
    /// Padded index of each ghost cell, increasing.
    pub(super) index: Vec<usize>,
    /// Whether it is a Dirichlet cell (else solid).
    pub(super) dirichlet: Vec<bool>,
    /// `2D` coefficients per ghost cell, one per neighbour (axis-major, lower side first).
    pub(super) coef: Vec<f64>,
}
