//! The stage as the arrays both renderers read ([`Prepared`]): contents, packed colours, the sun's
//! transmittance, brick flags, and the camera's parameters per picture.

use bytemuck::Zeroable;
use rayon::prelude::*;

use crate::camera::{dot, View};
use crate::light;
use crate::stage::{
    Albedo, Layer, Params, Stage, BRICK, FLOOR, HAS_LIQUID, HAS_SMOKE, HAS_SOLID, LIQUID_CELLS,
    LIQUID_DISTANCE, SMOKE_CELLS, SOLID_DISTANCE,
};
use crate::RenderError;

/// The stage as arrays ready to ray-march: contents, colours packed to 8 bits per channel, the sun's
/// transmittance and the brick flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// Everything but the camera.
    pub params: Params,
    /// The liquid's field (empty without liquid).
    pub liquid: Vec<f32>,
    /// The obstacles' field (empty without obstacles).
    pub solid: Vec<f32>,
    /// The smoke's extinction (empty without smoke).
    pub smoke: Vec<f32>,
    /// The liquid's colours, packed RGBA8 (empty when uniform).
    pub liquid_albedo: Vec<u32>,
    /// The smoke's colours, packed RGBA8 (empty when uniform).
    pub smoke_albedo: Vec<u32>,
    /// Transmittance of sunlight to each cell centre, 0–1.
    pub shadow: Vec<f32>,
    /// Per brick, the contents that may show in it (low byte, [`HAS_LIQUID`] …) and, for an empty brick,
    /// its Chebyshev distance in bricks to the nearest brick that is not (bits 8–15, at most
    /// [`MAX_EMPTY_DISTANCE`]): a ray may cross the empty cube of bricks around it in one jump.
    pub bricks: Vec<u32>,
}

impl Prepared {
    /// Checks `stage` and builds its arrays.
    ///
    /// # Errors
    /// An empty grid, an array whose length is not the grid's, a level below its outside value.
    pub fn new(stage: &Stage) -> Result<Self, RenderError> {
        let grid = stage.grid;
        let cells = grid.cells();
        if cells == 0 || !grid.cell.is_finite() || grid.cell <= 0.0 {
            return Err(RenderError::Stage(format!(
                "the grid {:?} with cell size {} is empty",
                grid.n, grid.cell
            )));
        }
        let check = |what: &str, len: usize| {
            if len == cells {
                Ok(())
            } else {
                Err(RenderError::Stage(format!(
                    "{what} has {len} values; the grid {:?} has {cells} cells",
                    grid.n
                )))
            }
        };
        let check_layer = |what: &str, layer: &Layer| {
            check(what, layer.values.len())?;
            if layer.outside < layer.level && layer.width > 0.0 {
                Ok(())
            } else {
                Err(RenderError::Stage(format!(
                    "{what}: the value outside the grid ({}) must lie below the level ({}) and the width ({}) be positive",
                    layer.outside, layer.level, layer.width
                )))
            }
        };
        let mut flags = 0;
        let mut params = Params::zeroed();
        let mut liquid_albedo = Vec::new();
        let mut smoke_albedo = Vec::new();
        if let Some(liquid) = &stage.liquid {
            check_layer("the liquid's field", &liquid.layer)?;
            flags |= HAS_LIQUID;
            if liquid.layer.distance {
                flags |= LIQUID_DISTANCE;
            }
            params.levels[0] = liquid.layer.level;
            params.levels[1] = liquid.layer.outside;
            match &liquid.albedo {
                Albedo::Uniform(c) => params.liquid_albedo = [c[0], c[1], c[2], 1.0],
                Albedo::Cells(c) => {
                    check("the liquid's colours", c.len())?;
                    flags |= LIQUID_CELLS;
                    liquid_albedo = c.par_iter().map(|&c| pack(c)).collect();
                }
            }
        }
        if let Some(solid) = &stage.solid {
            check_layer("the obstacles' field", solid)?;
            flags |= HAS_SOLID;
            if solid.distance {
                flags |= SOLID_DISTANCE;
            }
            params.levels[2] = solid.level;
            params.levels[3] = solid.outside;
        }
        if stage.floor {
            flags |= FLOOR;
        }
        if let Some(smoke) = &stage.smoke {
            check("the smoke's extinction", smoke.extinction.len())?;
            flags |= HAS_SMOKE;
            match &smoke.albedo {
                Albedo::Uniform(c) => params.smoke_albedo = [c[0], c[1], c[2], 1.0],
                Albedo::Cells(c) => {
                    check("the smoke's colours", c.len())?;
                    flags |= SMOKE_CELLS;
                    smoke_albedo = c.par_iter().map(|&c| pack(c)).collect();
                }
            }
        }

        let up = crate::camera::normalize(stage.up);
        let max = grid.max();
        let floor = (0..8)
            .map(|corner| {
                let c: [f32; 3] = std::array::from_fn(|a| {
                    if corner >> a & 1 == 0 {
                        grid.origin[a]
                    } else {
                        max[a]
                    }
                });
                dot(c, up)
            })
            .fold(f32::INFINITY, f32::min);
        let extent: [f32; 3] = std::array::from_fn(|a| max[a] - grid.origin[a]);
        let sun = light::sun(up);
        params.origin = [grid.origin[0], grid.origin[1], grid.origin[2], grid.cell];
        params.up = [up[0], up[1], up[2], floor];
        params.sun = [
            sun[0],
            sun[1],
            sun[2],
            round_length(extent.iter().fold(0.0, |m: f32, &e| m.max(e)) / 8.0),
        ];
        params.centre = [
            0.5 * (grid.origin[0] + max[0]),
            0.5 * (grid.origin[1] + max[1]),
            0.5 * (grid.origin[2] + max[2]),
            0.5 * dot(extent, extent).sqrt(),
        ];
        params.n = [grid.n[0] as u32, grid.n[1] as u32, grid.n[2] as u32, flags];
        let nb = grid.n.map(|n| n.div_ceil(BRICK));
        params.bricks = [nb[0] as u32, nb[1] as u32, nb[2] as u32, 0];

        let shadow = light::transmittance(stage, sun);
        let mut bricks = bricks(stage, nb);
        empty_distances(&mut bricks, nb);
        Ok(Self {
            params,
            liquid: stage
                .liquid
                .as_ref()
                .map_or_else(Vec::new, |l| l.layer.values.clone()),
            solid: stage
                .solid
                .as_ref()
                .map_or_else(Vec::new, |s| s.values.clone()),
            smoke: stage
                .smoke
                .as_ref()
                .map_or_else(Vec::new, |s| s.extinction.clone()),
            liquid_albedo,
            smoke_albedo,
            shadow,
            bricks,
        })
    }

    /// The parameters with `view`'s camera and picture size.
    pub fn params_for(&self, view: &View) -> Params {
        let mut p = self.params;
        p.eye = [view.eye[0], view.eye[1], view.eye[2], 0.0];
        p.forward = [
            view.forward[0],
            view.forward[1],
            view.forward[2],
            view.tan_half,
        ];
        p.right = [view.right[0], view.right[1], view.right[2], view.aspect];
        p.cam_up = [
            view.up[0],
            view.up[1],
            view.up[2],
            2.0 * view.tan_half / view.height as f32,
        ];
        p.size = [view.width, view.height, 0, 0];
        p.edges = edges(&p, view);
        p
    }
}

/// Depth (along the line of sight) in front of which edges are cut (m).
const NEAR: f32 = 1e-4;

/// The grid box's edges seen through `view`, cut at the near plane, as [`Params::edges`] lays them out.
fn edges(p: &Params, view: &View) -> [[f32; 4]; 24] {
    let lo = [p.origin[0], p.origin[1], p.origin[2]];
    let hi: [f32; 3] = std::array::from_fn(|a| lo[a] + p.n[a] as f32 * p.origin[3]);
    let mut out = [[0.0; 4]; 24];
    for edge in 0..12 {
        // Edge `edge` runs along axis a = edge / 4 at the corner its two low bits choose.
        let a = edge / 4;
        let (b, c) = ((a + 1) % 3, (a + 2) % 3);
        let mut start = lo;
        start[b] = if edge & 1 == 0 { lo[b] } else { hi[b] };
        start[c] = if edge & 2 == 0 { lo[c] } else { hi[c] };
        let mut end = start;
        end[a] = hi[a];
        let cam = |q: [f32; 3]| {
            let r = crate::camera::sub(q, view.eye);
            [dot(r, view.right), dot(r, view.up), dot(r, view.forward)]
        };
        let (mut u, mut v) = (cam(start), cam(end));
        if u[2] < NEAR && v[2] < NEAR {
            continue;
        }
        let cut = |from: [f32; 3], to: [f32; 3]| {
            let t = (NEAR - from[2]) / (to[2] - from[2]);
            std::array::from_fn(|k| from[k] + t * (to[k] - from[k]))
        };
        if u[2] < NEAR {
            u = cut(u, v);
        } else if v[2] < NEAR {
            v = cut(v, u);
        }
        let pixel = |q: [f32; 3]| {
            let sx = q[0] / (q[2] * view.tan_half * view.aspect);
            let sy = q[1] / (q[2] * view.tan_half);
            [
                0.5 * (sx + 1.0) * view.width as f32,
                0.5 * (1.0 - sy) * view.height as f32,
                1.0 / q[2],
            ]
        };
        let (pu, pv) = (pixel(u), pixel(v));
        let len2 = (pv[0] - pu[0]).powi(2) + (pv[1] - pu[1]).powi(2);
        out[2 * edge] = [pu[0], pu[1], pu[2], 1.0];
        out[2 * edge + 1] = [
            pv[0],
            pv[1],
            pv[2],
            if len2 > 0.0 { 1.0 / len2 } else { 0.0 },
        ];
    }
    out
}

/// A linear RGB colour as RGBA8, red in the low byte.
pub fn pack(c: [f32; 3]) -> u32 {
    let q = |v: f32| (v.clamp(0.0, 1.0) * 255.0 + 0.5) as u32;
    q(c[0]) | q(c[1]) << 8 | q(c[2]) << 16 | 255 << 24
}

/// The largest of 1, 2, 5 × 10^k not above `x` (x > 0).
pub fn round_length(x: f32) -> f32 {
    let k = x.log10().floor();
    let base = 10f32.powf(k);
    let m = x / base;
    let step = if m >= 5.0 {
        5.0
    } else if m >= 2.0 {
        2.0
    } else {
        1.0
    };
    step * base
}

/// Largest distance to content recorded per brick (bricks).
pub const MAX_EMPTY_DISTANCE: u32 = 255;

/// Records in each empty brick its Chebyshev (L∞) distance in bricks to the nearest brick with content,
/// [`MAX_EMPTY_DISTANCE`] where there is none: the L∞ distance transform is separable, one pass per axis
/// taking d(i) = min over j of max(|i − j|, d_previous(j)).
fn empty_distances(bricks: &mut [u32], nb: [usize; 3]) {
    let mut d: Vec<u32> = bricks
        .iter()
        .map(|&b| if b == 0 { MAX_EMPTY_DISTANCE } else { 0 })
        .collect();
    let stride = [1, nb[0], nb[0] * nb[1]];
    for a in 0..3 {
        let (b, c) = ((a + 1) % 3, (a + 2) % 3);
        let lines: Vec<(usize, Vec<u32>)> = (0..nb[b] * nb[c])
            .into_par_iter()
            .map(|l| {
                let start = (l % nb[b]) * stride[b] + (l / nb[b]) * stride[c];
                let line: Vec<u32> = (0..nb[a]).map(|i| d[start + i * stride[a]]).collect();
                let out = (0..nb[a])
                    .map(|i| {
                        (0..nb[a])
                            .map(|j| (i.abs_diff(j) as u32).max(line[j]))
                            .min()
                            .unwrap_or(MAX_EMPTY_DISTANCE)
                            .min(MAX_EMPTY_DISTANCE)
                    })
                    .collect();
                (start, out)
            })
            .collect();
        for (start, out) in lines {
            for (i, v) in out.into_iter().enumerate() {
                d[start + i * stride[a]] = v;
            }
        }
    }
    for (brick, dist) in bricks.iter_mut().zip(d) {
        if *brick == 0 {
            *brick = dist << 8;
        }
    }
}

/// Per brick, whether its cells and the one-cell apron around them (which trilinear samples inside the
/// brick reach) hold liquid above its level, obstacle above its level or any smoke.
fn bricks(stage: &Stage, nb: [usize; 3]) -> Vec<u32> {
    let n = stage.grid.n;
    (0..nb[0] * nb[1] * nb[2])
        .into_par_iter()
        .map(|b| {
            let bc = [b % nb[0], (b / nb[0]) % nb[1], b / (nb[0] * nb[1])];
            let lo: [usize; 3] = std::array::from_fn(|a| (bc[a] * BRICK).saturating_sub(1));
            let hi: [usize; 3] = std::array::from_fn(|a| ((bc[a] + 1) * BRICK + 1).min(n[a]));
            let mut flags = 0;
            let mut scan = |values: &[f32], above: f32, flag: u32| {
                for z in lo[2]..hi[2] {
                    for y in lo[1]..hi[1] {
                        let row = (z * n[1] + y) * n[0];
                        if values[row + lo[0]..row + hi[0]].iter().any(|&v| v > above) {
                            flags |= flag;
                            return;
                        }
                    }
                }
            };
            if let Some(l) = &stage.liquid {
                scan(&l.layer.values, l.layer.level, HAS_LIQUID);
            }
            if let Some(s) = &stage.solid {
                scan(&s.values, s.level, HAS_SOLID);
            }
            if let Some(s) = &stage.smoke {
                scan(&s.extinction, 0.0, HAS_SMOKE);
            }
            flags
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{Grid, Surface};

    #[test]
    fn round_lengths() {
        assert_eq!(round_length(0.26), 0.2);
        assert_eq!(round_length(7.0), 5.0);
        assert_eq!(round_length(1.0), 1.0);
        assert!((round_length(0.019) - 0.01).abs() < 1e-7);
    }

    #[test]
    fn bricks_flag_what_they_may_show() {
        let grid = Grid {
            n: [2 * BRICK, BRICK, BRICK],
            origin: [0.0; 3],
            cell: 0.1,
        };
        let mut values = vec![0.0; grid.cells()];
        // One liquid cell at the start of brick 1: in the apron of brick 0.
        values[BRICK] = 1.0;
        let stage = Stage {
            grid,
            up: [0.0, 1.0, 0.0],
            liquid: Some(Surface {
                layer: Layer {
                    values,
                    level: 0.5,
                    outside: 0.0,
                    width: 0.5,
                    distance: false,
                },
                albedo: Albedo::Uniform([1.0; 3]),
            }),
            solid: None,
            smoke: None,
            floor: true,
        };
        let p = Prepared::new(&stage).unwrap();
        assert_eq!(p.bricks, vec![HAS_LIQUID, HAS_LIQUID]);
        // At the far end of brick 1: brick 0 is empty, one brick from content.
        let mut far = stage.clone();
        let values = &mut far.liquid.as_mut().unwrap().layer.values;
        values[BRICK] = 0.0;
        values[2 * BRICK - 1] = 1.0;
        assert_eq!(
            Prepared::new(&far).unwrap().bricks,
            vec![1 << 8, HAS_LIQUID]
        );
    }

    #[test]
    fn empty_bricks_know_how_far_content_is() {
        let nb = [6, 5, 4];
        let mut bricks = vec![0u32; 120];
        bricks[(2 * 5 + 1) * 6 + 1] = HAS_SMOKE;
        empty_distances(&mut bricks, nb);
        for z in 0..4usize {
            for y in 0..5usize {
                for x in 0..6usize {
                    let b = bricks[(z * 5 + y) * 6 + x];
                    let expected = x.abs_diff(1).max(y.abs_diff(1)).max(z.abs_diff(2)) as u32;
                    if expected == 0 {
                        assert_eq!(b, HAS_SMOKE);
                    } else {
                        assert_eq!(b, expected << 8, "brick ({x}, {y}, {z})");
                    }
                }
            }
        }
        let mut none = vec![0u32; 8];
        empty_distances(&mut none, [2, 2, 2]);
        assert!(none.iter().all(|&b| b == MAX_EMPTY_DISTANCE << 8));
    }

    #[test]
    fn inconsistent_stages_are_refused() {
        let grid = Grid {
            n: [4, 4, 4],
            origin: [0.0; 3],
            cell: 0.1,
        };
        let stage = Stage {
            grid,
            up: [0.0, 1.0, 0.0],
            liquid: None,
            solid: Some(Layer {
                values: vec![0.0; 63],
                level: 0.0,
                outside: -1.0,
                width: 1.0,
                distance: true,
            }),
            smoke: None,
            floor: false,
        };
        let e = Prepared::new(&stage).unwrap_err().to_string();
        assert!(e.contains("63 values") && e.contains("64 cells"), "{e}");
        let stage = Stage {
            solid: Some(Layer {
                values: vec![0.0; 64],
                level: 0.0,
                outside: 1.0,
                width: 1.0,
                distance: true,
            }),
            ..stage
        };
        assert!(Prepared::new(&stage)
            .unwrap_err()
            .to_string()
            .contains("must lie below"));
    }
}
