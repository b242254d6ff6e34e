//! Putting liquid in and taking it out: filling shapes with jittered particles (Bridson, *Fluid
//! Simulation for Computer Graphics*), obstacles, emitters and sinks, and the reseeding band that keeps
//! every cell of the liquid between a lower and an upper particle count (Eng's PIC/FLIP).

use super::{FlipSim, Inflow, Obstacle, Sink};
use crate::grid::to_dvec3;
use crate::rng::SplitMix64;
use crate::shape::Shape;

/// A deterministic uniform number in [0, 1) from a seed and three counters.
fn hash01(seed: u64, a: u64, b: u64, c: u64) -> f64 {
    let mut g = SplitMix64::new(
        seed ^ a.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ c.wrapping_mul(0x1656_67b1_9e37_79f9),
    );
    g.next_u64();
    g.next_f64()
}

impl<const D: usize> FlipSim<D> {
    /// Fills `shape` with liquid at velocity `velocity` (m/s): particles seeded `seeds_per_axis`ᴰ per cell,
    /// jittered from the scene seed, wherever they fall inside the shape and outside every obstacle.
    /// Particles already inside the shape are replaced. Returns the number of particles seeded: 0 when the
    /// shape holds no seed position of the grid.
    pub fn fill(&mut self, shape: &Shape, velocity: [f64; D]) -> usize {
        self.fill_with(shape, |_| velocity)
    }

    /// As [`fill`](Self::fill), with the velocity (m/s) a function of the position (m).
    pub fn fill_with(&mut self, shape: &Shape, velocity: impl Fn([f64; D]) -> [f64; D]) -> usize {
        self.bring_back();
        // Replace: drop the particles already inside.
        for i in 0..self.particles.len() {
            if shape.sdf(to_dvec3(self.particles.position(i))) <= 0.0 {
                self.particles.pos[0][i] = f32::NAN;
            }
        }
        let dims = self.cfg.resolution;
        let n: usize = dims.iter().product();
        let m = self.cfg.params.seeds_per_axis;
        let per_cell = m.pow(D as u32);
        let apic = self.apic();
        let shapes: Vec<Shape> = self
            .obstacles
            .iter()
            .map(|o| o.shape_at(self.time))
            .collect();
        let mut seeded = 0;
        for cell in 0..n {
            let c = crate::grid::coords_of(dims, cell);
            for j in 0..per_cell {
                let x = self.seed_position(c, j, m, 0);
                let q = to_dvec3(x);
                if shape.sdf(q) <= 0.0 && shapes.iter().all(|s| s.sdf(q) > 0.0) {
                    self.particles.push(x, velocity(x), apic);
                    seeded += 1;
                }
            }
        }
        self.resort();
        self.max_speed = self.measure().max_speed;
        seeded
    }

    /// Position (m) of seed `j` of cell `c` on an `m`ᴰ lattice, jittered by the scene seed and `salt`.
    fn seed_position(&self, c: [usize; D], j: usize, m: usize, salt: u64) -> [f64; D] {
        let h = self.cfg.cell_size;
        let jitter = self.cfg.params.jitter;
        let cell = self.count.index(c) as u64;
        let mut rest = j;
        std::array::from_fn(|k| {
            let lattice = rest % m;
            rest /= m;
            let r = hash01(self.cfg.seed, cell, (j * D + k) as u64, salt);
            let t = (lattice as f64 + 0.5 + jitter * (r - 0.5)) / m as f64;
            (c[k] as f64 + t) * h
        })
    }

    /// Adds an obstacle (static, or moving with a prescribed velocity); particles inside it are removed.
    pub fn add_obstacle(&mut self, obstacle: Obstacle<D>) {
        let s = obstacle.shape_at(self.time);
        self.bring_back();
        for i in 0..self.particles.len() {
            if s.sdf(to_dvec3(self.particles.position(i))) <= 0.0 {
                self.particles.pos[0][i] = f32::NAN;
            }
        }
        self.obstacles.push(obstacle);
        self.resort();
    }

    /// Adds an inflow (a scene's `[[emitter]]`).
    pub fn add_inflow(&mut self, emitter: Inflow<D>) {
        let mut cells = Vec::new();
        let (o, h) = (self.count.origin, self.count.spacing);
        for i in 0..self.count.len() {
            let c = self.count.coords(i);
            let x: [f64; D] = std::array::from_fn(|k| o[k] + (c[k] as f64 + 0.5) * h);
            if emitter.shape.sdf(to_dvec3(x)) <= 0.0 {
                cells.push(c);
            }
        }
        self.emitters.push((emitter, cells));
    }

    /// Adds a sink.
    pub fn add_sink(&mut self, sink: Sink) {
        self.sinks.push(sink);
    }

    /// Drains, emitters and the reseeding band, on freshly sorted particles. Returns whether particles were
    /// added or removed (the caller then sorts again).
    pub(super) fn reseed(&mut self, dt: f64) -> bool {
        let mut changed = false;
        let apic = self.apic();
        // Drains: remove with probability rate·dt, decided per particle by a hash of its sorted index.
        for (si, s) in self.sinks.iter().enumerate() {
            let prob = s.rate * dt;
            for i in 0..self.particles.len() {
                let x = self.particles.position(i);
                if x[0].is_finite()
                    && s.shape.sdf(to_dvec3(x)) <= 0.0
                    && hash01(self.cfg.seed, self.steps, i as u64, 1000 + si as u64) < prob
                {
                    self.particles.pos[0][i] = f32::NAN;
                    changed = true;
                }
            }
        }
        let m = self.cfg.params.seeds_per_axis;
        let per_cell = m.pow(D as u32);
        // Emitters: top their cells up to the seeding count and set the velocity of what is inside.
        for e in 0..self.emitters.len() {
            let (emitter, cells) = &self.emitters[e];
            if !(self.time >= emitter.active.0 && self.time < emitter.active.1) {
                continue;
            }
            let mut add = Vec::new();
            for &c in cells {
                if self.solid_id[c] != 0 {
                    continue;
                }
                let members: Vec<usize> = self.bins.cell_particles(c).collect();
                for &i in &members {
                    for k in 0..D {
                        self.particles.vel[k][i] = emitter.velocity[k] as f32;
                    }
                }
                for j in members.len()..per_cell {
                    add.push((
                        self.seed_position(c, j, m, 1 + self.steps),
                        emitter.velocity,
                    ));
                }
            }
            for (x, v) in add {
                self.particles.push(x, v, apic);
                changed = true;
            }
        }
        // Reseeding band.
        let (lo, hi) = (self.cfg.params.min_per_cell, self.cfg.params.max_per_cell);
        if lo > 0 || hi > 0 {
            let dims = self.cfg.resolution;
            let strides = self.count.strides();
            let mut add = Vec::new();
            for ci in 0..self.count.len() {
                let n = self.count.data[ci] as usize;
                let c = self.count.coords(ci);
                if hi > 0 && n > hi {
                    let extra: Vec<usize> = self.bins.cell_particles(c).skip(hi).collect();
                    for i in extra {
                        self.particles.pos[0][i] = f32::NAN;
                    }
                    changed = true;
                } else if n < lo && n > 0 && self.solid_id.data[ci] == 0 {
                    // Only cells deep in the liquid: every neighbour holds particles or is solid.
                    let interior = (0..D).all(|k| {
                        c[k] > 0
                            && c[k] + 1 < dims[k]
                            && [ci - strides[k], ci + strides[k]]
                                .iter()
                                .all(|&j| self.count.data[j] > 0 || self.solid_id.data[j] != 0)
                    });
                    if interior {
                        for j in n..lo {
                            let x = self.seed_position(c, j, m, 1 + self.steps);
                            add.push((x, self.u.sample(x)));
                        }
                    }
                }
            }
            for (x, v) in add {
                self.particles.push(x, v, apic);
                changed = true;
            }
        }
        changed
    }
}
