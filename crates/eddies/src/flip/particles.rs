//! The liquid's marker particles as a struct of arrays (one `Vec` per attribute, the layout GPU buffers use).
//!
//! Positions and velocities are f32: a particle is read and written several times per step (sort, transfer,
//! advection), so halving its bytes halves the memory traffic that bounds those stages, and f32 resolves
//! positions to about 10⁻⁷ of the domain, far below a cell. All arithmetic on them is done in f64.

use rayon::prelude::*;

/// Particles of a `D`-dimensional liquid.
#[derive(Clone, Debug, PartialEq)]
pub struct Particles<const D: usize> {
    /// Positions (m), one array per axis.
    pub pos: [Vec<f32>; D],
    /// Velocities (m/s), one array per axis.
    pub vel: [Vec<f32>; D],
    /// APIC affine velocity matrix `C` (1/s): `affine[k][a]` is ∂u_k/∂x_a carried by the particle (Jiang et
    /// al. 2015, eq. 8 for multilinear weights). Empty unless the transfer is APIC.
    pub affine: [[Vec<f32>; D]; D],
}

impl<const D: usize> Default for Particles<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const D: usize> Particles<D> {
    /// No particles; `apic` allocates the affine matrices.
    pub fn new() -> Self {
        Self {
            pos: std::array::from_fn(|_| Vec::new()),
            vel: std::array::from_fn(|_| Vec::new()),
            affine: std::array::from_fn(|_| std::array::from_fn(|_| Vec::new())),
        }
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.pos[0].len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a particle at `x` (m) with velocity `v` (m/s) and, when `affine`, a zero affine matrix.
    pub fn push(&mut self, x: [f64; D], v: [f64; D], affine: bool) {
        for k in 0..D {
            self.pos[k].push(x[k] as f32);
            self.vel[k].push(v[k] as f32);
        }
        if affine {
            for row in &mut self.affine {
                for c in row {
                    c.push(0.0);
                }
            }
        }
    }

    /// Position of particle `i` (m).
    #[inline]
    pub fn position(&self, i: usize) -> [f64; D] {
        std::array::from_fn(|k| self.pos[k][i] as f64)
    }

    /// Velocity of particle `i` (m/s).
    #[inline]
    pub fn velocity(&self, i: usize) -> [f64; D] {
        std::array::from_fn(|k| self.vel[k][i] as f64)
    }

    fn arrays_mut(&mut self) -> impl Iterator<Item = &mut Vec<f32>> {
        self.pos
            .iter_mut()
            .chain(self.vel.iter_mut())
            .chain(self.affine.iter_mut().flatten())
    }

    /// Reorders the particles so that new particle `i` is old particle `order[i]`; particles missing from
    /// `order` are dropped. `tmp` is scratch memory, reused across calls.
    pub fn permute(&mut self, order: &[u32], tmp: &mut Vec<f32>) {
        let n = order.len();
        for a in self.arrays_mut() {
            if a.is_empty() && n > 0 {
                continue;
            }
            tmp.resize(n, 0.0);
            tmp.par_iter_mut()
                .zip(order.par_iter())
                .with_min_len(4096)
                .for_each(|(t, &o)| *t = a[o as usize]);
            std::mem::swap(a, tmp);
        }
    }

    /// Bytes held (capacity of every array).
    pub fn bytes(&self) -> usize {
        let mut b = 0;
        for a in self
            .pos
            .iter()
            .chain(&self.vel)
            .chain(self.affine.iter().flatten())
        {
            b += a.capacity() * 4;
        }
        b
    }
}
