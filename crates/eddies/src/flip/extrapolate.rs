//! Velocity extrapolation into the air (Eng "Velocity Extrapolation"; Bridson, §4.4): particles near the
//! surface interpolate faces outside the liquid, which hold no projected velocity, so the known velocities are
//! spread outwards layer by layer.

use super::project::for_face_rows_mut;
use crate::grid::{coords_of, CellFlag, Grid, MacGrid, GRID_CHUNK};
use multiversion::multiversion;
use rayon::prelude::*;

/// Marks the known faces of every component: those with a fluid cell on either side (projected, or held at a
/// solid's velocity). `valid[k]` is resized to the face count of component `k`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn mark_valid<const D: usize>(
    u: &MacGrid<D>,
    flags: &Grid<CellFlag, D>,
    valid: &mut [Vec<u8>; D],
) {
    let dims = u.dims;
    let fluid = |i: usize| flags.data[i] == CellFlag::Fluid;
    for k in 0..D {
        let mut data = std::mem::take(&mut valid[k]);
        data.resize(u.u[k].data.len(), 0);
        let mut g = Grid::from_data(u.u[k].dims, u.u[k].origin, u.spacing, data);
        for_face_rows_mut(
            &mut g,
            dims,
            k,
            |row, a, b| {
                let n = row.len();
                let (fa, fb) = (&flags.data[a..a + n], &flags.data[b..b + n]);
                for i in 0..n {
                    row[i] = (fa[i] == CellFlag::Fluid || fb[i] == CellFlag::Fluid) as u8;
                }
            },
            |m, a, b| *m = (a.is_some_and(fluid) || b.is_some_and(fluid)) as u8,
        );
        valid[k] = g.data;
    }
}

/// Scratch of [`extrapolate`]: the faces of the layer being added and their values. It holds a band around
/// the liquid's surface, not a copy of the grid.
#[derive(Clone, Debug, Default)]
pub(crate) struct Front {
    faces: Vec<usize>,
    values: Vec<f64>,
    /// The next layer's faces, being gathered.
    next: Vec<usize>,
}

impl Front {
    pub(crate) fn bytes(&self) -> usize {
        (self.faces.capacity() + self.next.capacity()) * std::mem::size_of::<usize>()
            + self.values.capacity() * 8
    }
}

/// The mean of the known neighbours of face `i` at coordinates `c` (same component, along every axis, lower
/// then upper), and how many there are.
#[inline(always)]
fn known_mean<const D: usize>(
    values: &[f64],
    known: &[u8],
    dims: [usize; D],
    strides: [usize; D],
    i: usize,
    c: [usize; D],
) -> (f64, u32) {
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
    (sum, n)
}

/// Extends the known faces `layers` times: each unknown face next to a known one (along any axis, same
/// component) takes the mean of its known neighbours and becomes known. Each layer reads only the previous
/// one (Jacobi order), so the result does not depend on the traversal. Faces never reached keep their value.
///
/// Only the first layer looks at every face (in fixed chunks, in parallel); each later layer looks at the
/// unknown neighbours of the faces the layer before added, a band around the liquid, sorted by index.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub(crate) fn extrapolate<const D: usize>(
    u: &mut MacGrid<D>,
    valid: &mut [Vec<u8>; D],
    layers: usize,
    front: &mut Front,
) {
    if layers == 0 {
        return;
    }
    for k in 0..D {
        let g = &mut u.u[k];
        let dims = g.dims;
        let strides = g.strides();
        let known = &mut valid[k];
        // The first layer: unknown faces with a known neighbour, row by row, rows in fixed groups.
        let nx = dims[0];
        let rows = g.data.len().checked_div(nx).unwrap_or(0);
        let per = (GRID_CHUNK / nx.max(1)).max(1);
        let groups: Vec<Vec<usize>> = (0..rows.div_ceil(per))
            .into_par_iter()
            .map(|t| {
                let mut found = Vec::new();
                // Per row, whether each face has a known neighbour, as byte masks (so that it vectorises):
                // along x within the row, across from the rows on either side that exist.
                let mut near = vec![0u8; nx];
                for row in t * per..((t + 1) * per).min(rows) {
                    let first = row * nx;
                    let c = coords_of(dims, first);
                    let here = &known[first..first + nx];
                    near.fill(0);
                    for x in 0..nx {
                        let left = if x > 0 { here[x - 1] } else { 0 };
                        let right = if x + 1 < nx { here[x + 1] } else { 0 };
                        near[x] = left | right;
                    }
                    for a in 1..D {
                        let s = strides[a];
                        if c[a] > 0 {
                            for (m, &k) in near.iter_mut().zip(&known[first - s..first - s + nx]) {
                                *m |= k;
                            }
                        }
                        if c[a] + 1 < dims[a] {
                            for (m, &k) in near.iter_mut().zip(&known[first + s..first + s + nx]) {
                                *m |= k;
                            }
                        }
                    }
                    for x in 0..nx {
                        if here[x] == 0 && near[x] != 0 {
                            found.push(first + x);
                        }
                    }
                }
                found
            })
            .collect();
        front.faces.clear();
        for f in groups {
            front.faces.extend_from_slice(&f);
        }
        for layer in 0..layers {
            if front.faces.is_empty() {
                break;
            }
            // Every value of the layer from the known values before it, then all of them committed.
            let (values, known_now) = (&g.data, &*known);
            front.values.clear();
            front
                .faces
                .par_iter()
                .map(|&i| {
                    let (sum, n) =
                        known_mean(values, known_now, dims, strides, i, coords_of(dims, i));
                    sum / n as f64
                })
                .collect_into_vec(&mut front.values);
            for (&i, &v) in front.faces.iter().zip(&front.values) {
                g.data[i] = v;
                known[i] = 1;
            }
            if layer + 1 == layers {
                break;
            }
            // The next layer: the unknown neighbours of the faces just added.
            let known = &*known;
            let found: Vec<Vec<usize>> = front
                .faces
                .par_chunks(GRID_CHUNK)
                .map(|faces| {
                    let mut out = Vec::new();
                    for &i in faces {
                        let c = coords_of(dims, i);
                        for a in 0..D {
                            if c[a] > 0 && known[i - strides[a]] == 0 {
                                out.push(i - strides[a]);
                            }
                            if c[a] + 1 < dims[a] && known[i + strides[a]] == 0 {
                                out.push(i + strides[a]);
                            }
                        }
                    }
                    out
                })
                .collect();
            let next = &mut front.next;
            next.clear();
            for f in found {
                next.extend_from_slice(&f);
            }
            // A set: its order does not depend on how the faces were split.
            next.par_sort_unstable();
            next.dedup();
            std::mem::swap(&mut front.faces, next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::strides_of;

    /// The definition, one full sweep of the grid per layer: every unknown face with a known neighbour takes
    /// the mean of its known neighbours (lower then upper, axis by axis), all from the previous layer.
    fn reference<const D: usize>(g: &mut Grid<f64, D>, known: &mut [u8], layers: usize) {
        let dims = g.dims;
        let strides = strides_of(dims);
        for _ in 0..layers {
            let (old, was) = (g.data.clone(), known.to_vec());
            for i in 0..old.len() {
                let c = coords_of(dims, i);
                if was[i] == 0 {
                    let (sum, n) = known_mean(&old, &was, dims, strides, i, c);
                    if n > 0 {
                        g.data[i] = sum / n as f64;
                        known[i] = 1;
                    }
                }
            }
        }
    }

    #[test]
    fn band_layers_equal_full_sweeps() {
        // A liquid blob (known faces) in an irregular shape, values that differ face by face, and a layer count
        // that reaches the domain's walls on some sides and not on others.
        let dims = [13usize, 9, 11];
        let mut u = MacGrid::<3>::new(dims, [0.0; 3], 0.1);
        let mut valid: [Vec<u8>; 3] = std::array::from_fn(|_| Vec::new());
        for k in 0..3 {
            let fd = u.u[k].dims;
            let n = u.u[k].data.len();
            valid[k] = (0..n)
                .map(|i| {
                    let c = coords_of(fd, i);
                    let r2 = (c[0] as f64 - 4.0).powi(2)
                        + 2.0 * (c[1] as f64 - 3.0).powi(2)
                        + (c[2] as f64 - 6.0).powi(2);
                    (r2 < 9.0 || (c[0] + 2 * c[1] + c[2]) % 17 == 0) as u8
                })
                .collect();
            for (i, v) in u.u[k].data.iter_mut().enumerate() {
                *v = ((i * 7919 + k * 31) % 1000) as f64 / 37.0 - 9.0;
            }
        }
        for layers in [1, 3, 6, 40] {
            let (mut a, mut va) = (u.clone(), valid.clone());
            let mut front = Front::default();
            extrapolate(&mut a, &mut va, layers, &mut front);
            for k in 0..3 {
                let (mut g, mut vk) = (u.u[k].clone(), valid[k].clone());
                reference(&mut g, &mut vk, layers);
                // Bitwise: the band visits the same faces with the same sums in the same order.
                assert_eq!(a.u[k].data, g.data, "component {k}, {layers} layers");
                assert_eq!(va[k], vk, "component {k}, {layers} layers");
            }
        }
    }

    #[test]
    fn known_faces_are_those_with_fluid_on_a_side() {
        let dims = [7usize, 5, 6];
        let mut rng = crate::rng::SplitMix64::new(3);
        let mut flags = Grid::new(dims, [0.0; 3], 0.1, CellFlag::Air);
        for f in &mut flags.data {
            *f = [CellFlag::Fluid, CellFlag::Air, CellFlag::Solid][(rng.next_u64() % 3) as usize];
        }
        let u = MacGrid::<3>::new(dims, [0.0; 3], 0.1);
        let mut valid: [Vec<u8>; 3] = std::array::from_fn(|_| Vec::new());
        mark_valid(&u, &flags, &mut valid);
        for k in 0..3 {
            let fd = u.u[k].dims;
            for (i, &got) in valid[k].iter().enumerate() {
                let f = coords_of(fd, i);
                // The cells on either side of the face along k that exist.
                let mut sides = Vec::new();
                if f[k] > 0 {
                    let mut c = f;
                    c[k] -= 1;
                    sides.push(c);
                }
                if f[k] < dims[k] {
                    sides.push(f);
                }
                let want = sides.iter().any(|&c| flags[c] == CellFlag::Fluid) as u8;
                assert_eq!(got, want, "component {k}, face {f:?}");
            }
        }
    }
}
