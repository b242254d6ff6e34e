//! Diagnostics of a FLIP step: the particles' energy, momentum and angular momentum, the liquid volume
//! from the fill fraction and from the particle counts, the volume inside the Zhu–Bridson surface, and a
//! checksum of the particle state.

use super::particles::Tally;
use super::{Boundary, FlipSim};
use crate::grid::{to_dvec3, CellFlag};
use crate::par;

/// What [`FlipSim::cell_tally`] finds in one pass over the cells.
#[derive(Clone, Copy)]
pub(super) struct CellTally {
    /// Cells marked fluid.
    pub(super) fluid_cells: usize,
    /// [`FlipSim::fluid_volume`] (m³, m² in 2D).
    pub(super) fluid_volume: f64,
    /// [`FlipSim::count_volume`] (m³, m² in 2D).
    pub(super) count_volume: f64,
    /// The largest |∇·u| after projection over the fluid cells (1/s), −∞ for none.
    pub(super) max_divergence: f64,
}

/// The two cell quantities of a step that a particle device reduces over its own copy of the grid
/// ([`TransferDevice::grid_tally`](super::TransferDevice::grid_tally)), with the bits of
/// [`FlipSim::cell_tally`]'s: the cells in blocks of [`GridTally::BLOCK`], each block's sum a pairwise tree
/// ([`GridTally::block_sum`], as a GPU workgroup adds), the blocks of each chunk of [`par::REDUCE_CHUNK`]
/// cells in order, then the chunks in order; the largest value in any order (it has one result).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridTally {
    /// `Σ min(f, 1)` of the fill fraction `f` over the cells (without obstacles no cell is solid).
    pub fill: f64,
    /// The largest |∇·u| over the fluid cells (0 on the others) of the projected velocity (1/s), NaN when
    /// one is not a number, −∞ for no cell.
    pub max_divergence: f64,
}

impl GridTally {
    /// Cells per block of the sums.
    pub const BLOCK: usize = 256;

    /// The sum of a block's values (0 past the grid's end): `v[i] += v[i + s]` for `i < s`, with `s` from
    /// half the block down to 1, then `v[0]`.
    pub fn block_sum(mut v: [f64; Self::BLOCK]) -> f64 {
        let mut s = Self::BLOCK / 2;
        while s > 0 {
            for i in 0..s {
                v[i] += v[i + s];
            }
            s /= 2;
        }
        v[0]
    }

    /// The tally of a grid from its blocks' sums of `min(f, 1)` and largest |∇·u|, in block order.
    pub fn fold(
        fill: impl IntoIterator<Item = f64>,
        divergence: impl IntoIterator<Item = f64>,
    ) -> Self {
        let per_chunk = par::REDUCE_CHUNK / Self::BLOCK;
        let mut chunk = 0.0;
        let (mut total, mut blocks) = (0.0, 0_usize);
        for f in fill {
            chunk += f;
            blocks += 1;
            if blocks.is_multiple_of(per_chunk) {
                total += chunk;
                chunk = 0.0;
            }
        }
        if !blocks.is_multiple_of(per_chunk) {
            total += chunk;
        }
        Self {
            fill: total,
            max_divergence: divergence.into_iter().fold(f64::NEG_INFINITY, par::nan_max),
        }
    }
}

const _: () = assert!(par::REDUCE_CHUNK.is_multiple_of(GridTally::BLOCK));

/// What [`FlipSim::measure`] finds in one pass over the particles.
pub(crate) struct Measured<const D: usize> {
    /// Kinetic energy (J, or J/m in 2D).
    pub(super) kinetic: f64,
    /// Momentum (kg·m/s, or per metre of depth in 2D).
    pub(super) momentum: [f64; D],
    /// Largest speed (m/s).
    pub(crate) max_speed: f64,
    /// Whether a velocity, or with closed walls a position, is not finite.
    pub(super) broken: bool,
}

impl<const D: usize> FlipSim<D> {
    /// Total particle kinetic energy, momentum and largest speed, and whether a particle holds a non-finite
    /// velocity (or, with closed walls, position), in one pass over the particles ([`Tally::over`]); the
    /// largest speed is the square root of the largest squared speed, the same bits as the largest root since
    /// rounding is monotonic.
    pub(crate) fn measure(&self) -> Measured<D> {
        let closed = self.cfg.boundary == Boundary::Closed;
        self.measured(&Tally::over(&self.particles, closed), self.particles.len())
    }

    /// The diagnostics of tally `t` of all `n` particles.
    pub(super) fn measured(&self, t: &Tally<D>, n: usize) -> Measured<D> {
        let mass = self.particle_mass;
        Measured {
            kinetic: 0.5 * mass * t.squares,
            momentum: t.sum.map(|x| mass * x),
            max_speed: if n == 0 { 0.0 } else { t.max_square().sqrt() },
            broken: t.broken(),
        }
    }

    /// Total momentum of the particles (kg·m/s, per metre of depth in 2D).
    pub fn momentum(&self) -> [f64; D] {
        self.measure().momentum
    }

    /// Total kinetic energy of the particles (J, per metre of depth in 2D).
    pub fn kinetic_energy(&self) -> f64 {
        self.measure().kinetic
    }

    /// Angular momentum about `center` (m) of the particles, z component in 2D, `[x, y, z]` in 3D
    /// (kg·m²/s). APIC's affine part is included: a particle's velocity field `v + C (x − x_p)` over its
    /// volume adds `m (C_yx − C_xy) h²/(4·12)`-order terms, which are small and left out; this is the
    /// point-mass angular momentum `Σ m (x − c) × v`.
    pub fn angular_momentum(&self, center: [f64; D]) -> [f64; 3] {
        let p = &self.particles;
        let m = self.particle_mass;
        let l = par::sum_n::<3>(p.len(), |i| {
            let x = to_dvec3(p.position(i)) - to_dvec3(center);
            let v = to_dvec3(p.velocity(i));
            x.cross(v).to_array()
        });
        l.map(|x| x * m)
    }

    /// Liquid volume (m³, m² in 2D) from the smoothed particle density: `Σ_cells min(1, φ_c) h^D` with `φ_c`
    /// the fill fraction of cell `c` (the particle-to-grid weights over the seeding count; field `fill`).
    /// Particles that bunch up (a FLIP liquid's way of losing volume) count for less. Unlike
    /// [`count_volume`](Self::count_volume) it moves continuously with the particles, so the random
    /// positions of jittered particles do not read as a loss of volume (docs/flip.md, "Volume").
    pub fn fluid_volume(&self) -> f64 {
        self.cell_tally(None).fluid_volume
    }

    /// Liquid volume (m³, m² in 2D) from the particle count per cell: `Σ_cells min(1, n_c / n₀) h^D` with
    /// `n_c` its particles and `n₀` the seeding count. The count jumps by one whenever a particle crosses a
    /// cell face, and the cap keeps only the deficits, so a liquid whose particles merely move reads about
    /// 7% low (docs/flip.md, "Volume"); kept to show that.
    pub fn count_volume(&self) -> f64 {
        self.cell_tally(None).count_volume
    }

    /// The step's cell quantities in one pass over the cells: the sums and the largest value add
    /// sequentially within each chunk of [`par::REDUCE_CHUNK`] and then chunk by chunk, as [`par::sum`] and
    /// [`par::max`] do, but the fill fractions in blocks of [`GridTally::BLOCK`] within each chunk, the order
    /// in which a device adds them. With `device`, the fill fractions' sum and the largest divergence are
    /// that device's tally of its own copy of the grid (the host's copy lags).
    pub(super) fn cell_tally(&self, device: Option<GridTally>) -> CellTally {
        let n0 = self.cfg.params.seeds_per_axis.pow(D as u32) as f64;
        let (fill, count, flags, div) = (&self.fill, &self.count, &self.flags, &self.div_after);
        let identity = CellTally {
            fluid_cells: 0,
            fluid_volume: 0.0,
            count_volume: 0.0,
            max_divergence: f64::NEG_INFINITY,
        };
        let then = |a: CellTally, b: CellTally| CellTally {
            fluid_cells: a.fluid_cells + b.fluid_cells,
            fluid_volume: a.fluid_volume + b.fluid_volume,
            count_volume: a.count_volume + b.count_volume,
            max_divergence: par::nan_max(a.max_divergence, b.max_divergence),
        };
        let t = par::reduce(
            fill.len(),
            par::REDUCE_CHUNK,
            identity,
            |r| {
                let mut t = identity;
                for i in r.clone() {
                    let f = flags.data[i];
                    // Solid cells add nothing (the sums are never −0, so skipping them keeps the bits).
                    if f != CellFlag::Solid {
                        t.count_volume += (count.data[i] as f64 / n0).min(1.0);
                    }
                    t.fluid_cells += (f == CellFlag::Fluid) as usize;
                }
                if device.is_some() {
                    return t;
                }
                for i in r.clone() {
                    let d = if flags.data[i] == CellFlag::Fluid {
                        div.data[i].abs()
                    } else {
                        0.0
                    };
                    t.max_divergence = par::nan_max(t.max_divergence, d);
                }
                for block in r.clone().step_by(GridTally::BLOCK) {
                    let mut v = [0.0; GridTally::BLOCK];
                    for (v, i) in v.iter_mut().zip(block..r.end) {
                        if flags.data[i] != CellFlag::Solid {
                            *v = fill.data[i].min(1.0);
                        }
                    }
                    t.fluid_volume += GridTally::block_sum(v);
                }
                t
            },
            then,
        );
        let (fill, max_divergence) = match device {
            Some(d) => (d.fill, d.max_divergence),
            None => (t.fluid_volume, t.max_divergence),
        };
        let cell = self.cfg.cell_size.powi(D as i32);
        CellTally {
            max_divergence,
            fluid_volume: fill * cell,
            count_volume: t.count_volume * cell,
            ..t
        }
    }

    /// Volume (m³, m² in 2D) inside the Zhu–Bridson surface: the cells whose centre has a negative signed
    /// distance (see the `surface` field). Costs a surface reconstruction.
    pub fn surface_volume(&self) -> f64 {
        let mut g = self.pressure.clone();
        self.surface_distance(&mut g);
        let n = par::sum(g.len(), |i| (g.data[i] < 0.0) as u8 as f64);
        n * self.cfg.cell_size.powi(D as i32)
    }

    /// A 64-bit FNV-1a hash of the exact bits of the particle state: equal hashes mean (with overwhelming
    /// probability) bit-identical states.
    pub fn checksum(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let p = &self.particles;
        for a in p.pos.iter().chain(&p.vel).chain(p.affine.iter().flatten()) {
            for x in a {
                h ^= x.to_bits() as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flip::FlipConfig;
    use crate::shape::Shape;

    /// A 2D sim whose particles carry varied velocities: enough of them for several reduction chunks.
    fn sim_with_velocities(boundary: Boundary) -> FlipSim<2> {
        let cfg = FlipConfig::<2> {
            resolution: [128, 128],
            cell_size: 1.0 / 128.0,
            boundary,
            ..Default::default()
        };
        let mut sim = FlipSim::new(cfg).expect("valid config");
        sim.fill_with(&Shape::box2([0.0, 0.0], [1.0, 0.8]), |x| {
            [(7.0 * x[1]).sin(), x[0] * x[0] - 0.3]
        });
        assert!(sim.particles.len() > 2 * par::REDUCE_CHUNK);
        sim
    }

    #[test]
    fn one_pass_measure_matches_its_definitions() {
        let sim = sim_with_velocities(Boundary::Closed);
        let p = &sim.particles;
        let m = sim.particle_mass;
        let mut kinetic = 0.0;
        let mut momentum = [0.0; 2];
        let mut max_speed: f64 = 0.0;
        for i in 0..p.len() {
            let v = p.velocity(i);
            let v2 = v[0] * v[0] + v[1] * v[1];
            kinetic += 0.5 * m * v2;
            momentum[0] += m * v[0];
            momentum[1] += m * v[1];
            max_speed = max_speed.max(v2.sqrt());
        }
        let got = sim.measure();
        // The reduction adds in chunks, the loop above in one run: the same sums up to rounding (1e-12
        // relative over ~5·10⁴ terms of one sign for the energy; the momentum sums are O(1) with cancellation,
        // so they are compared against the total mass times the largest speed).
        assert!((got.kinetic - kinetic).abs() <= 1e-12 * kinetic);
        let scale = m * p.len() as f64 * max_speed;
        for k in 0..2 {
            assert!((got.momentum[k] - momentum[k]).abs() <= 1e-12 * scale);
        }
        // The largest speed is one particle's: exactly equal.
        assert_eq!(got.max_speed, max_speed);
        assert!(!got.broken);
    }

    /// A device's blocks, folded, give the host's cell tally bit for bit: a grid of several chunks and a
    /// partial one (128² = 16384 cells is one chunk; 130 × 129 adds a partial chunk, and a partial block),
    /// fill fractions over and under 1, a fluid region's divergences.
    #[test]
    fn a_devices_blocks_fold_to_the_hosts_tally() {
        let cfg = FlipConfig::<2> {
            resolution: [130, 129],
            cell_size: 1.0 / 130.0,
            ..Default::default()
        };
        let mut sim = FlipSim::new(cfg).expect("valid config");
        let n = sim.fill.len();
        assert!(n > par::REDUCE_CHUNK && !n.is_multiple_of(GridTally::BLOCK));
        for i in 0..n {
            let x = i as f64;
            sim.fill.data[i] = 1.3 * (0.37 * x).sin().abs();
            sim.div_after.data[i] = (0.11 * x).cos() * 1e-3;
            sim.flags.data[i] = if i % 7 < 4 {
                CellFlag::Fluid
            } else {
                CellFlag::Air
            };
        }
        let blocks: Vec<_> = (0..n).step_by(GridTally::BLOCK).collect();
        let end = |b: usize| (b + GridTally::BLOCK).min(n);
        let fill = blocks.iter().map(|&b| {
            let mut v = [0.0; GridTally::BLOCK];
            for i in b..end(b) {
                v[i - b] = sim.fill.data[i].min(1.0);
            }
            GridTally::block_sum(v)
        });
        let divergence = blocks.iter().map(|&b| {
            (b..end(b))
                .map(|i| match sim.flags.data[i] {
                    CellFlag::Fluid => sim.div_after.data[i].abs(),
                    _ => 0.0,
                })
                .fold(f64::NEG_INFINITY, f64::max)
        });
        let device = GridTally::fold(fill, divergence);
        let host = sim.cell_tally(None);
        let cell = sim.cfg.cell_size.powi(2);
        assert_eq!(host.fluid_volume.to_bits(), (device.fill * cell).to_bits());
        assert_eq!(
            host.max_divergence.to_bits(),
            device.max_divergence.to_bits()
        );
        let taken = sim.cell_tally(Some(device));
        assert_eq!(taken.fluid_volume.to_bits(), host.fluid_volume.to_bits());
        assert_eq!(
            (taken.fluid_cells, taken.count_volume),
            (host.fluid_cells, host.count_volume)
        );
        // A block whose divergence is not a number makes the largest one NaN, as on the host.
        let nan = GridTally::fold([1.0], [0.5, f64::NAN, 0.25]);
        assert!(nan.max_divergence.is_nan());
        // The tree adds pairs: 2⁵³ + 1 + 1 is 2⁵³ in sequence but 2⁵³ + 2 in pairs.
        let mut v = [0.0; GridTally::BLOCK];
        (v[0], v[1], v[129]) = (2f64.powi(53), 1.0, 1.0);
        assert_eq!(GridTally::block_sum(v), 2f64.powi(53) + 2.0);
    }

    #[test]
    fn one_pass_measure_flags_non_finite_particles() {
        // A non-finite velocity is a blow-up; it also poisons the largest speed.
        let mut sim = sim_with_velocities(Boundary::Closed);
        let last = sim.particles.len() - 1;
        sim.particles.vel[1][last] = f32::INFINITY;
        let got = sim.measure();
        assert!(got.broken);
        assert!(!got.kinetic.is_finite());

        let mut sim = sim_with_velocities(Boundary::Closed);
        sim.particles.vel[0][5] = f32::NAN;
        assert!(sim.measure().max_speed.is_nan());

        // A non-finite position is a blow-up behind closed walls; through open ones it is a particle that
        // left the domain (dropped at the next sort).
        for (boundary, broken) in [(Boundary::Closed, true), (Boundary::Open, false)] {
            let mut sim = sim_with_velocities(boundary);
            sim.particles.pos[0][last / 2] = f32::NAN;
            let got = sim.measure();
            assert_eq!(got.broken, broken, "{boundary:?}");
            assert!(got.kinetic.is_finite());
        }
    }
}
