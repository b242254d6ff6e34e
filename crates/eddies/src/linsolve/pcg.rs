//! Preconditioned conjugate gradients (Hestenes & Stiefel 1952; Bridson 2015, §5.4, Figure 5.5).

use super::vector::{self, cg_update, xpby};
use super::{
    check_length, check_vector, Info, LinearOperator, Preconditioner, SolveError, StopReason,
};

/// Parameters of [`pcg`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PcgParams {
    /// Stop when `‖b − A x‖ / ‖b‖` falls to this (dimensionless).
    pub tolerance: f64,
    /// Give up after this many iterations.
    pub max_iterations: usize,
}

impl Default for PcgParams {
    fn default() -> Self {
        PcgParams {
            tolerance: 1e-6,
            max_iterations: 1000,
        }
    }
}

/// Solves `A x = b` by preconditioned conjugate gradients, from the initial guess in `x`.
///
/// `b` is first stripped of its null-space part ([`LinearOperator::remove_null_space`]), as is every
/// preconditioned residual, so that a singular but consistent system (a closed container) converges to the
/// solution of zero mean. `scratch` holds the four work vectors (`r`, `z`, `p`, `q`); it is resized as needed
/// and can be reused across solves.
///
/// # Errors
/// [`SolveError::BadInput`] when `b` or `x` has the wrong length or a non-finite entry or the parameters are
/// unusable; [`SolveError::Breakdown`] when `pᵀAp ≤ 0` or `rᵀz ≤ 0` (an operator or preconditioner that is
/// not positive definite) or a NaN appears; [`SolveError::NoConvergence`] after `max_iterations`.
pub fn pcg<A: LinearOperator, M: Preconditioner>(
    a: &A,
    m: &mut M,
    b: &[f64],
    x: &mut [f64],
    params: &PcgParams,
    scratch: &mut Vec<Vec<f64>>,
) -> Result<Info, SolveError> {
    let n = a.len();
    // Lengths now; finiteness only where a norm below is not finite (a non-finite entry makes it so), which
    // saves two passes over the vectors.
    check_length("the right-hand side", b, n)?;
    check_length("the initial guess", x, n)?;
    if !(params.tolerance.is_finite() && params.tolerance > 0.0) {
        return Err(SolveError::BadInput(format!(
            "the tolerance must be positive, got {}",
            params.tolerance
        )));
    }
    scratch.resize_with(4, Vec::new);
    for v in scratch.iter_mut() {
        v.resize(n, 0.0);
    }
    let [r, z, p, q] = &mut scratch[..] else {
        unreachable!("four work vectors")
    };

    // r = b − A x, with b projected onto the operator's range.
    vector::copy(b, r);
    a.remove_null_space(r);
    let b_norm = vector::norm(r);
    if !b_norm.is_finite() {
        check_vector("the right-hand side", b, n)?;
    }
    if b_norm == 0.0 {
        check_vector("the initial guess", x, n)?;
        vector::zero(x);
        return Ok(Info {
            iterations: 0,
            residual: 0.0,
            history: vec![0.0],
            stop: StopReason::ZeroRhs,
        });
    }
    a.subtract_apply(x, r, q);
    a.remove_null_space(r);
    let mut residual = vector::norm(r) / b_norm;
    if !residual.is_finite() {
        check_vector("the initial guess", x, n)?;
    }
    let mut history = vec![residual];
    if residual <= params.tolerance {
        return Ok(Info {
            iterations: 0,
            residual,
            history,
            stop: StopReason::Converged,
        });
    }
    // Plain CG (M = I) works on r directly: no copy into z, and rᵀz is the rᵀr the update returns.
    let identity = m.is_identity();
    let mut rz = if identity {
        vector::copy(r, p);
        residual * residual * b_norm * b_norm
    } else {
        m.apply(r, z);
        a.remove_null_space(z);
        // p = z: the vectors trade places (z is overwritten before it is read again).
        std::mem::swap(z, p);
        vector::dot(r, p)
    };
    for it in 1..=params.max_iterations {
        if !(rz > 0.0 && rz.is_finite()) {
            return Err(breakdown(it, "rᵀ M⁻¹ r", rz));
        }
        let pq = a.apply_dot(p, q);
        if !(pq > 0.0 && pq.is_finite()) {
            return Err(breakdown(it, "pᵀ A p", pq));
        }
        let alpha = rz / pq;
        let rr = cg_update(alpha, p, q, x, r);
        residual = rr.sqrt() / b_norm;
        history.push(residual);
        if !residual.is_finite() {
            return Err(breakdown(it, "‖r‖", residual));
        }
        if residual <= params.tolerance {
            a.remove_null_space(x);
            return Ok(Info {
                iterations: it,
                residual,
                history,
                stop: StopReason::Converged,
            });
        }
        let rz_new = if identity {
            rr
        } else {
            m.apply(r, z);
            a.remove_null_space(z);
            vector::dot(r, z)
        };
        xpby(if identity { &*r } else { &*z }, rz_new / rz, p);
        rz = rz_new;
    }
    Err(SolveError::NoConvergence {
        iterations: params.max_iterations,
        residual,
        tolerance: params.tolerance,
    })
}

fn breakdown(iteration: usize, what: &str, value: f64) -> SolveError {
    SolveError::Breakdown {
        iteration,
        detail: format!(
            "{what} = {value:e}: the operator or the preconditioner is not positive definite"
        ),
    }
}
