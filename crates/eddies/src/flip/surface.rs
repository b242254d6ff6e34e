//! The liquid surface as a signed distance on the grid, from the particles (Zhu & Bridson 2005, §4, eq. 4–5),
//! for meshing (marching cubes) and rendering.

use rayon::prelude::*;

use super::particles::Particles;
use super::transfer::HalfCellBins;
use crate::grid::{strides_of, Grid};

/// Kernel radius R of the surface reconstruction (cells): the neighbourhood each cell centre averages over.
pub const SURFACE_KERNEL_RADIUS: f64 = 2.0;
/// Particle radius r (cells) in the reconstruction: the half spacing of the 2ᴰ-per-cell seeding, so that a
/// lone particle is a ball of its own volume's size.
pub const SURFACE_PARTICLE_RADIUS: f64 = 0.5;

/// Zhu–Bridson signed distance (m) at every cell centre: `φ(x) = |x − x̄| − r` with `x̄ = Σ kᵢ xᵢ / Σ kᵢ`,
/// `kᵢ = max(0, 1 − |x − xᵢ|²/R²)³` (eq. 4–5, all particles of one radius r). Negative inside the liquid;
/// cells with no particle within R get `R` (m), an outside bound.
pub(crate) fn surface_distance<const D: usize>(
    p: &Particles<D>,
    bins: &HalfCellBins<D>,
    out: &mut Grid<f64, D>,
) {
    let h = out.spacing;
    let origin = out.origin;
    let sub = bins.sub_dims;
    let sub_strides = strides_of(sub);
    let r_kernel = SURFACE_KERNEL_RADIUS;
    let reach = (2.0 * r_kernel).ceil() as isize;
    // Positions in cells, once per particle rather than once per visit (each particle is visited by the
    // 4ᴰ cells around it): the same expression, so the same bits.
    let cells: [Vec<f64>; D] = std::array::from_fn(|a| {
        p.pos[a]
            .par_iter()
            .map(|&x| (x as f64 - origin[a]) / h)
            .collect()
    });
    out.par_for_each_mut(|_, c, phi| {
        let x: [f64; D] = std::array::from_fn(|k| c[k] as f64 + 0.5);
        let mut lo = [0usize; D];
        let mut hi = [0usize; D];
        for k in 0..D {
            let centre = 2 * c[k] as isize + 1;
            lo[k] = (centre - reach).max(0) as usize;
            hi[k] = ((centre + reach).max(0) as usize).min(sub[k]);
        }
        let mut sum_k = 0.0;
        let mut sum_x = [0.0; D];
        let mut row = lo;
        'rows: loop {
            let mut base = 0;
            for a in 1..D {
                base += row[a] * sub_strides[a];
            }
            let (first, last) = (
                bins.start[base + lo[0]] as usize,
                bins.start[base + hi[0]] as usize,
            );
            for i in first..last {
                let mut d2 = 0.0;
                let mut s = [0.0; D];
                for a in 0..D {
                    s[a] = cells[a][i];
                    d2 += (s[a] - x[a]).powi(2);
                }
                let q = 1.0 - d2 / (r_kernel * r_kernel);
                if q > 0.0 {
                    let w = q * q * q;
                    sum_k += w;
                    for a in 0..D {
                        sum_x[a] += w * s[a];
                    }
                }
            }
            let mut a = 1;
            loop {
                if a >= D {
                    break 'rows;
                }
                row[a] += 1;
                if row[a] < hi[a] {
                    break;
                }
                row[a] = lo[a];
                a += 1;
            }
        }
        *phi = if sum_k > 0.0 {
            let d: f64 = (0..D)
                .map(|a| (x[a] - sum_x[a] / sum_k).powi(2))
                .sum::<f64>()
                .sqrt();
            (d - SURFACE_PARTICLE_RADIUS) * h
        } else {
            r_kernel * h
        };
    });
}
