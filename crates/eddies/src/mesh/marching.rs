//! Marching tetrahedra over a padded grid, slab by slab (see the [module doc](super) for the method).
//!
//! Indices here are *padded*: sample `(I, J, K)` of the padded grid is sample `(I-1, J-1, K-1)` of the field,
//! and `I = 0` or `I = nx + 1` (likewise in y and z) is a padding sample, outside the liquid. Slab `K` holds the
//! cubes between padded layers `K` and `K + 1`, for `K` in `0..=nz`.
//!
//! Every grid edge used by Kuhn's tetrahedra goes from a sample `P` to `P + d` with `d` one of the seven
//! non-zero vectors of {0, 1}³. Slab `K` owns the vertices on the crossed *in-plane* edges of layer `K`
//! (`d` = x, y, xy) and on the crossed *cross* edges from layer `K` to `K + 1` (`d` has a z component). It
//! numbers them in scan order (y rows, then x, then direction), in-plane first. Its triangles also use the
//! in-plane edges of layer `K + 1`, owned by slab `K + 1`: it ranks them in the same scan order, which gives
//! their index in that slab, and marks them with [`NEXT`].

use super::{IsoSurface, MeshError, TriMesh};
use rayon::prelude::*;

/// Smallest distance of a vertex from either end of its edge, as a fraction of the edge. A sample exactly at
/// the level would otherwise take a vertex from each of its crossed edges, and the triangles between them
/// would have zero area; a thousandth of a cell moves the surface by far less than the interpolation error.
pub const T_MIN: f64 = 1e-3;

/// Flag on a slab-local vertex reference: the vertex is on an in-plane edge of the slab's upper layer and is
/// owned by the next slab.
const NEXT: u32 = 1 << 31;

/// The six tetrahedra of Kuhn's triangulation of a cube, as cube corners numbered by bits (x = 1, y = 2,
/// z = 4). Each walks from corner 0 to corner 7 adding one axis at a time (orders xyz, xzy, yxz, yzx, zxy, zyx);
/// those from odd orders have their last two corners swapped so that all six are positively oriented
/// (`det(v1-v0, v2-v0, v3-v0) > 0`), which [`FACE_OUT`] relies on.
pub(super) const TETS: [[u8; 4]; 6] = [
    [0, 1, 3, 7],
    [0, 1, 7, 5],
    [0, 2, 7, 3],
    [0, 2, 6, 7],
    [0, 4, 5, 7],
    [0, 4, 7, 6],
];

/// For a positively oriented tetrahedron, the face opposite vertex `i`, wound counter-clockwise seen from
/// outside the tetrahedron (its normal points away from vertex `i`).
const FACE_OUT: [[usize; 3]; 4] = [[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]];

/// In-plane edge directions (x, y) of a layer, in scan order.
const PLANE_DIRS: [[usize; 2]; 3] = [[1, 0], [0, 1], [1, 1]];

/// Extracts the surface between liquid and the rest from `values`, sampled at cell centres: sample
/// `(i, j, k)`, at index `i + nx·(j + ny·k)`, lies at `origin + (i + ½, j + ½, k + ½)·cell_size`.
///
/// `dims` is `[nx, ny, nz]`, `cell_size` in m, `origin` (the grid's lowest corner) in m. The result is a
/// closed, oriented 2-manifold (every edge in exactly two triangles, in opposite directions), with triangles
/// counter-clockwise and normals pointing out of the liquid, closed by faces on the box's walls where the
/// liquid touches them. An empty or liquid-free grid gives an empty mesh.
pub fn extract(
    values: &[f32],
    dims: [usize; 3],
    cell_size: f64,
    origin: [f64; 3],
    params: &IsoSurface,
) -> Result<TriMesh, MeshError> {
    let expected = dims.iter().product::<usize>();
    if values.len() != expected {
        return Err(MeshError::LengthMismatch {
            dims,
            expected,
            found: values.len(),
        });
    }
    if !(cell_size.is_finite() && cell_size > 0.0) {
        return Err(MeshError::CellSize(cell_size));
    }
    if origin.iter().any(|o| !o.is_finite()) {
        return Err(MeshError::Origin(origin));
    }
    if expected == 0 {
        return Ok(TriMesh::default());
    }
    let grid = Padded {
        values,
        n: dims,
        px: dims[0] + 2,
        py: dims[1] + 2,
        h: cell_size,
        origin,
        params,
    };
    let slabs: Vec<Slab> = (0..=dims[2])
        .into_par_iter()
        .map_init(|| Scratch::new(&grid), |scratch, k| grid.slab(k, scratch))
        .collect();
    let mut mesh = assemble(&slabs)?;
    if params.smoothing_iterations > 0 {
        mesh.smooth_taubin(params.smoothing_iterations);
    }
    mesh.compute_normals();
    Ok(mesh)
}

/// The field seen through its padding.
struct Padded<'a> {
    values: &'a [f32],
    n: [usize; 3],
    /// Samples per padded row (`nx + 2`) and rows per padded layer (`ny + 2`).
    px: usize,
    py: usize,
    h: f64,
    origin: [f64; 3],
    params: &'a IsoSurface,
}

/// The liquid flags of one padded layer as bits, `words` 64-bit words per row, with one more row of zeros
/// past the last. Bits past a row's end are zero too, so every sample beyond the padding also reads as
/// outside, and the scans below need no bounds tests: an edge or cube that reaches past the padding is
/// between outside samples only.
struct Bits {
    words: usize,
    rows: Vec<u64>,
}

impl Bits {
    fn new(px: usize, py: usize) -> Self {
        let words = px.div_ceil(64);
        Self {
            words,
            rows: vec![0; words * (py + 1)],
        }
    }

    #[inline]
    fn row(&self, j: usize) -> &[u64] {
        &self.rows[j * self.words..][..self.words]
    }

    #[inline]
    fn get(&self, i: usize, j: usize) -> bool {
        (self.row(j)[i >> 6] >> (i & 63)) & 1 != 0
    }
}

/// Word `w` of a row shifted down by one sample: bit `i` of the result is sample `i + 1`.
#[inline]
fn shr1(row: &[u64], w: usize) -> u64 {
    (row[w] >> 1) | row.get(w + 1).map_or(0, |&next| next << 63)
}

/// Calls `f(i, w_bits)` for each set bit `i` of the union of a row's masks, in increasing `i`, with the bits
/// of each mask at `i`. `masks(w)` gives the masks' word `w`.
#[inline]
fn for_each_bit<const M: usize>(
    words: usize,
    masks: impl Fn(usize) -> [u64; M],
    mut f: impl FnMut(usize, [bool; M]),
) {
    for w in 0..words {
        let m = masks(w);
        let mut any = m.iter().fold(0, |acc, &x| acc | x);
        while any != 0 {
            let bit = any.trailing_zeros();
            any &= any - 1;
            f(64 * w + bit as usize, m.map(|x| (x >> bit) & 1 != 0));
        }
    }
}

/// One worker's arrays over a padded layer, reused from slab to slab. The vertex maps are never cleared: a
/// slab reads only the entries of crossed edges, which it has written itself.
struct Scratch {
    /// Liquid flags of the slab's lower and upper layers.
    lower: Bits,
    upper: Bits,
    /// Vertex of each in-plane edge of the lower layer (3 per sample), of each cross edge (4 per sample) and of
    /// each in-plane edge of the upper layer (3 per sample, flagged [`NEXT`]).
    plane_lo: Vec<u32>,
    cross: Vec<u32>,
    plane_hi: Vec<u32>,
}

impl Scratch {
    fn new(grid: &Padded) -> Self {
        let len = grid.px * grid.py;
        Self {
            lower: Bits::new(grid.px, grid.py),
            upper: Bits::new(grid.px, grid.py),
            plane_lo: vec![0; 3 * len],
            cross: vec![0; 4 * len],
            plane_hi: vec![0; 3 * len],
        }
    }

    /// The vertex reference of the edge between cube corners `lo` and `hi` (`lo`'s bits a subset of `hi`'s) of
    /// the cube whose lowest corner is layer sample `p`.
    #[inline]
    fn edge_vertex(&self, p: usize, px: usize, lo: u8, hi: u8) -> u32 {
        let base = p + usize::from(lo & 1) + usize::from((lo >> 1) & 1) * px;
        let d = usize::from(lo ^ hi);
        if d & 4 != 0 {
            self.cross[4 * base + (d & 3)]
        } else if lo & 4 == 0 {
            self.plane_lo[3 * base + d - 1]
        } else {
            self.plane_hi[3 * base + d - 1]
        }
    }
}

/// The part of the mesh a slab owns: its vertices, and triangles whose indices are local to the slab or
/// flagged [`NEXT`].
struct Slab {
    positions: Vec<[f32; 3]>,
    triangles: Vec<[u32; 3]>,
}

impl Padded<'_> {
    /// The field's value at a padded sample, `None` on the padding.
    #[inline]
    fn value(&self, p: [usize; 3]) -> Option<f32> {
        let real = (0..3).all(|c| p[c] >= 1 && p[c] <= self.n[c]);
        real.then(|| self.values[(p[0] - 1) + self.n[0] * ((p[1] - 1) + self.n[1] * (p[2] - 1))])
    }

    /// Sets `bits` to the liquid flags of padded layer `k`.
    fn classify(&self, k: usize, bits: &mut Bits) {
        bits.rows.fill(0);
        if k == 0 || k > self.n[2] {
            return;
        }
        let [nx, ny, _] = self.n;
        for j in 0..ny {
            let row = &self.values[nx * (j + ny * (k - 1))..][..nx];
            let out = &mut bits.rows[(j + 1) * bits.words..][..bits.words];
            for (i, &v) in row.iter().enumerate() {
                let b = i + 1;
                out[b >> 6] |= u64::from(self.params.is_inside(v)) << (b & 63);
            }
        }
    }

    /// The vertex on the edge from padded sample `a` to `a + d`, whose ends are on opposite sides: where the
    /// linear interpolant of the field meets the level, or the edge's midpoint (on the wall) if an end is
    /// padding.
    fn vertex(&self, a: [usize; 3], d: [usize; 3]) -> [f32; 3] {
        let b = [a[0] + d[0], a[1] + d[1], a[2] + d[2]];
        let t = match (self.value(a), self.value(b)) {
            (Some(va), Some(vb)) => {
                let (va, vb) = (f64::from(va), f64::from(vb));
                let t = (f64::from(self.params.level) - va) / (vb - va);
                if t.is_finite() {
                    t.clamp(T_MIN, 1.0 - T_MIN)
                } else {
                    0.5
                }
            }
            _ => 0.5,
        };
        // Padded sample I is field sample I - 1, centred at (I - 1 + ½)·h.
        std::array::from_fn(|c| {
            (self.origin[c] + (a[c] as f64 - 0.5 + t * d[c] as f64) * self.h) as f32
        })
    }

    /// Numbers the crossed in-plane edges (x, y, xy) of layer `k` (flags `bits`) in scan order into `ids`,
    /// from 0 and or-ing `flag`; pushes their vertices to `positions` if given. Returns their number.
    fn number_plane(
        &self,
        k: usize,
        bits: &Bits,
        ids: &mut [u32],
        flag: u32,
        mut positions: Option<&mut Vec<[f32; 3]>>,
    ) -> u32 {
        let mut next = 0;
        for j in 0..self.py {
            let (a, b) = (bits.row(j), bits.row(j + 1));
            let masks = |w| [a[w] ^ shr1(a, w), a[w] ^ b[w], a[w] ^ shr1(b, w)];
            for_each_bit(bits.words, masks, |i, crossed: [bool; 3]| {
                let p = j * self.px + i;
                for (dir, &[dx, dy]) in PLANE_DIRS.iter().enumerate() {
                    if crossed[dir] {
                        ids[3 * p + dir] = next | flag;
                        next += 1;
                        if let Some(out) = positions.as_deref_mut() {
                            out.push(self.vertex([i, j, k], [dx, dy, 0]));
                        }
                    }
                }
            });
        }
        next
    }

    /// The vertices and triangles of slab `k`.
    fn slab(&self, k: usize, s: &mut Scratch) -> Slab {
        let px = self.px;
        self.classify(k, &mut s.lower);
        self.classify(k + 1, &mut s.upper);
        let mut positions = Vec::new();
        let mut next = self.number_plane(k, &s.lower, &mut s.plane_lo, 0, Some(&mut positions));
        let words = s.lower.words;
        for j in 0..self.py {
            let (lo, hi, hi1) = (s.lower.row(j), s.upper.row(j), s.upper.row(j + 1));
            // Cross edges to the upper layer by direction dx + 2·dy: z, xz, yz, xyz.
            let masks = |w| {
                [
                    lo[w] ^ hi[w],
                    lo[w] ^ shr1(hi, w),
                    lo[w] ^ hi1[w],
                    lo[w] ^ shr1(hi1, w),
                ]
            };
            for_each_bit(words, masks, |i, crossed: [bool; 4]| {
                let p = j * px + i;
                for (d, _) in crossed.iter().enumerate().filter(|(_, &c)| c) {
                    s.cross[4 * p + d] = next;
                    next += 1;
                    positions.push(self.vertex([i, j, k], [d & 1, d >> 1, 1]));
                }
            });
        }
        self.number_plane(k + 1, &s.upper, &mut s.plane_hi, NEXT, None);

        let mut triangles = Vec::new();
        for j in 0..self.py {
            let rows = [
                s.lower.row(j),
                s.lower.row(j + 1),
                s.upper.row(j),
                s.upper.row(j + 1),
            ];
            // Bit i of `differs`: some corner row differs from the first at sample i. A cube is mixed if its
            // first row changes between its two samples or another row differs from it at either.
            let differs = |w: usize| rows[1..].iter().fold(0, |acc, r| acc | (r[w] ^ rows[0][w]));
            let mixed = |w: usize| {
                let next_differs = if w + 1 < words {
                    differs(w + 1) << 63
                } else {
                    0
                };
                let d = differs(w);
                [d | (d >> 1) | next_differs | (rows[0][w] ^ shr1(rows[0], w))]
            };
            for_each_bit(words, mixed, |i, _| {
                let corners: [bool; 8] = std::array::from_fn(|c| {
                    let layer = if c & 4 == 0 { &s.lower } else { &s.upper };
                    layer.get(i + (c & 1), j + ((c >> 1) & 1))
                });
                let p = j * px + i;
                let edge = |a: u8, b: u8| s.edge_vertex(p, px, a.min(b), a.max(b));
                for tet in &TETS {
                    march_tet(tet, &corners, &edge, &mut triangles);
                }
            });
        }
        Slab {
            positions,
            triangles,
        }
    }
}

/// Appends the surface inside one tetrahedron (corners `tet` of a cube whose corner flags are `corners`) to
/// `out`, wound so that its normal points from the liquid corners to the others.
fn march_tet(
    tet: &[u8; 4],
    corners: &[bool; 8],
    edge: &impl Fn(u8, u8) -> u32,
    out: &mut Vec<[u32; 3]>,
) {
    let inside: [bool; 4] = std::array::from_fn(|v| corners[usize::from(tet[v])]);
    let e = |a: usize, b: usize| edge(tet[a], tet[b]);
    let n_in = inside.iter().filter(|&&x| x).count();
    match n_in {
        // One corner alone on its side: a triangle cutting its three edges, a shrunken copy of the opposite
        // face, wound like that face (normal away from the corner) if the corner is liquid, reversed if not.
        1 | 3 => {
            let lone = inside.iter().position(|&x| x == (n_in == 1)).unwrap_or(0);
            let [a, b, c] = FACE_OUT[lone];
            if n_in == 1 {
                out.push([e(lone, a), e(lone, b), e(lone, c)]);
            } else {
                out.push([e(lone, a), e(lone, c), e(lone, b)]);
            }
        }
        // Two and two: a quad around the edges between the pairs. For liquid corners (i, j) and others
        // (k, l) such that (i, j, k, l) is an even permutation, the cycle ik, il, jl, jk is wound with its
        // normal towards k and l.
        2 => {
            let mut liquid = [0; 2];
            let mut other = [0; 2];
            let (mut nl, mut no) = (0, 0);
            for (v, &x) in inside.iter().enumerate() {
                if x {
                    liquid[nl] = v;
                    nl += 1;
                } else {
                    other[no] = v;
                    no += 1;
                }
            }
            let [i, j] = liquid;
            let [mut k, mut l] = other;
            if !is_even([i, j, k, l]) {
                std::mem::swap(&mut k, &mut l);
            }
            let q = [e(i, k), e(i, l), e(j, l), e(j, k)];
            out.push([q[0], q[1], q[2]]);
            out.push([q[0], q[2], q[3]]);
        }
        _ => {}
    }
}

/// Whether a permutation of 0..4 is even (an even number of inversions).
fn is_even(p: [usize; 4]) -> bool {
    let mut inversions = 0;
    for a in 0..4 {
        for b in a + 1..4 {
            inversions += usize::from(p[a] > p[b]);
        }
    }
    inversions % 2 == 0
}

/// Concatenates the slabs in order, turning slab-local vertex references into global indices.
fn assemble(slabs: &[Slab]) -> Result<TriMesh, MeshError> {
    let mut offsets = Vec::with_capacity(slabs.len() + 2);
    let mut total = 0u64;
    for slab in slabs {
        if slab.positions.len() as u64 >= u64::from(NEXT) {
            return Err(MeshError::TooManyVertices);
        }
        offsets.push(total);
        total += slab.positions.len() as u64;
    }
    offsets.push(total);
    if total > u64::from(u32::MAX) {
        return Err(MeshError::TooManyVertices);
    }
    let offsets: Vec<u32> = offsets.into_iter().map(|o| o as u32).collect();
    // Serial copies: they run at memory speed, where rayon's collection of a flattened iterator would
    // allocate and link a list of pieces.
    let mut positions = Vec::with_capacity(total as usize);
    let mut triangles = Vec::with_capacity(slabs.iter().map(|s| s.triangles.len()).sum());
    for (k, slab) in slabs.iter().enumerate() {
        positions.extend_from_slice(&slab.positions);
        let (own, next) = (offsets[k], offsets[k + 1]);
        triangles.extend(slab.triangles.iter().map(|t| {
            t.map(|r| {
                if r & NEXT != 0 {
                    next + (r & !NEXT)
                } else {
                    own + r
                }
            })
        }));
    }
    Ok(TriMesh {
        positions,
        normals: Vec::new(),
        triangles,
    })
}
