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
///
/// A cell sums the particles of the half-cell bins within R of its centre (the bins of the last sort:
/// particles advected since count where they were binned). Computed by scatter: each particle adds to the
/// cells around it, about 60 instead of the 500 particles a cell would visit by gathering. Slabs of cells
/// along the last axis run in parallel, each walking its bins in the sorted order, so that every cell adds
/// its particles in the order a gather would: the same sums, bit for bit, for any thread count.
pub(crate) fn surface_distance<const D: usize>(
    p: &Particles<D>,
    bins: &HalfCellBins<D>,
    out: &mut Grid<f64, D>,
) {
    let h = out.spacing;
    let origin = out.origin;
    let dims = out.dims;
    let sub = bins.sub_dims;
    let sub_strides = strides_of(sub);
    let cell_strides = strides_of(dims);
    let r_kernel = SURFACE_KERNEL_RADIUS;
    let reach = (2.0 * r_kernel).ceil() as isize;
    // Positions in cells, once per particle: the same expression a visit would evaluate.
    let cells: [Vec<f64>; D] = std::array::from_fn(|a| {
        p.pos[a]
            .par_iter()
            .map(|&x| (x as f64 - origin[a]) / h)
            .collect()
    });
    // Cells of axis `a` whose bin box holds half-cell bin `b`: 2c + 1 − reach ≤ b < 2c + 1 + reach.
    let cell_span = |b: usize, a: usize| -> (usize, usize) {
        let b = b as isize;
        let first = (b - 1 - reach).div_euclid(2) + 1;
        let last = (b - 1 + reach).div_euclid(2);
        (
            first.max(0) as usize,
            (last + 1).clamp(0, dims[a] as isize) as usize,
        )
    };
    let outer = D - 1;
    let plane = cell_strides[outer];
    let slab = 4usize;
    let slabs: Vec<Vec<f64>> = (0..dims[outer].div_ceil(slab))
        .into_par_iter()
        .map(|k| {
            let (c0, c1) = (k * slab, ((k + 1) * slab).min(dims[outer]));
            // Sums per cell of the slab: Σk, then Σk·x per axis.
            let mut acc = vec![0.0f64; (c1 - c0) * plane * (D + 1)];
            let b0 = (2 * c0 as isize + 1 - reach).max(0) as usize;
            let b1 = ((2 * (c1 - 1) as isize + 1 + reach).max(0) as usize).min(sub[outer]);
            for bin in b0 * sub_strides[outer]..b1 * sub_strides[outer] {
                let (first, last) = (bins.start[bin] as usize, bins.start[bin + 1] as usize);
                if first == last {
                    continue;
                }
                let b: [usize; D] = std::array::from_fn(|a| (bin / sub_strides[a]) % sub[a]);
                let mut span: [(usize, usize); D] = std::array::from_fn(|a| cell_span(b[a], a));
                span[outer] = (span[outer].0.max(c0), span[outer].1.min(c1));
                if (0..D).any(|a| span[a].0 >= span[a].1) {
                    continue;
                }
                for i in first..last {
                    let s: [f64; D] = std::array::from_fn(|a| cells[a][i]);
                    let mut c: [usize; D] = std::array::from_fn(|a| span[a].0);
                    'cells: loop {
                        let mut d2 = 0.0;
                        for a in 0..D {
                            d2 += (s[a] - (c[a] as f64 + 0.5)).powi(2);
                        }
                        let q = 1.0 - d2 / (r_kernel * r_kernel);
                        if q > 0.0 {
                            let w = q * q * q;
                            let mut at = (c[outer] - c0) * plane;
                            for a in 0..outer {
                                at += c[a] * cell_strides[a];
                            }
                            let sums = &mut acc[at * (D + 1)..(at + 1) * (D + 1)];
                            sums[0] += w;
                            for a in 0..D {
                                sums[1 + a] += w * s[a];
                            }
                        }
                        let mut a = 0;
                        loop {
                            c[a] += 1;
                            if c[a] < span[a].1 {
                                break;
                            }
                            c[a] = span[a].0;
                            a += 1;
                            if a == D {
                                break 'cells;
                            }
                        }
                    }
                }
            }
            acc
        })
        .collect();
    out.par_for_each_mut(|idx, c, phi| {
        let k = c[outer] / slab;
        let at = (idx - k * slab * plane) * (D + 1);
        let sums = &slabs[k][at..at + D + 1];
        let sum_k = sums[0];
        *phi = if sum_k > 0.0 {
            let d: f64 = (0..D)
                .map(|a| (c[a] as f64 + 0.5 - sums[1 + a] / sum_k).powi(2))
                .sum::<f64>()
                .sqrt();
            (d - SURFACE_PARTICLE_RADIUS) * h
        } else {
            r_kernel * h
        };
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flip::transfer::sort_particles;
    use crate::rng::SplitMix64;

    /// The gather [`surface_distance`] must equal bit for bit: each cell visits the particles of the bins within
    /// reach. Zhu–Bridson signed distance (m) at every cell centre: `φ(x) = |x − x̄| − r` with `x̄ = Σ kᵢ xᵢ / Σ kᵢ`,
    /// `kᵢ = max(0, 1 − |x − xᵢ|²/R²)³` (eq. 4–5, all particles of one radius r). Negative inside the liquid;
    /// cells with no particle within R get `R` (m), an outside bound.
    fn surface_distance_by_gather<const D: usize>(
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

    /// Particles scattered over part of a grid, some in clumps and some alone, binned, then moved a little
    /// (as advection does after the sort): the scatter equals the gather bit for bit, in 2D and 3D, for 1
    /// and 3 threads.
    fn scatter_equals_gather<const D: usize>(n: usize) {
        let h = 1.0 / n as f64;
        let mut rng = SplitMix64::new(11);
        let mut p = Particles::<D>::new();
        for k in 0..(n.pow(D as u32) * 3) {
            let x: [f64; D] = std::array::from_fn(|a| {
                let u = rng.next_f64();
                if k % 3 == 0 {
                    u
                } else {
                    0.2 + 0.5 * u * if a == 1 { 0.6 } else { 1.0 }
                }
            });
            p.push(x, [0.0; D], false);
        }
        let mut bins = HalfCellBins::new([n; D]);
        sort_particles(&mut p, &mut bins, [0.0; D], h);
        for a in 0..D {
            for x in &mut p.pos[a] {
                *x = (*x + 0.3 * h as f32 * (rng.next_f64() as f32 - 0.5)).clamp(0.0, 0.999);
            }
        }
        let mut gather = Grid::new([n; D], [0.0; D], h, 0.0);
        surface_distance_by_gather(&p, &bins, &mut gather);
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut scatter = Grid::new([n; D], [0.0; D], h, 0.0);
            pool.install(|| surface_distance(&p, &bins, &mut scatter));
            let bits = |g: &Grid<f64, D>| g.data.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&scatter), bits(&gather), "{D}D, {threads} threads");
        }
        assert!(gather.data.iter().any(|&x| x < 0.0) && gather.data.iter().any(|&x| x > 0.0));
    }

    #[test]
    fn the_scatter_equals_the_gather_bit_for_bit() {
        scatter_equals_gather::<2>(37);
        scatter_equals_gather::<3>(19);
    }
}
