//! Body forces, solid boundary conditions and the pressure projection on the MAC grid (Bridson, ch. 5).

use super::params::{Boundary, Obstacle};
use crate::grid::{strides_of, CellFlag, Grid, MacGrid};
use crate::linsolve::{
    DomainBoundary, Info, PcgParams, PoissonDevice, PoissonSolver, PreconditionerKind, SolveError,
};
use multiversion::multiversion;

/// Adds gravity, `u += Δt g`, to every face (Eng "Gravity-Update").
pub(crate) fn apply_forces<const D: usize>(u: &mut MacGrid<D>, gravity: [f64; D], dt: f64) {
    for (k, g) in gravity.iter().enumerate() {
        if *g != 0.0 {
            let dv = g * dt;
            u.u[k].par_for_each_mut(|_, _, v| *v += dv);
        }
    }
}

/// Whether face `f` of component `k` lies on the domain boundary.
#[inline]
fn on_domain_boundary<const D: usize>(dims: [usize; D], k: usize, f: [usize; D]) -> bool {
    f[k] == 0 || f[k] == dims[k]
}

/// Calls `f(face, below, above, value)` for every face of component `k` of `faces`, a face grid of a MAC grid
/// with `dims` cells: `face` are the face's coordinates, `below` and `above` the linear indices of the cells
/// on either side of it along `k` (`None` outside the domain). Rows of faces run in parallel; along a row the
/// cell indices are counted up rather than computed from coordinates (each face is independent, so the
/// result does not depend on the split).
pub(crate) fn for_faces_mut<T: Send, const D: usize>(
    faces: &mut Grid<T, D>,
    dims: [usize; D],
    k: usize,
    f: impl Fn([usize; D], Option<usize>, Option<usize>, &mut T) + Sync + Send,
) {
    let cs = strides_of(dims);
    faces.par_for_rows_mut(|mut c, row| {
        // The linear index the face's coordinates have as a cell, at x = 0.
        let base: usize = (1..D).map(|a| c[a] * cs[a]).sum();
        for (x, v) in row.iter_mut().enumerate() {
            c[0] = x;
            let below = (c[k] > 0).then(|| base + x - cs[k]);
            let above = (c[k] < dims[k]).then_some(base + x);
            f(c, below, above, v);
        }
    });
}

/// Sets the faces of component `k` on the domain's walls across `k` to 0: the first and last face of every
/// row when `k` is x, the whole rows on the two wall planes otherwise.
fn zero_walls<const D: usize>(faces: &mut Grid<f64, D>, dims: [usize; D], k: usize) {
    faces.par_for_rows_mut(|c, row| {
        if k == 0 {
            let last = row.len() - 1;
            row[0] = 0.0;
            row[last] = 0.0;
        } else if on_domain_boundary(dims, k, c) {
            row.fill(0.0);
        }
    });
}

/// Enforces `u·n = u_solid·n` on every face touching a solid (Bridson, §5.1): faces of closed domain walls
/// get 0, faces next to an obstacle cell get the normal component of the obstacle's velocity at the face at
/// time `t` (s), which is how a moving obstacle pushes the liquid.
pub(crate) fn enforce_boundary<const D: usize>(
    u: &mut MacGrid<D>,
    solid_id: &Grid<u16, D>,
    obstacles: &[Obstacle<D>],
    boundary: Boundary,
    t: f64,
) {
    let dims = u.dims;
    let (o, h) = (u.origin, u.spacing);
    for k in 0..D {
        if boundary == Boundary::Closed {
            zero_walls(&mut u.u[k], dims, k);
        }
        // Cells are marked solid by obstacles only: without any, the walls were all.
        if obstacles.is_empty() {
            continue;
        }
        for_faces_mut(&mut u.u[k], dims, k, |f, a, b, v| {
            if boundary == Boundary::Closed && on_domain_boundary(dims, k, f) {
                // A wall face, set above.
                return;
            }
            let id = [a, b]
                .into_iter()
                .flatten()
                .map(|c| solid_id.data[c])
                .find(|&id| id != 0);
            if let Some(id) = id {
                let x: [f64; D] = std::array::from_fn(|a| {
                    o[a] + (f[a] as f64 + if a == k { 0.0 } else { 0.5 }) * h
                });
                *v = obstacles[id as usize - 1].velocity_at(x, t)[k];
            }
        });
    }
}

/// The pressure projection (Eng "Pressure-solve"; Bridson, §5.3–5.4): solves
/// `−∇²p = −(ρ/Δt) ∇·u*` on the fluid cells (air: p = 0; solid: no flux, with the solid's velocity already on
/// its faces) and subtracts `(Δt/ρ) ∇p` from every face between two non-solid cells with fluid on a side,
/// which makes the discrete divergence of every fluid cell vanish to the solver's tolerance. `div_before`
/// receives ∇·u* (1/s); `pressure` (Pa) is the initial guess and receives the solution. `solver` is kept
/// across steps: only its operator is rebuilt (its work vectors and multigrid levels are reused). The
/// iterations run on `device` when one is given; with `rhs_in_faces` it holds the right-hand side already
/// ([`PoissonDevice::solve_rhs_in_faces`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn project<const D: usize>(
    u: &mut MacGrid<D>,
    flags: &Grid<CellFlag, D>,
    boundary: Boundary,
    kind: PreconditionerKind,
    pcg: PcgParams,
    density: f64,
    dt: f64,
    div_before: &mut Grid<f64, D>,
    rhs: &mut Grid<f64, D>,
    pressure: &mut Grid<f64, D>,
    solver: &mut Option<PoissonSolver<D>>,
    device: Option<&mut dyn PoissonDevice<D>>,
    rhs_in_faces: bool,
) -> Result<Option<Info>, SolveError> {
    u.divergence_into(div_before);
    if flags.data.iter().all(|&f| f != CellFlag::Fluid) {
        pressure.fill(0.0);
        return Ok(None);
    }
    let scale = -density / dt;
    rhs.par_for_each_mut(|i, _, b| {
        *b = if flags.data[i] == CellFlag::Fluid {
            scale * div_before.data[i]
        } else {
            0.0
        };
    });
    let solver = solver_for(flags, boundary, kind, pcg, solver)?;
    let info = match device {
        Some(d) if rhs_in_faces => solver.solve_grid_rhs_in_faces(d, rhs, pressure)?,
        d => solver.solve_grid_on(d, rhs, pressure)?,
    };
    apply_gradient(u, flags, boundary, dt / density, pressure, Write::Subtract);
    Ok(Some(info))
}

/// The solver of [`project`]'s operator on `flags`: `solver`, its operator set to `flags`, or a new one where
/// it is of another preconditioner or boundary.
fn solver_for<'a, const D: usize>(
    flags: &Grid<CellFlag, D>,
    boundary: Boundary,
    kind: PreconditionerKind,
    pcg: PcgParams,
    solver: &'a mut Option<PoissonSolver<D>>,
) -> Result<&'a mut PoissonSolver<D>, SolveError> {
    let outside = match boundary {
        Boundary::Closed => DomainBoundary::Solid,
        Boundary::Open => DomainBoundary::Open,
    };
    let reuse = solver
        .as_ref()
        .is_some_and(|s| s.preconditioner() == kind && s.operator().outside() == outside);
    if !reuse {
        return Ok(solver.insert(PoissonSolver::from_flags(flags, outside, kind, pcg)?));
    }
    let s = solver.as_mut().expect("reused");
    s.set_flags(flags, outside)?;
    s.params = pcg;
    Ok(s)
}

/// [`project`]'s solve alone, on `device`, whose face field holds the right-hand side
/// ([`TransferDevice::rhs_to_faces`](super::TransferDevice::rhs_to_faces)) and which keeps the velocity:
/// the pressure into `pressure` (its guess on entry). `Ok(None)` where the device declines. `flags` must
/// hold a fluid cell.
///
/// # Errors
/// As [`project`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn solve_on_device<const D: usize>(
    flags: &Grid<CellFlag, D>,
    boundary: Boundary,
    kind: PreconditionerKind,
    pcg: PcgParams,
    pressure: &mut Grid<f64, D>,
    solver: &mut Option<PoissonSolver<D>>,
    device: &mut dyn PoissonDevice<D>,
) -> Result<Option<Info>, SolveError> {
    solver_for(flags, boundary, kind, pcg, solver)?.solve_grid_rhs_on_device(device, pressure)
}

/// `u −= (Δt / ρ) ∇p` on the faces that [`project`] projects, as it does after its solve.
pub(crate) fn subtract_gradient<const D: usize>(
    u: &mut MacGrid<D>,
    flags: &Grid<CellFlag, D>,
    boundary: Boundary,
    dt_over_density: f64,
    pressure: &Grid<f64, D>,
) {
    apply_gradient(
        u,
        flags,
        boundary,
        dt_over_density,
        pressure,
        Write::Subtract,
    );
}

/// How [`apply_gradient`] writes a face.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Write {
    /// `u −= c ∇p` on the coupled faces; the others keep their value.
    Subtract,
    /// `u = −c ∇p` on the coupled faces, 0 on the others.
    Set,
}

/// Writes `c ∇p` into every face between two non-solid cells with fluid on a side (the faces the pressure
/// solve's operator couples) as `write` says, with `∇p` the difference of the two cells' values over h
/// (`p` is read on any cell; outside an open domain it is 0).
///
/// Row by row: a row of faces between two rows of cells is one loop over three slices, which vectorises; the
/// faces on the domain's walls, with a cell on one side only, are done one by one.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn apply_gradient<const D: usize>(
    u: &mut MacGrid<D>,
    flags: &Grid<CellFlag, D>,
    boundary: Boundary,
    c: f64,
    p: &Grid<f64, D>,
    write: Write,
) {
    let dims = u.dims;
    let coef = c / u.spacing;
    let (f, p) = (&flags.data[..], &p.data[..]);
    // One face with the cells `a` below and `b` above it (`None` outside the domain).
    let face = |v: &mut f64, a: Option<usize>, b: Option<usize>| {
        let solid = |x: Option<usize>| match x {
            Some(i) => f[i] == CellFlag::Solid,
            None => boundary == Boundary::Closed,
        };
        let fluid = |x: Option<usize>| x.is_some_and(|i| f[i] == CellFlag::Fluid);
        let base = if write == Write::Set { 0.0 } else { *v };
        *v = if !solid(a) && !solid(b) && (fluid(a) || fluid(b)) {
            let (pa, pb) = (a.map_or(0.0, |i| p[i]), b.map_or(0.0, |i| p[i]));
            base - coef * (pb - pa)
        } else {
            base
        };
    };
    // The faces `v` between the cells `a..a + n` and `b..b + n`.
    let pairs = |v: &mut [f64], a: usize, b: usize| {
        let n = v.len();
        let (fa, fb, pa, pb) = (&f[a..a + n], &f[b..b + n], &p[a..a + n], &p[b..b + n]);
        for i in 0..n {
            let coupled = fa[i] != CellFlag::Solid
                && fb[i] != CellFlag::Solid
                && (fa[i] == CellFlag::Fluid || fb[i] == CellFlag::Fluid);
            let base = if write == Write::Set { 0.0 } else { v[i] };
            let g = coef * (pb[i] - pa[i]);
            v[i] = if coupled { base - g } else { base };
        }
    };
    for k in 0..D {
        for_face_rows_mut(&mut u.u[k], dims, k, pairs, face);
    }
}

/// Visits the faces of component `k` of `faces` (a face grid of a MAC grid with `dims` cells) a row at a time,
/// in parallel: `pairs(row, a, b)` for a run of faces `row` between the cells `a..` below and `b..` above
/// (linear cell indices, one per face), and `face(value, below, above)` for each face on the domain's walls,
/// with a cell on one side only (`None` outside). Each face is visited once, so the result does not depend on
/// the split.
pub(crate) fn for_face_rows_mut<T: Send, const D: usize>(
    faces: &mut Grid<T, D>,
    dims: [usize; D],
    k: usize,
    pairs: impl Fn(&mut [T], usize, usize) + Sync + Send,
    face: impl Fn(&mut T, Option<usize>, Option<usize>) + Sync + Send,
) {
    let cs = strides_of(dims);
    let nx = dims[0];
    faces.par_for_rows_mut(|c, row| {
        // The linear index the row's coordinates have as a cell, at x = 0.
        let base: usize = (1..D).map(|a| c[a] * cs[a]).sum();
        if k == 0 {
            pairs(&mut row[1..nx], base, base + 1);
            face(&mut row[0], None, Some(base));
            face(&mut row[nx], Some(base + nx - 1), None);
            return;
        }
        let below = (c[k] > 0).then(|| base - cs[k]);
        let above = (c[k] < dims[k]).then_some(base);
        match (below, above) {
            (Some(a), Some(b)) => pairs(row, a, b),
            _ => {
                for (x, v) in row.iter_mut().enumerate() {
                    face(v, below.map(|a| a + x), above.map(|b| b + x));
                }
            }
        }
    });
}

/// The volume correction (Kugelstadt et al. 2019, *Implicit Density Projection for Volume Conserving
/// Liquids*, §4, with the smoothed particle density of [`super::mark::fill_fraction`]): given the relative
/// excess `e` of every fluid cell (its volume fraction above the rest density, dimensionless), solves
/// `−∇²q = e` on the fluid cells and sets `disp = −∇q` (m) on the faces between two of them, 0 elsewhere.
/// Its discrete divergence is `e` (less the mean of `e` over each connected body of liquid, which the solver
/// removes), so moving particles by `disp` carries each cell's excess into the cells that lack particles.
///
/// `flags` must mark the air as solid: the correction moves liquid within the liquid and never pushes
/// particles through the free surface. (With air as a p = 0 boundary, as in the pressure solve, the excess
/// would leave through the surface, and every particle pushed into an air cell turns it into a liquid cell,
/// which kicks the surface by up to √(g h): a tank at rest then moves at 5% of √(gH).) Only positions move:
/// velocities are left alone, so the correction adds no momentum or energy (Kugelstadt et al.'s reason for
/// correcting positions rather than velocities). `q` (m²) is the initial guess and receives the solution;
/// `solver` must hold the operator of `flags`; its iterations run on `device` when one is given.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn volume_displacement<const D: usize>(
    disp: &mut MacGrid<D>,
    flags: &Grid<CellFlag, D>,
    excess: &Grid<f64, D>,
    q: &mut Grid<f64, D>,
    solver: &mut PoissonSolver<D>,
    device: Option<&mut dyn PoissonDevice<D>>,
) -> Result<Info, SolveError> {
    let info = solver.solve_grid_on(device, excess, q)?;
    displacement_of(disp, flags, q);
    Ok(info)
}

/// The displacement `disp = −∇q` (m) of the volume correction's potential `q` ([`volume_displacement`]).
pub(crate) fn displacement_of<const D: usize>(
    disp: &mut MacGrid<D>,
    flags: &Grid<CellFlag, D>,
    q: &Grid<f64, D>,
) {
    apply_gradient(disp, flags, Boundary::Closed, 1.0, q, Write::Set);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faces_see_the_cells_on_either_side() {
        for dims in [[5usize, 4, 3], [1, 6, 2]] {
            let mac = MacGrid::<3>::new(dims, [0.0; 3], 1.0);
            let cells = Grid::new(dims, [0.0; 3], 1.0, 0u8);
            for k in 0..3 {
                let mut g = mac.u[k].clone();
                let seen = std::sync::Mutex::new(Vec::new());
                for_faces_mut(&mut g, dims, k, |f, below, above, _| {
                    seen.lock().unwrap().push((f, below, above));
                });
                let seen = seen.into_inner().unwrap();
                assert_eq!(seen.len(), g.data.len(), "every face once");
                for (f, below, above) in seen {
                    let mut b = f;
                    let want_below = (f[k] > 0).then(|| {
                        b[k] -= 1;
                        cells.index(b)
                    });
                    let want_above = (f[k] < dims[k]).then(|| cells.index(f));
                    assert_eq!(
                        (below, above),
                        (want_below, want_above),
                        "face {f:?} of component {k}"
                    );
                }
            }
        }
    }

    /// `apply_gradient` by its definition, face by face through [`for_faces_mut`].
    fn gradient_by_definition<const D: usize>(
        u: &mut MacGrid<D>,
        flags: &Grid<CellFlag, D>,
        boundary: Boundary,
        c: f64,
        p: &Grid<f64, D>,
        write: Write,
    ) {
        let dims = u.dims;
        let coef = c / u.spacing;
        for k in 0..D {
            for_faces_mut(&mut u.u[k], dims, k, |_, a, b, v| {
                let flag = |x: Option<usize>| x.map(|i| flags.data[i]);
                let solid = |x: Option<usize>| {
                    flag(x).map_or(boundary == Boundary::Closed, |f| f == CellFlag::Solid)
                };
                let fluid = |x: Option<usize>| flag(x) == Some(CellFlag::Fluid);
                if write == Write::Set {
                    *v = 0.0;
                }
                if !solid(a) && !solid(b) && (fluid(a) || fluid(b)) {
                    let value = |x: Option<usize>| x.map_or(0.0, |i| p.data[i]);
                    *v -= coef * (value(b) - value(a));
                }
            });
        }
    }

    fn check_gradient<const D: usize>(dims: [usize; D]) {
        let mut rng = crate::rng::SplitMix64::new(17);
        let mut flags = Grid::new(dims, [0.0; D], 0.5, CellFlag::Air);
        let mut p = Grid::new(dims, [0.0; D], 0.5, 0.0);
        for (f, v) in flags.data.iter_mut().zip(&mut p.data) {
            *f = [CellFlag::Fluid, CellFlag::Air, CellFlag::Solid][(rng.next_u64() % 3) as usize];
            *v = rng.range(-1.0, 1.0);
        }
        let mut u = MacGrid::<D>::new(dims, [0.0; D], 0.5);
        for g in &mut u.u {
            for v in &mut g.data {
                *v = rng.range(-1.0, 1.0);
            }
        }
        for boundary in [Boundary::Closed, Boundary::Open] {
            for write in [Write::Subtract, Write::Set] {
                let (mut got, mut want) = (u.clone(), u.clone());
                apply_gradient(&mut got, &flags, boundary, 0.3, &p, write);
                gradient_by_definition(&mut want, &flags, boundary, 0.3, &p, write);
                for k in 0..D {
                    // The same operations on the same values: the same bits.
                    assert!(
                        got.u[k]
                            .data
                            .iter()
                            .zip(&want.u[k].data)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "component {k}, {boundary:?}, dims {dims:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn gradient_rows_match_the_face_by_face_definition() {
        check_gradient([7, 5]);
        check_gradient([1, 4]);
        check_gradient([6, 5, 4]);
        check_gradient([2, 3, 9]);
    }
}
