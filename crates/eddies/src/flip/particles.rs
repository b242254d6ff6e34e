//! The liquid's marker particles as a struct of arrays (one `Vec` per attribute, the layout GPU buffers use).
//!
//! Positions and velocities are f32: a particle is read and written several times per step (sort, transfer,
//! advection), so halving its bytes halves the memory traffic that bounds those stages, and f32 resolves
//! positions to about 10⁻⁷ of the domain, far below a cell. All arithmetic on them is done in f64.

use rayon::prelude::*;

/// Particles per task in particle loops: fixed, so that work splitting never depends on the thread count.
pub(crate) const PARTICLE_CHUNK: usize = 8192;

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

    /// Adds `velocity` (m/s) to the particles within `radius` (m) of `center` (m), weighted by the smooth
    /// falloff `(1 − (d/radius)²)²` of reintegration tracking's impulse: a push from a mouse or a game
    /// event. The next particle-to-grid transfer carries it to the grid.
    pub fn apply_impulse(&mut self, center: [f64; D], radius: f64, velocity: [f64; D]) {
        let r2 = radius * radius;
        for i in 0..self.len() {
            let x = self.position(i);
            let d2: f64 = (0..D).map(|k| (x[k] - center[k]).powi(2)).sum();
            if d2 < r2 {
                let w = (1.0 - d2 / r2).powi(2);
                for k in 0..D {
                    self.vel[k][i] += (w * velocity[k]) as f32;
                }
            }
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

/// Lanes of a [`Tally`]'s chunk, which add side by side in vector registers.
const LANES: usize = 8;

/// Particles per chunk of a [`Tally`]: short, so that a device that tallies the particles it keeps runs a
/// thread per lane for every 128 particles (a quarter of a million threads for 32M particles), where
/// [`PARTICLE_CHUNK`]'s would leave most of a GPU idle.
const TALLY_CHUNK: usize = 1024;

/// What a step reports of its particles: Σv, Σ|v|², the largest |v|² and a sum of the positions that were
/// checked, which is not finite exactly when one of them is not (positions lie in the domain, far from
/// overflow). A non-finite velocity makes Σ|v|² non-finite, so the checks are made once, on the sums
/// ([`Tally::broken`], [`Tally::max_square`]), and the pass over the particles is only adds.
///
/// [`Tally::over`] cuts the particles into chunks of [`Tally::CHUNK`] and each chunk into [`Tally::LANES`]
/// lanes: particle `i` of a chunk adds to lane `i mod LANES`, except the last `len mod LANES`, which add to
/// lane 0; the lanes are combined in lane order and the chunks in chunk order, so the result does not depend
/// on the thread count.
///
/// A device that keeps the particles computes the same tallies chunk by chunk and adds them up with
/// [`Tally::fold`] ([`TransferDevice::tally_kept`](super::TransferDevice::tally_kept)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tally<const D: usize> {
    /// Σv (m/s).
    pub sum: [f64; D],
    /// Σ|v|² (m²/s²).
    pub squares: f64,
    /// The largest |v|² (m²/s²; NaNs are skipped here and caught by `squares`), −∞ for no particle.
    pub max2: f64,
    /// Σ of the checked position coordinates (m).
    pub positions: f64,
}

impl<const D: usize> Tally<D> {
    /// Particles per chunk.
    pub const CHUNK: usize = TALLY_CHUNK;
    /// Lanes per chunk.
    pub const LANES: usize = LANES;

    /// No particle.
    pub const EMPTY: Self = Tally {
        sum: [0.0; D],
        squares: 0.0,
        max2: f64::NEG_INFINITY,
        positions: 0.0,
    };

    /// `self` followed by `later`.
    pub fn then(self, later: Self) -> Self {
        Tally {
            sum: std::array::from_fn(|k| self.sum[k] + later.sum[k]),
            squares: self.squares + later.squares,
            max2: self.max2.max(later.max2),
            positions: self.positions + later.positions,
        }
    }

    /// Whether some velocity or checked position is not finite (or |v|² overflows).
    pub fn broken(&self) -> bool {
        !(self.squares.is_finite() && self.positions.is_finite())
    }

    /// The largest |v|² (m²/s²): NaN when some velocity is NaN, −∞ for no particle.
    pub fn max_square(&self) -> f64 {
        if self.squares.is_nan() {
            f64::NAN
        } else {
            self.max2
        }
    }

    /// The tally of every particle of `p`, positions checked when `check_positions`.
    pub fn over(p: &Particles<D>, check_positions: bool) -> Self {
        let chunk = |r: std::ops::Range<usize>| {
            if check_positions {
                Self::chunk::<true>(p, r)
            } else {
                Self::chunk::<false>(p, r)
            }
        };
        crate::par::reduce(p.len(), TALLY_CHUNK, Self::EMPTY, chunk, Self::then)
    }

    /// The tally of all particles from those of their chunks, in chunk order: [`Tally::over`]'s last step.
    pub fn fold(chunks: impl IntoIterator<Item = Self>) -> Self {
        chunks.into_iter().fold(Self::EMPTY, Self::then)
    }

    /// The tally of the particles `r`, lane by lane.
    fn chunk<const POSITIONS: bool>(p: &Particles<D>, r: std::ops::Range<usize>) -> Self {
        let mut lanes = LaneTallies::<D>::default();
        let mut start = r.start;
        while start + LANES <= r.end {
            lanes.add::<POSITIONS, LANES>(p, start);
            start += LANES;
        }
        for i in start..r.end {
            lanes.add::<POSITIONS, 1>(p, i);
        }
        (0..LANES).fold(Self::EMPTY, |t, l| {
            t.then(Tally {
                sum: std::array::from_fn(|k| lanes.sum[k][l]),
                squares: lanes.squares[l],
                max2: lanes.max2[l],
                positions: lanes.positions[l],
            })
        })
    }
}

/// A [`Tally`] per lane.
struct LaneTallies<const D: usize> {
    sum: [[f64; LANES]; D],
    squares: [f64; LANES],
    max2: [f64; LANES],
    positions: [f64; LANES],
}

impl<const D: usize> Default for LaneTallies<D> {
    fn default() -> Self {
        LaneTallies {
            sum: [[0.0; LANES]; D],
            squares: [0.0; LANES],
            max2: [f64::NEG_INFINITY; LANES],
            positions: [0.0; LANES],
        }
    }
}

impl<const D: usize> LaneTallies<D> {
    /// Adds particles `start .. start + N` to lanes `0..N`.
    #[inline(always)]
    fn add<const POSITIONS: bool, const N: usize>(&mut self, p: &Particles<D>, start: usize) {
        let v: [&[f32; N]; D] =
            std::array::from_fn(|k| p.vel[k][start..start + N].try_into().expect("N velocities"));
        for l in 0..N {
            let mut v2 = 0.0;
            for k in 0..D {
                let vk = f64::from(v[k][l]);
                self.sum[k][l] += vk;
                v2 += vk * vk;
            }
            self.squares[l] += v2;
            // Skips a NaN (the comparison is false); `squares` records it.
            if v2 > self.max2[l] {
                self.max2[l] = v2;
            }
        }
        if POSITIONS {
            let x: [&[f32; N]; D] = std::array::from_fn(|k| {
                p.pos[k][start..start + N].try_into().expect("N positions")
            });
            for l in 0..N {
                let mut s = 0.0;
                for xk in &x {
                    s += f64::from(xk[l]);
                }
                self.positions[l] += s;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impulse_pushes_the_particles_within_its_radius_by_the_smooth_weight() {
        let mut p = Particles::<2>::new();
        // At the centre, half the radius out, on the rim, and beyond it.
        for x in [0.5, 0.55, 0.6, 0.7] {
            p.push([x, 0.5], [0.0, 1.0], false);
        }
        p.apply_impulse([0.5, 0.5], 0.1, [2.0, 0.0]);
        let w_half = (1.0f64 - 0.25).powi(2);
        assert_eq!(p.velocity(0), [2.0, 1.0]);
        assert!((p.velocity(1)[0] - 2.0 * w_half).abs() < 1e-6);
        assert_eq!(p.velocity(1)[1], 1.0);
        assert!(p.velocity(2)[0].abs() < 1e-6, "on the rim the weight is 0");
        assert_eq!(p.velocity(3), [0.0, 1.0]);
    }
}
