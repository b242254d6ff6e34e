//! Validation cases of the linear solvers for `eddies validate`, and the manufactured problems that they and
//! the tests in `tests/linsolve.rs` share.

use std::f64::consts::PI;

use super::{Case, Measurement};
use crate::grid::{coords_of, CellFlag, Grid};
use crate::linsolve::{
    CellKind, DomainBoundary, Multigrid, MultigridParams, PcgParams, PoissonOperator,
    PoissonSolver, PreconditionerKind, Restriction,
};
use crate::rng::SplitMix64;

/// The validation cases of `linsolve`.
pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "linsolve/second-order-dirichlet-2d",
            description: "manufactured solution, Dirichlet ring, MGPCG: error ratio per halving of h (32² to 128²)",
            run: |q| {
                // Quick (16² to 64²): the same bound. Second order gives 4 once asymptotic; the 16² → 32² ratio
                // is the least asymptotic: measured 3.72 quick (3.87 full); margin 6%.
                let sizes: &[usize] = if q { &[16, 32, 64] } else { &[32, 64, 128] };
                let errors: Vec<f64> =
                    sizes.iter().map(|&n| max_error(&dirichlet(n, u2, f2), SolveMethod::Pcg(PreconditionerKind::Multigrid))).collect();
                Measurement::at_least("linsolve/second-order-dirichlet-2d", worst_ratio(&errors), 3.5, "1")
            },
            known_gap: None,
        },
        Case {
            name: "linsolve/second-order-neumann-3d",
            description: "manufactured solution in a closed box (singular), MGPCG: error ratio per halving (16³ to 64³)",
            run: |q| {
                // Quick (16³, 32³): the same bound; the first ratio is the full run's first: measured 3.96.
                let sizes: &[usize] = if q { &[16, 32] } else { &[16, 32, 64] };
                let errors: Vec<f64> =
                    sizes.iter().map(|&n| max_error(&neumann::<3>(n), SolveMethod::Pcg(PreconditionerKind::Multigrid))).collect();
                Measurement::at_least("linsolve/second-order-neumann-3d", worst_ratio(&errors), 3.5, "1")
            },
            known_gap: None,
        },
        Case {
            name: "linsolve/v-cycle-factor",
            description: "standalone multigrid V(3,3), 128³ model problem (quick: 64³): worst residual reduction per cycle",
            // Quick (64³): the same bound; a V-cycle's reduction factor does not depend on h (multigrid's
            // grid-independent convergence): measured 0.113 at 64³, 0.114 at 128³.
            run: |q| Measurement::at_most("linsolve/v-cycle-factor", worst_v_cycle_factor(if q { 64 } else { 128 }), 0.15, "1"),
            known_gap: None,
        },
        Case {
            name: "linsolve/mgpcg-iterations",
            description: "MGPCG iterations to 1e-6 on a 128³ dam-break mask (quick: 64³)",
            run: |q| {
                // Quick (64³): the same bound; MGPCG's iteration count is nearly independent of h: measured 6
                // at 64³ and at 128³; margin 2.5×.
                let n = if q { 64 } else { 128 };
                Measurement::at_most("linsolve/mgpcg-iterations", mgpcg_iterations(n) as f64, 15.0, "iterations")
            },
            known_gap: None,
        },
    ]
}

/// The smallest ratio of successive errors (second order: 4).
pub fn worst_ratio(errors: &[f64]) -> f64 {
    errors
        .windows(2)
        .map(|w| w[0] / w[1])
        .fold(f64::INFINITY, f64::min)
}

/// A reproducible right-hand side on the unknowns of `op`.
pub fn random_rhs<const D: usize>(op: &PoissonOperator<D>, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    let mut b: Vec<f64> = (0..op.layout().len())
        .map(|_| rng.next_f64() - 0.5)
        .collect();
    op.mask(&mut b);
    b
}

/// The worst per-cycle residual reduction of the standalone V(3,3) cycle (red-black Gauss–Seidel, nearest
/// restriction) on `−∇²u = random` in an `n³` box with zero Dirichlet values around it, solved to 1e-10.
pub fn worst_v_cycle_factor(n: usize) -> f64 {
    let flags = Grid::new([n; 3], [0.0; 3], 1.0 / n as f64, CellFlag::Fluid);
    let op = PoissonOperator::from_flags(&flags, DomainBoundary::Open).expect("a valid problem");
    let b = random_rhs(&op, 11);
    let params = MultigridParams {
        tolerance: 1e-10,
        pre_sweeps: 3,
        post_sweeps: 3,
        restriction: Restriction::Nearest,
        ..Default::default()
    };
    let mut mg = Multigrid::new(op.clone(), params).expect("valid parameters");
    let mut x = vec![0.0; b.len()];
    let info = mg.solve(&b, &mut x).expect("converges");
    info.history
        .windows(2)
        .map(|w| w[1] / w[0])
        .fold(0.0, f64::max)
}

/// MGPCG iterations to 1e-6 on the `n³` dam-break mask: liquid in `x, y < n/2` (y up), air elsewhere, solid
/// walls.
pub fn mgpcg_iterations(n: usize) -> usize {
    let flags = Grid::from_fn([n; 3], [0.0; 3], 1.0 / n as f64, |_, c| {
        if c[0] < n / 2 && c[1] < n / 2 {
            CellFlag::Fluid
        } else {
            CellFlag::Air
        }
    });
    let op = PoissonOperator::from_flags(&flags, DomainBoundary::Solid).expect("a valid problem");
    let b = random_rhs(&op, 5);
    let mut solver = PoissonSolver::new(op, PreconditionerKind::Multigrid, PcgParams::default())
        .expect("solver");
    let mut x = vec![0.0; b.len()];
    solver.solve(&b, &mut x).expect("converges").iterations
}

/// A manufactured problem on padded vectors: the operator, the right-hand side on the unknowns, the boundary
/// values on the Dirichlet cells, and the exact solution.
pub struct Problem<const D: usize> {
    /// The operator.
    pub op: PoissonOperator<D>,
    /// Right-hand side on the unknowns (padded layout).
    pub b: Vec<f64>,
    /// Boundary values on the Dirichlet cells, zero elsewhere.
    pub boundary: Vec<f64>,
    /// The exact solution at every cell centre.
    pub exact: Vec<f64>,
}

fn centre<const D: usize>(c: [usize; D], h: f64) -> [f64; D] {
    c.map(|i| (i as f64 + 0.5) * h)
}

/// Fills `v` at every interior cell of `op`'s layout with `f(centre)`.
fn sample<const D: usize>(op: &PoissonOperator<D>, f: impl Fn([f64; D]) -> f64) -> Vec<f64> {
    let l = op.layout();
    let h = op.spacing();
    let cells: usize = l.dims.iter().product();
    let values: Vec<f64> = (0..cells)
        .map(|i| f(centre(coords_of(l.dims, i), h)))
        .collect();
    let mut v = vec![0.0; l.len()];
    l.pad(&values, &mut v);
    v
}

fn keep(op_kinds: &[CellKind], v: &mut [f64], kind: CellKind) {
    for (v, &k) in v.iter_mut().zip(op_kinds) {
        if k != kind {
            *v = 0.0;
        }
    }
}

/// `−∇²u = f` on the unit box with Dirichlet values of `u` on the outermost ring of cells.
pub fn dirichlet<const D: usize>(
    n: usize,
    u: impl Fn([f64; D]) -> f64,
    f: impl Fn([f64; D]) -> f64,
) -> Problem<D> {
    let h = 1.0 / n as f64;
    let op = PoissonOperator::new([n; D], h, DomainBoundary::Solid, |c| {
        if c.iter().any(|&i| i == 0 || i == n - 1) {
            CellKind::Dirichlet
        } else {
            CellKind::Unknown
        }
    })
    .expect("a valid problem");
    let exact = sample(&op, &u);
    let mut b = sample(&op, f);
    keep(op.kinds(), &mut b, CellKind::Unknown);
    let mut boundary = exact.clone();
    keep(op.kinds(), &mut boundary, CellKind::Dirichlet);
    Problem {
        op,
        b,
        boundary,
        exact,
    }
}

/// `−∇²u = Dπ² u` with `u = Π cos(π xₖ)` in a closed unit box (zero normal derivative on every wall): a
/// singular problem whose solution has zero mean.
pub fn neumann<const D: usize>(n: usize) -> Problem<D> {
    let h = 1.0 / n as f64;
    let op = PoissonOperator::new([n; D], h, DomainBoundary::Solid, |_| CellKind::Unknown)
        .expect("valid");
    let u = |x: [f64; D]| x.iter().map(|&x| (PI * x).cos()).product::<f64>();
    let exact = sample(&op, u);
    let b = sample(&op, |x| D as f64 * PI * PI * u(x));
    let boundary = vec![0.0; b.len()];
    Problem {
        op,
        b,
        boundary,
        exact,
    }
}

/// How a manufactured problem is solved.
#[derive(Clone, Copy, Debug)]
pub enum SolveMethod {
    /// Conjugate gradients with this preconditioner.
    Pcg(PreconditionerKind),
    /// The standalone multigrid solver.
    Multigrid,
}

/// Tolerance of the manufactured solves: far below the discretisation error.
pub const TIGHT: f64 = 1e-11;

/// Solves `p` with `method` to a tolerance far below the discretisation error; returns the max error.
pub fn max_error<const D: usize>(p: &Problem<D>, method: SolveMethod) -> f64 {
    let x = match method {
        SolveMethod::Pcg(kind) => {
            // The boundary values move to the right-hand side: b' = b − A x_boundary.
            let mut b = vec![0.0; p.b.len()];
            p.op.residual(&p.b, &p.boundary, &mut b);
            let mut solver = PoissonSolver::new(
                p.op.clone(),
                kind,
                PcgParams {
                    tolerance: TIGHT,
                    max_iterations: 5000,
                },
            )
            .expect("solver");
            let mut x = vec![0.0; b.len()];
            solver.solve(&b, &mut x).expect("converges");
            x.iter()
                .zip(&p.boundary)
                .map(|(a, b)| a + b)
                .collect::<Vec<_>>()
        }
        SolveMethod::Multigrid => {
            let params = MultigridParams {
                tolerance: TIGHT,
                ..Default::default()
            };
            let mut mg = Multigrid::new(p.op.clone(), params).expect("hierarchy");
            let mut x = p.boundary.clone();
            mg.solve(&p.b, &mut x).expect("converges");
            x
        }
    };
    p.op.kinds()
        .iter()
        .zip(x.iter().zip(&p.exact))
        .filter(|(&k, _)| k == CellKind::Unknown)
        .map(|(_, (a, e))| (a - e).abs())
        .fold(0.0, f64::max)
}

/// Manufactured 2D solution: `sin(πx) e^{2y} + xy`.
pub fn u2(x: [f64; 2]) -> f64 {
    (PI * x[0]).sin() * (2.0 * x[1]).exp() + x[0] * x[1]
}
/// `−∇²` of [`u2`].
pub fn f2(x: [f64; 2]) -> f64 {
    (PI * PI - 4.0) * (PI * x[0]).sin() * (2.0 * x[1]).exp()
}
/// Manufactured 3D solution: `sin(πx) cos(πy) e^z`.
pub fn u3(x: [f64; 3]) -> f64 {
    (PI * x[0]).sin() * (PI * x[1]).cos() * x[2].exp()
}
/// `−∇²` of [`u3`].
pub fn f3(x: [f64; 3]) -> f64 {
    (2.0 * PI * PI - 1.0) * u3(x)
}
