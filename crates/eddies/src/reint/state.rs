//! Storage of reintegration tracking: the padded cell layout and the struct-of-arrays particle state.

/// Cell layout: the domain's cells plus one layer of vacuum halo cells on every side, so that every interior
/// cell can gather from its 3^D neighbours without bounds checks. Indices are x fastest.
#[derive(Clone, Debug)]
pub(crate) struct CellLayout<const D: usize> {
    /// Interior cells per axis.
    pub n: [usize; D],
    /// Padded cells per axis (`n + 2`).
    pub padded: [usize; D],
    /// Index stride per axis in the padded array.
    pub stride: [usize; D],
    /// Neighbour offsets: index delta and the offset of the neighbour's cell centre in cells, for the 3^D
    /// cells around (and including) a cell, in a fixed order.
    pub neighbours: Vec<(isize, [f32; D])>,
}

impl<const D: usize> CellLayout<D> {
    pub fn new(n: [usize; D]) -> Self {
        let padded: [usize; D] = std::array::from_fn(|a| n[a] + 2);
        let mut stride = [1usize; D];
        for a in 1..D {
            stride[a] = stride[a - 1] * padded[a - 1];
        }
        let count = 3usize.pow(D as u32);
        let neighbours = (0..count)
            .map(|c| {
                let mut rest = c;
                let mut delta = 0isize;
                let mut off = [0.0f32; D];
                for a in 0..D {
                    let o = (rest % 3) as isize - 1;
                    rest /= 3;
                    delta += o * stride[a] as isize;
                    off[a] = o as f32;
                }
                (delta, off)
            })
            .collect();
        Self {
            n,
            padded,
            stride,
            neighbours,
        }
    }

    /// Number of padded cells.
    pub fn len(&self) -> usize {
        self.padded.iter().product()
    }

    /// Number of interior cells.
    pub fn cells(&self) -> usize {
        self.n.iter().product()
    }

    /// Number of interior rows (lines of cells along x).
    pub fn rows(&self) -> usize {
        self.n[1..].iter().product()
    }

    /// Padded index of the first interior cell (x = 0) of interior row `row`.
    pub fn row_start(&self, row: usize) -> usize {
        let mut rest = row;
        let mut idx = self.stride[0];
        for a in 1..D {
            let c = rest % self.n[a];
            rest /= self.n[a];
            idx += (c + 1) * self.stride[a];
        }
        idx
    }

    /// Padded index of interior cell `c` (each coordinate in `0..n`).
    pub fn index(&self, c: [usize; D]) -> usize {
        (0..D).map(|a| (c[a] + 1) * self.stride[a]).sum()
    }

    /// Interior coordinates of padded index `idx`, or `None` for a halo cell.
    pub fn coords(&self, idx: usize) -> Option<[usize; D]> {
        let mut c = [0usize; D];
        let mut rest = idx;
        for a in (0..D).rev() {
            let p = rest / self.stride[a];
            rest %= self.stride[a];
            if p == 0 || p > self.n[a] {
                return None;
            }
            c[a] = p - 1;
        }
        Some(c)
    }

    /// Calls `f(padded_index, coords)` for every interior cell, in index order.
    pub fn for_each_cell(&self, mut f: impl FnMut(usize, [usize; D])) {
        for row in 0..self.rows() {
            let start = self.row_start(row);
            let mut c = self.coords(start).expect("row start is interior");
            for x in 0..self.n[0] {
                c[0] = x;
                f(start + x, c);
            }
        }
    }

    /// Calls `f(padded_index, coords)` for every interior cell with `lo[a] ≤ c[a] ≤ hi[a]` on each axis (the
    /// box clipped to the grid), in index order.
    pub fn for_each_cell_in(
        &self,
        lo: [usize; D],
        hi: [usize; D],
        mut f: impl FnMut(usize, [usize; D]),
    ) {
        let hi: [usize; D] = std::array::from_fn(|a| hi[a].min(self.n[a] - 1));
        if (0..D).any(|a| lo[a] > hi[a]) {
            return;
        }
        let mut c = lo;
        'rows: loop {
            for x in lo[0]..=hi[0] {
                c[0] = x;
                f(self.index(c), c);
            }
            for a in 1..D {
                if c[a] < hi[a] {
                    c[a] += 1;
                    continue 'rows;
                }
                c[a] = lo[a];
            }
            return;
        }
    }
}

/// The particle state, one particle per cell, struct of arrays over the padded layout.
///
/// Positions are stored relative to the cell centre, in cells (each component in [−½, ½]): an f32 absolute
/// coordinate near x = 1000 cells resolves only 6·10⁻⁵ cells, a relative one 3·10⁻⁸, so slow motion far from
/// the origin is not lost to rounding. The absolute position of the particle in cell c is `c + ½ + pos`.
#[derive(Clone, Debug)]
pub(crate) struct State<const D: usize> {
    /// Position of the particle relative to its cell centre (cells).
    pub pos: [Vec<f32>; D],
    /// Velocity (cells/s).
    pub vel: [Vec<f32>; D],
    /// Mass of each substance in the cell (kg); the particle's mass is their sum.
    pub mass: Vec<Vec<f32>>,
}

impl<const D: usize> State<D> {
    pub fn new(len: usize, substances: usize) -> Self {
        Self {
            pos: std::array::from_fn(|_| vec![0.0; len]),
            vel: std::array::from_fn(|_| vec![0.0; len]),
            mass: (0..substances).map(|_| vec![0.0; len]).collect(),
        }
    }

    /// Total mass of the particle in padded cell `i`.
    #[inline]
    pub fn total_mass(&self, i: usize) -> f32 {
        self.mass.iter().map(|m| m[i]).sum()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        let values: usize = self
            .pos
            .iter()
            .chain(&self.vel)
            .chain(&self.mass)
            .map(Vec::len)
            .sum();
        values * std::mem::size_of::<f32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_cover_interior_once() {
        let l = CellLayout::<3>::new([5, 4, 3]);
        let mut seen = vec![0u8; l.len()];
        l.for_each_cell(|i, c| {
            assert_eq!(l.index(c), i);
            assert_eq!(l.coords(i), Some(c));
            seen[i] += 1;
        });
        assert_eq!(seen.iter().filter(|&&s| s == 1).count(), l.cells());
        assert!(seen.iter().all(|&s| s <= 1));
        assert_eq!(l.coords(0), None);
    }

    #[test]
    fn neighbours_are_the_3x3_block() {
        let l = CellLayout::<2>::new([4, 4]);
        assert_eq!(l.neighbours.len(), 9);
        assert!(l.neighbours.contains(&(0, [0.0, 0.0])));
        assert!(l.neighbours.contains(&(-7, [-1.0, -1.0])));
    }
}
