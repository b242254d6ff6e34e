//! The ray marcher on the CPU: one function per step of the picture, the same steps and constants as
//! `render.wgsl`, rows of pixels in parallel.

use image::RgbImage;
use rayon::prelude::*;

use crate::camera::{add, dot, normalize, scale, sub, View};
use crate::prepared::Prepared;
use crate::stage::{
    Params, BRICK, FLOOR, HAS_LIQUID, HAS_SMOKE, HAS_SOLID, LIQUID_CELLS, LIQUID_DISTANCE,
    SMOKE_CELLS, SOLID_ALBEDO, SOLID_DISTANCE,
};

/// The constants of the picture, shared with the WGSL kernel through [`wgsl_constants`].
pub mod look {
    /// March step, in cells, where a surface may be.
    pub const STEP: f32 = 0.5;
    /// Fraction of a distance field's value a ray may step at once (its trilinear interpolation and a
    /// particle level set are distances only roughly).
    pub const DISTANCE_TRUST: f32 = 0.8;
    /// March step, in cells, through smoke alone (no surface to find: trilinear smoke varies over a cell).
    pub const SMOKE_STEP: f32 = 1.0;
    /// Bisection steps that place a surface hit (to 1/64 of a step).
    pub const BISECTIONS: u32 = 6;
    /// Light from everywhere (sky and bounce), as a fraction of the sun's.
    pub const AMBIENT: f32 = 0.22;
    /// The sun's strength on a surface facing it.
    pub const SUN: f32 = 0.9;
    /// Strength and sharpness (Blinn–Phong exponent) of the liquid's highlight.
    pub const LIQUID_SPECULAR: f32 = 0.45;
    /// Strength of the obstacles' highlight.
    pub const SOLID_SPECULAR: f32 = 0.08;
    /// Blinn–Phong exponent of the highlights.
    pub const SHININESS: f32 = 80.0;
    /// Strength of the surroundings' reflection at grazing angles (Schlick's Fresnel term).
    pub const RIM: f32 = 0.6;
    /// The surroundings a surface reflects (linear RGB): a dim studio.
    pub const REFLECTION: [f32; 3] = [0.16, 0.18, 0.22];
    /// Smoke's light from everywhere and from the sun.
    pub const SMOKE_AMBIENT: f32 = 0.3;
    /// Smoke's single scattering of the sun.
    pub const SMOKE_SUN: f32 = 1.1;
    /// Marching stops when less than this fraction of the light behind still shows.
    pub const T_MIN: f32 = 0.004;
    /// Cells along the normal from a surface to where its shadow is looked up (out of its own shade).
    pub const SHADOW_OFFSET: f32 = 1.5;
    /// The sky: near the horizon and overhead (linear RGB).
    pub const SKY_LOW: [f32; 3] = [0.030, 0.034, 0.042];
    /// The sky overhead.
    pub const SKY_HIGH: [f32; 3] = [0.010, 0.012, 0.020];
    /// The floor's two tiles.
    pub const FLOOR_LIGHT: f32 = 0.10;
    /// The floor's darker tile.
    pub const FLOOR_DARK: f32 = 0.075;
    /// The floor fades into the sky beyond this many half diagonals of the domain.
    pub const FLOOR_FADE: f32 = 3.0;
    /// The domain's edges: colour and opacity.
    pub const EDGE: [f32; 3] = [0.55, 0.58, 0.62];
    /// Opacity of the edges.
    pub const EDGE_ALPHA: f32 = 0.5;
    /// Half width of the edges, in pixels.
    pub const EDGE_WIDTH: f32 = 0.9;
}

use look::*;

/// The constants above as WGSL declarations, so the kernel and this file cannot disagree.
pub fn wgsl_constants() -> String {
    let v3 = |c: [f32; 3]| format!("vec3<f32>({:?}, {:?}, {:?})", c[0], c[1], c[2]);
    let mut s = String::new();
    for (name, value) in [
        ("STEP", STEP),
        ("SMOKE_STEP", SMOKE_STEP),
        ("DISTANCE_TRUST", DISTANCE_TRUST),
        ("AMBIENT", AMBIENT),
        ("SUN", SUN),
        ("LIQUID_SPECULAR", LIQUID_SPECULAR),
        ("SOLID_SPECULAR", SOLID_SPECULAR),
        ("SHININESS", SHININESS),
        ("RIM", RIM),
        ("SMOKE_AMBIENT", SMOKE_AMBIENT),
        ("SMOKE_SUN", SMOKE_SUN),
        ("T_MIN", T_MIN),
        ("SHADOW_OFFSET", SHADOW_OFFSET),
        ("FLOOR_LIGHT", FLOOR_LIGHT),
        ("FLOOR_DARK", FLOOR_DARK),
        ("FLOOR_FADE", FLOOR_FADE),
        ("EDGE_ALPHA", EDGE_ALPHA),
        ("EDGE_WIDTH", EDGE_WIDTH),
    ] {
        s += &format!("const {name}: f32 = {value:?};\n");
    }
    for (name, value) in [
        ("SKY_LOW", SKY_LOW),
        ("SKY_HIGH", SKY_HIGH),
        ("REFLECTION", REFLECTION),
        ("EDGE", EDGE),
        ("SOLID_ALBEDO", SOLID_ALBEDO),
    ] {
        s += &format!("const {name}: vec3<f32> = {};\n", v3(value));
    }
    for (name, value) in [
        ("BISECTIONS", BISECTIONS),
        ("BRICK", BRICK as u32),
        ("HAS_LIQUID", HAS_LIQUID),
        ("HAS_SOLID", HAS_SOLID),
        ("HAS_SMOKE", HAS_SMOKE),
        ("LIQUID_CELLS", LIQUID_CELLS),
        ("SMOKE_CELLS", SMOKE_CELLS),
        ("FLOOR", FLOOR),
        ("LIQUID_DISTANCE", LIQUID_DISTANCE),
        ("SOLID_DISTANCE", SOLID_DISTANCE),
    ] {
        s += &format!("const {name}: u32 = {value}u;\n");
    }
    s
}

/// Renders `prepared` seen through `view` on the CPU.
pub fn render_cpu(prepared: &Prepared, view: &View) -> RgbImage {
    let scene = Marcher {
        p: prepared.params_for(view),
        s: prepared,
    };
    let (w, h) = (view.width as usize, view.height as usize);
    let lut = srgb_table();
    let mut out = vec![0u8; w * h * 3];
    out.par_chunks_mut(w * 3).enumerate().for_each(|(y, row)| {
        for x in 0..w {
            let c = scene.pixel(x as u32, y as u32);
            for k in 0..3 {
                row[3 * x + k] = lut[(c[k].clamp(0.0, 1.0) * SRGB_STEPS as f32 + 0.5) as usize];
            }
        }
    });
    RgbImage::from_raw(view.width, view.height, out).expect("width × height × 3 bytes")
}

/// Steps of the linear-to-sRGB table: fine enough that each step changes the 8-bit code by at most one.
const SRGB_STEPS: usize = 8192;

/// [`srgb8`] of `k / SRGB_STEPS` for k = 0 … SRGB_STEPS.
fn srgb_table() -> Vec<u8> {
    (0..=SRGB_STEPS)
        .map(|k| srgb8(k as f32 / SRGB_STEPS as f32))
        .collect()
}

/// Linear (0–1) to sRGB-encoded 8 bit.
pub fn srgb8(c: f32) -> u8 {
    let c = c.clamp(0.0, 1.0);
    let s = if c <= 0.003_130_8 {
        12.92 * c
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    };
    (s * 255.0 + 0.5) as u8
}

/// The two surfaces.
#[derive(Clone, Copy)]
enum Kind {
    Liquid,
    Solid,
}

struct Marcher<'a> {
    p: Params,
    s: &'a Prepared,
}

fn xyz(v: [f32; 4]) -> [f32; 3] {
    [v[0], v[1], v[2]]
}

/// Entry and exit distances of the ray `o + t d` through the box `lo`–`hi` (entry > exit: a miss).
fn slab(o: [f32; 3], d: [f32; 3], lo: [f32; 3], hi: [f32; 3]) -> (f32, f32) {
    let mut t0 = f32::MIN;
    let mut t1 = f32::MAX;
    for a in 0..3 {
        let inv = 1.0 / if d[a] == 0.0 { 1e-30 } else { d[a] };
        let ta = (lo[a] - o[a]) * inv;
        let tb = (hi[a] - o[a]) * inv;
        t0 = t0.max(ta.min(tb));
        t1 = t1.min(ta.max(tb));
    }
    (t0, t1)
}

/// ⌊v⌋ as an integer for |v| < 2³¹, without a call into libm (baseline x86-64 has no rounding instruction).
fn floor_i(v: f32) -> i32 {
    let i = v as i32;
    if (i as f32) > v {
        i - 1
    } else {
        i
    }
}

/// Trilinear interpolation of the corners of a cell (x fastest) at fractions `f`: along x, then y, then z.
fn trilinear(v: [f32; 8], f: [f32; 3]) -> f32 {
    let lerp = |a: f32, b: f32, t: f32| a * (1.0 - t) + b * t;
    let x0 = lerp(v[0], v[1], f[0]);
    let x1 = lerp(v[2], v[3], f[0]);
    let x2 = lerp(v[4], v[5], f[0]);
    let x3 = lerp(v[6], v[7], f[0]);
    lerp(lerp(x0, x1, f[1]), lerp(x2, x3, f[1]), f[2])
}

fn unpack(c: u32) -> [f32; 3] {
    [
        (c & 255) as f32 / 255.0,
        (c >> 8 & 255) as f32 / 255.0,
        (c >> 16 & 255) as f32 / 255.0,
    ]
}

fn mix3(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    std::array::from_fn(|i| a[i] + (b[i] - a[i]) * t)
}

impl Marcher<'_> {
    fn n(&self) -> [i32; 3] {
        [self.p.n[0] as i32, self.p.n[1] as i32, self.p.n[2] as i32]
    }

    fn h(&self) -> f32 {
        self.p.origin[3]
    }

    /// Cell coordinates of `p`: cell centres at integers.
    fn cell_coords(&self, p: [f32; 3]) -> [f32; 3] {
        let h = self.h();
        std::array::from_fn(|a| (p[a] - self.p.origin[a]) / h - 0.5)
    }

    /// Trilinear sample of `values` at cell coordinates `g`; cells beyond the grid hold `outside`.
    fn sample(&self, values: &[f32], g: [f32; 3], outside: f32) -> f32 {
        let n = self.n();
        let i = g.map(floor_i);
        let f: [f32; 3] = std::array::from_fn(|a| g[a] - i[a] as f32);
        let (sy, sz) = (n[0] as usize, (n[0] * n[1]) as usize);
        let corners = if (0..3).all(|a| i[a] >= 0 && i[a] + 1 < n[a]) {
            let base = (i[2] as usize * n[1] as usize + i[1] as usize) * sy + i[0] as usize;
            let at = |k: usize| values[base + k];
            [
                at(0),
                at(1),
                at(sy),
                at(sy + 1),
                at(sz),
                at(sz + 1),
                at(sz + sy),
                at(sz + sy + 1),
            ]
        } else {
            std::array::from_fn(|corner| {
                let c: [i32; 3] = std::array::from_fn(|a| i[a] + (corner as i32 >> a & 1));
                if (0..3).all(|a| c[a] >= 0 && c[a] < n[a]) {
                    values[((c[2] * n[1] + c[1]) * n[0] + c[0]) as usize]
                } else {
                    outside
                }
            })
        };
        trilinear(corners, f)
    }

    /// The eight cells (x fastest) and the fractions of a trilinear sample at `g`, clamped to the grid.
    fn clamped_corners(&self, g: [f32; 3]) -> ([usize; 8], [f32; 3]) {
        let n = self.n();
        let gc: [f32; 3] = std::array::from_fn(|a| g[a].clamp(0.0, (n[a] - 1) as f32));
        let i0 = gc.map(floor_i);
        let f: [f32; 3] = std::array::from_fn(|a| gc[a] - i0[a] as f32);
        let idx = std::array::from_fn(|corner| {
            let c: [i32; 3] =
                std::array::from_fn(|a| (i0[a] + (corner as i32 >> a & 1)).min(n[a] - 1));
            ((c[2] * n[1] + c[1]) * n[0] + c[0]) as usize
        });
        (idx, f)
    }

    /// Sunlight reaching `p` (0–1): the transmittance volume inside the grid, and beyond it the
    /// transmittance where the ray towards the sun enters the grid, or 1 where it misses it.
    fn light(&self, p: [f32; 3]) -> f32 {
        let n = self.n();
        let g = self.cell_coords(p);
        let inside = (0..3).all(|a| g[a] >= 0.0 && g[a] <= (n[a] - 1) as f32);
        let q = if inside {
            g
        } else {
            let h = self.h();
            let lo: [f32; 3] = std::array::from_fn(|a| self.p.origin[a] + 0.5 * h);
            let hi: [f32; 3] = std::array::from_fn(|a| self.p.origin[a] + (n[a] as f32 - 0.5) * h);
            let (te, tx) = slab(p, xyz(self.p.sun), lo, hi);
            if te > tx || tx < 0.0 {
                return 1.0;
            }
            self.cell_coords(add(p, scale(xyz(self.p.sun), te.max(0.0))))
        };
        let (idx, f) = self.clamped_corners(q);
        trilinear(idx.map(|i| self.s.shadow[i]), f)
    }

    /// The colour of packed per-cell colours at `g` (trilinear), or `uniform`.
    fn albedo(&self, packed: &[u32], per_cell: bool, uniform: [f32; 4], g: [f32; 3]) -> [f32; 3] {
        if !per_cell {
            return xyz(uniform);
        }
        let (idx, f) = self.clamped_corners(g);
        let colours = idx.map(|i| unpack(packed[i]));
        std::array::from_fn(|k| trilinear(colours.map(|c| c[k]), f))
    }

    fn sky(&self, d: [f32; 3]) -> [f32; 3] {
        let t = (0.5 + 0.5 * dot(d, xyz(self.p.up))).clamp(0.0, 1.0);
        mix3(SKY_LOW, SKY_HIGH, t)
    }

    /// The crossing of `surface`'s level between `lo` (outside) and `hi` (inside) along the ray `o + t d`,
    /// by bisection.
    fn bisect(&self, surface: Kind, o: [f32; 3], d: [f32; 3], lo: f32, hi: f32) -> f32 {
        let (values, level, outside) = self.layer(surface);
        let (mut lo, mut hi) = (lo, hi);
        for _ in 0..BISECTIONS {
            let mid = 0.5 * (lo + hi);
            if self.sample(values, self.cell_coords(add(o, scale(d, mid))), outside) > level {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        0.5 * (lo + hi)
    }

    /// A surface's field, level and value beyond the grid.
    fn layer(&self, surface: Kind) -> (&[f32], f32, f32) {
        match surface {
            Kind::Liquid => (&self.s.liquid, self.p.levels[0], self.p.levels[1]),
            Kind::Solid => (&self.s.solid, self.p.levels[2], self.p.levels[3]),
        }
    }

    /// Outward unit normal of a layer at `p`: minus its gradient (central differences, half a cell).
    fn normal(&self, values: &[f32], outside: f32, p: [f32; 3], d: [f32; 3]) -> [f32; 3] {
        let g = self.cell_coords(p);
        let mut grad = [0.0; 3];
        for a in 0..3 {
            let (mut gp, mut gm) = (g, g);
            gp[a] += 0.5;
            gm[a] -= 0.5;
            grad[a] = self.sample(values, gp, outside) - self.sample(values, gm, outside);
        }
        if dot(grad, grad) < 1e-20 {
            return scale(d, -1.0);
        }
        scale(normalize(grad), -1.0)
    }

    /// A lit surface point: ambient, the sun with its shadow, a highlight and the sky's reflection.
    fn shade(
        &self,
        p: [f32; 3],
        n: [f32; 3],
        d: [f32; 3],
        albedo: [f32; 3],
        specular: f32,
    ) -> [f32; 3] {
        let sun = xyz(self.p.sun);
        let lit = self.light(add(p, scale(n, SHADOW_OFFSET * self.h())));
        let diffuse = dot(n, sun).max(0.0);
        let half = normalize(sub(sun, d));
        let highlight = specular * dot(n, half).max(0.0).powf(SHININESS) * lit;
        let fresnel = (1.0 - dot(n, scale(d, -1.0)).max(0.0)).powi(5);
        std::array::from_fn(|k| {
            albedo[k] * (AMBIENT + SUN * diffuse * lit) + highlight + RIM * fresnel * REFLECTION[k]
        })
    }

    /// The floor at `p`: tiles of `sun.w` metres across the up axis, lit and shadowed, fading into the sky.
    fn floor(&self, p: [f32; 3], d: [f32; 3]) -> [f32; 3] {
        let up = xyz(self.p.up);
        let tile = self.p.sun[3];
        let k = (0..3)
            .max_by(|&a, &b| up[a].abs().total_cmp(&up[b].abs()))
            .unwrap_or(1);
        let (u, v) = (p[(k + 1) % 3], p[(k + 2) % 3]);
        let checker = ((u / tile).floor() + (v / tile).floor()).rem_euclid(2.0);
        let albedo = if checker < 0.5 {
            FLOOR_LIGHT
        } else {
            FLOOR_DARK
        };
        let lit = self.light(add(p, scale(up, 0.5 * self.h())));
        let c = albedo * (AMBIENT + SUN * dot(up, xyz(self.p.sun)).max(0.0) * lit);
        let r = sub(p, xyz(self.p.centre));
        let across = sub(r, scale(up, dot(r, up)));
        let fade = (-(dot(across, across)) / (FLOOR_FADE * self.p.centre[3]).powi(2)).exp();
        mix3(self.sky(d), [c; 3], fade)
    }

    /// How much of the domain's edges covers pixel (`x`, `y`) in front of camera depth `depth` (0–1): the
    /// edges are projected once per picture ([`Params::edges`]); a pixel within [`EDGE_WIDTH`] of one is
    /// covered, fading to its rim.
    fn edges(&self, x: u32, y: u32, depth: f32) -> f32 {
        let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
        let mut cover: f32 = 0.0;
        for e in self.p.edges.chunks_exact(2) {
            let (a, b) = (e[0], e[1]);
            if a[3] == 0.0 {
                continue;
            }
            let (ux, uy) = (b[0] - a[0], b[1] - a[1]);
            let t = (((px - a[0]) * ux + (py - a[1]) * uy) * b[3]).clamp(0.0, 1.0);
            let (gx, gy) = (px - a[0] - t * ux, py - a[1] - t * uy);
            let gap2 = gx * gx + gy * gy;
            if gap2 >= EDGE_WIDTH * EDGE_WIDTH {
                continue;
            }
            // Perspective-correct depth: 1/z is linear across the picture.
            let z = 1.0 / (a[2] + (b[2] - a[2]) * t);
            if z < depth {
                cover = cover.max(1.0 - gap2.sqrt() / EDGE_WIDTH);
            }
        }
        cover
    }

    fn ray(&self, x: u32, y: u32) -> [f32; 3] {
        let p = &self.p;
        let sx = (2.0 * (x as f32 + 0.5) / p.size[0] as f32 - 1.0) * p.forward[3] * p.right[3];
        let sy = (1.0 - 2.0 * (y as f32 + 0.5) / p.size[1] as f32) * p.forward[3];
        normalize(add(
            add(xyz(p.forward), scale(xyz(p.right), sx)),
            scale(xyz(p.cam_up), sy),
        ))
    }

    /// The colour of pixel (`x`, `y`), linear RGB.
    fn pixel(&self, x: u32, y: u32) -> [f32; 3] {
        let p = &self.p;
        let s = self.s;
        let o = xyz(p.eye);
        let d = self.ray(x, y);
        let h = self.h();
        let n = self.n();
        let flags = p.n[3];
        let up = xyz(p.up);
        let origin = xyz(p.origin);
        let grid_max: [f32; 3] = std::array::from_fn(|a| origin[a] + n[a] as f32 * h);

        let (t0, t1) = slab(o, d, origin.map(|v| v - h), grid_max.map(|v| v + h));
        let t0 = t0.max(0.0);
        let facing_down = dot(d, up);
        let mut t_floor = f32::INFINITY;
        if flags & FLOOR != 0 && facing_down < -1e-6 {
            let t = (p.up[3] - dot(o, up)) / facing_down;
            if t > 0.0 {
                t_floor = t;
            }
        }
        let t_end = t1.min(t_floor);

        let mut color = [0.0f32; 3];
        let mut transmit = 1.0f32;
        let mut hit_t = f32::INFINITY;
        let mut hit_kind = 0u32;
        if t0 < t_end && flags & (HAS_LIQUID | HAS_SOLID | HAS_SMOKE) != 0 {
            let dt = STEP * h;
            let smoke_dt = SMOKE_STEP * h;
            // The next step: as long as the contents of the last sample's brick allow.
            let mut next_dt = dt;
            let max_steps = 4 * ((n[0] + n[1] + n[2]) as u32 + 8) * (1.0 / STEP) as u32;
            let mut t = t0;
            for _ in 0..max_steps {
                if t >= t_end {
                    break;
                }
                let t_next = (t + next_dt).min(t_end);
                let q = add(o, scale(d, t_next));
                let c: [f32; 3] = std::array::from_fn(|a| (q[a] - origin[a]) / h);
                let in_grid = (0..3).all(|a| c[a] >= 0.0 && c[a] < n[a] as f32);
                let mut here = flags & (HAS_LIQUID | HAS_SOLID | HAS_SMOKE);
                if in_grid {
                    let b: [u32; 3] = std::array::from_fn(|a| c[a] as u32 / BRICK as u32);
                    let brick =
                        s.bricks[((b[2] * p.bricks[1] + b[1]) * p.bricks[0] + b[0]) as usize];
                    here = brick & 255;
                    if here == 0 {
                        // Every brick within `empty − 1` of this one is empty too: jump out of that cube.
                        let empty = brick >> 8;
                        let lo: [f32; 3] = std::array::from_fn(|a| {
                            origin[a] + (b[a].saturating_sub(empty - 1) * BRICK as u32) as f32 * h
                        });
                        let hi: [f32; 3] = std::array::from_fn(|a| {
                            (origin[a] + ((b[a] + empty) * BRICK as u32) as f32 * h)
                                .min(grid_max[a])
                        });
                        let (_, exit) = slab(o, d, lo, hi);
                        t = exit.max(t_next);
                        next_dt = dt;
                        continue;
                    }
                }
                let g = self.cell_coords(q);
                // Through smoke alone a cell per step; near a surface half a cell, or for a distance field
                // most of the distance to it.
                next_dt = if here & (HAS_LIQUID | HAS_SOLID) == 0 {
                    smoke_dt
                } else if here & HAS_SMOKE != 0 {
                    dt
                } else {
                    f32::INFINITY
                };
                if here & HAS_LIQUID != 0 {
                    let v = self.sample(&s.liquid, g, p.levels[1]);
                    if v > p.levels[0] {
                        hit_t = self.bisect(Kind::Liquid, o, d, t, t_next);
                        hit_kind = HAS_LIQUID;
                    }
                    next_dt = next_dt.min(if flags & LIQUID_DISTANCE != 0 {
                        (DISTANCE_TRUST * (p.levels[0] - v)).max(dt)
                    } else {
                        dt
                    });
                }
                if here & HAS_SOLID != 0 {
                    let v = self.sample(&s.solid, g, p.levels[3]);
                    if v > p.levels[2] {
                        let ts = self.bisect(Kind::Solid, o, d, t, t_next);
                        if ts < hit_t {
                            hit_t = ts;
                            hit_kind = HAS_SOLID;
                        }
                    }
                    next_dt = next_dt.min(if flags & SOLID_DISTANCE != 0 {
                        (DISTANCE_TRUST * (p.levels[2] - v)).max(dt)
                    } else {
                        dt
                    });
                }
                if here & HAS_SMOKE != 0 {
                    let end = t_next.min(hit_t);
                    let len = end - t;
                    if len > 0.0 {
                        let m = add(o, scale(d, 0.5 * (t + end)));
                        let gm = self.cell_coords(m);
                        let sigma = self.sample(&s.smoke, gm, 0.0);
                        if sigma > 0.0 {
                            let alpha = 1.0 - (-sigma * len).exp();
                            let albedo = self.albedo(
                                &s.smoke_albedo,
                                flags & SMOKE_CELLS != 0,
                                p.smoke_albedo,
                                gm,
                            );
                            let light = SMOKE_AMBIENT + SMOKE_SUN * self.light(m);
                            for k in 0..3 {
                                color[k] += transmit * alpha * albedo[k] * light;
                            }
                            transmit *= 1.0 - alpha;
                        }
                    }
                }
                if hit_kind != 0 || transmit < T_MIN {
                    break;
                }
                t = t_next;
            }
        }

        let behind = if hit_kind == HAS_LIQUID {
            let q = add(o, scale(d, hit_t));
            let nrm = self.normal(&s.liquid, p.levels[1], q, d);
            let inner = sub(self.cell_coords(q), nrm);
            let albedo = self.albedo(
                &s.liquid_albedo,
                flags & LIQUID_CELLS != 0,
                p.liquid_albedo,
                inner,
            );
            self.shade(q, nrm, d, albedo, LIQUID_SPECULAR)
        } else if hit_kind == HAS_SOLID {
            let q = add(o, scale(d, hit_t));
            let nrm = self.normal(&s.solid, p.levels[3], q, d);
            self.shade(q, nrm, d, SOLID_ALBEDO, SOLID_SPECULAR)
        } else if t_floor.is_finite() {
            self.floor(add(o, scale(d, t_floor)), d)
        } else {
            self.sky(d)
        };
        let mut c: [f32; 3] = std::array::from_fn(|k| color[k] + transmit * behind[k]);
        let depth = if hit_kind != 0 { hit_t } else { t_floor };
        let cover = self.edges(x, y, depth * dot(d, xyz(p.forward)));
        if cover > 0.0 {
            c = mix3(c, EDGE, EDGE_ALPHA * cover);
        }
        c
    }
}
