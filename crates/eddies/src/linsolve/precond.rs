//! Preconditioners for [`pcg`](super::pcg) on the [`PoissonOperator`]: Jacobi, incomplete Cholesky (IC(0) and
//! MIC(0)) and Incomplete Poisson. The multigrid V-cycle is in [`multigrid`](super::Multigrid).

use multiversion::multiversion;
use rayon::prelude::*;

use super::poisson::{CellKind, PoissonOperator};
use super::vector::CHUNK;
use super::Preconditioner;

/// Jacobi (diagonal) preconditioning: `z = D⁻¹ r`.
#[derive(Clone, Debug)]
pub struct Jacobi {
    inverse_diagonal: Vec<f64>,
}

impl Jacobi {
    /// The inverse diagonal of `op` (zero outside the unknowns).
    pub fn new<const D: usize>(op: &PoissonOperator<D>) -> Self {
        let s = op.scale();
        let inverse_diagonal = op
            .diagonal_units()
            .par_iter()
            .map(|&c| if c > 0.0 { 1.0 / (s * c as f64) } else { 0.0 })
            .collect();
        Jacobi { inverse_diagonal }
    }
}

impl Preconditioner for Jacobi {
    fn apply(&mut self, r: &[f64], z: &mut [f64]) {
        z.par_chunks_mut(CHUNK)
            .zip(r.par_chunks(CHUNK))
            .zip(self.inverse_diagonal.par_chunks(CHUNK))
            .for_each(|((z, r), d)| {
                for ((z, r), d) in z.iter_mut().zip(r).zip(d) {
                    *z = r * d;
                }
            });
    }
}

/// Incomplete Cholesky with zero fill-in, plain (IC(0)) or modified (MIC(0)), after Bridson (2015), §5.2,
/// Figures 5.3 and 5.4, generalised to any dimension.
///
/// The factor `L = (F + E) E⁻¹` keeps the sparsity of the operator (`F` its strictly lower part) and its
/// diagonal `E` is computed once per operator. With the tuning constant τ, the row sums of `A − L Lᵀ` are kept
/// at `(1 − τ)` of what IC(0) gives (τ = 0: IC(0); Bridson recommends τ = 0.97 for MIC(0)); a diagonal that
/// falls below `σ Aᵢᵢ` (the safety constant, 0.25) is reset to `Aᵢᵢ`.
///
/// **Scaling.** Each application is a forward and a backward triangular solve whose every entry depends on
/// the previous ones, so it runs on one thread, in storage order (deterministic by construction). On two
/// threads it is the slowest preconditioner per iteration; it remains the one that needs the fewest
/// iterations after multigrid. Parallel variants (wavefront or red-black orderings) change the
/// preconditioner itself and are not offered.
#[derive(Clone, Debug)]
pub struct IncompleteCholesky {
    /// `1/√Eᵢ` of the unit-scaled operator (`h²A`); 0 outside the unknowns.
    inv_sqrt_diag: Vec<f64>,
    strides: Vec<usize>,
    /// `h²` (m²): the factor is built for `h²A`.
    h2: f64,
}

/// Bridson's safety constant σ of MIC(0).
pub const MIC_SAFETY: f64 = 0.25;
/// Bridson's tuning constant τ of MIC(0).
pub const MIC_TUNING: f64 = 0.97;

impl IncompleteCholesky {
    /// The factor of `op` with tuning constant `tau` (0: IC(0), 0.97: the usual MIC(0)) and safety constant
    /// `sigma`.
    pub fn new<const D: usize>(op: &PoissonOperator<D>, tau: f64, sigma: f64) -> Self {
        let kind = op.kinds();
        let diag = op.diagonal_units();
        let strides = op.layout().strides;
        let unknown = |i: usize| kind[i] == CellKind::Unknown;
        let mut e_inv = vec![0.0; kind.len()];
        for i in 0..kind.len() {
            if !unknown(i) {
                continue;
            }
            let a_ii = diag[i] as f64;
            let mut e = a_ii;
            for (d, &s) in strides.iter().enumerate() {
                let m = i - s;
                if !unknown(m) {
                    continue;
                }
                // (A_im · pc_m)² with A_im = −1, and MIC's compensation for the fill-in that m's other upper
                // neighbours would create.
                let others = strides
                    .iter()
                    .enumerate()
                    .filter(|&(d2, &s2)| d2 != d && unknown(m + s2))
                    .count() as f64;
                let pc2 = e_inv[m] * e_inv[m];
                e -= pc2 * (1.0 + tau * others);
            }
            if e < sigma * a_ii {
                e = a_ii;
            }
            e_inv[i] = 1.0 / e.sqrt();
        }
        IncompleteCholesky {
            inv_sqrt_diag: e_inv,
            strides: strides.to_vec(),
            h2: 1.0 / op.scale(),
        }
    }

    /// IC(0): no compensation.
    pub fn ic0<const D: usize>(op: &PoissonOperator<D>) -> Self {
        Self::new(op, 0.0, MIC_SAFETY)
    }

    /// MIC(0) with Bridson's constants τ = 0.97, σ = 0.25.
    pub fn mic0<const D: usize>(op: &PoissonOperator<D>) -> Self {
        Self::new(op, MIC_TUNING, MIC_SAFETY)
    }
}

impl Preconditioner for IncompleteCholesky {
    fn apply(&mut self, r: &[f64], z: &mut [f64]) {
        let pc = &self.inv_sqrt_diag;
        let n = pc.len();
        let h2 = self.h2;
        // Solve L q = h² r (q kept in z); L's off-diagonals are −pcₘ.
        for i in 0..n {
            z[i] = if pc[i] != 0.0 {
                let mut t = h2 * r[i];
                for &s in &self.strides {
                    if i >= s {
                        t += pc[i - s] * z[i - s];
                    }
                }
                t * pc[i]
            } else {
                0.0
            };
        }
        // Solve Lᵀ z = q.
        for i in (0..n).rev() {
            if pc[i] != 0.0 {
                let mut t = z[i];
                for &s in &self.strides {
                    if i + s < n {
                        t += pc[i] * z[i + s];
                    }
                }
                z[i] = t * pc[i];
            }
        }
    }
}

/// The Incomplete Poisson preconditioner (Ament, Knittel, Weiskopf & Straßer 2010), the GPU-friendly choice of
/// Eng: `M⁻¹ = K Kᵀ` with `K = I − L D⁻¹` (`L` the strictly lower part of `A`, `D` its diagonal).
///
/// Eng writes `M = (I − L D⁻¹)(I − D⁻¹ L)`; with its second factor read as the transpose of the first
/// (`(I − L D⁻¹)ᵀ = I − D⁻¹ Lᵀ`) the preconditioner is symmetric positive definite, as conjugate gradients
/// require, and that is the form used here. Both factors are sparse matrix-vector products, so each
/// application is two parallel stencil passes and no triangular solve.
#[derive(Clone, Debug)]
pub struct IncompletePoisson<const D: usize> {
    /// `1/nᵢ` (0 outside the unknowns): `Aᵢⱼ/Aⱼⱼ = −1/nⱼ`.
    inv_count: Vec<f64>,
    layout: super::Layout<D>,
    scratch: Vec<f64>,
}

impl<const D: usize> IncompletePoisson<D> {
    /// The preconditioner of `op`.
    pub fn new(op: &PoissonOperator<D>) -> Self {
        let inv_count = op
            .diagonal_units()
            .par_iter()
            .map(|&c| if c > 0.0 { 1.0 / c as f64 } else { 0.0 })
            .collect();
        IncompletePoisson {
            inv_count,
            layout: op.layout().clone(),
            scratch: vec![0.0; op.layout().len()],
        }
    }
}

impl<const D: usize> Preconditioner for IncompletePoisson<D> {
    fn apply(&mut self, r: &[f64], z: &mut [f64]) {
        incomplete_poisson(self, r, z);
    }
}

/// [`IncompletePoisson`]'s `z = K Kᵀ r`: two stencil passes over the rows.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn incomplete_poisson<const D: usize>(p: &mut IncompletePoisson<D>, r: &[f64], z: &mut [f64]) {
    let l = &p.layout;
    let n = l.dims[0];
    let rl = l.row_len();
    let inv = &p.inv_count;
    let strides = l.strides;
    // t = Kᵀ r: tᵢ = rᵢ + (1/nᵢ) Σ_{upper j} rⱼ.
    l.for_rows(&mut p.scratch, |row, out| {
        out.fill(0.0);
        if !row.interior {
            return;
        }
        let start = row.index * rl + 1;
        let o = &mut out[1..=n];
        for (d, &s) in strides.iter().enumerate() {
            let up = &r[start + s..start + s + n];
            if d == 0 {
                o.copy_from_slice(up);
            } else {
                for (o, u) in o.iter_mut().zip(up) {
                    *o += u;
                }
            }
        }
        for ((o, &r), &w) in o
            .iter_mut()
            .zip(&r[start..start + n])
            .zip(&inv[start..start + n])
        {
            *o = if w != 0.0 { r + w * *o } else { 0.0 };
        }
    });
    // z = K t: zᵢ = tᵢ + Σ_{lower j} tⱼ / nⱼ.
    let t = &p.scratch;
    l.for_rows(z, |row, out| {
        out.fill(0.0);
        if !row.interior {
            return;
        }
        let start = row.index * rl + 1;
        let o = &mut out[1..=n];
        for &s in &strides {
            let (lo, w) = (&t[start - s..start - s + n], &inv[start - s..start - s + n]);
            for ((o, t), w) in o.iter_mut().zip(lo).zip(w) {
                *o += t * w;
            }
        }
        for ((o, &t), &w) in o
            .iter_mut()
            .zip(&t[start..start + n])
            .zip(&inv[start..start + n])
        {
            *o = if w != 0.0 { t + *o } else { 0.0 };
        }
    });
}
