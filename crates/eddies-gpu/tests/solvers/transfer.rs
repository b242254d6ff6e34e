//! FLIP's particle passes on the GPU (`eddies_gpu::flip::GpuTransfer`) against the CPU's
//! (`eddies::flip::CpuTransfer`): the same transfer sums and moved particles to single-precision rounding,
//! the same bits run to run.

use eddies::flip::{
    Advection, Boundary, CpuTransfer, Derived, Displacement, GridSums, Particles, Transfer,
    TransferDevice,
};
use eddies::grid::{Grid, MacGrid};
use eddies::rng::SplitMix64;
use eddies::Shape;

/// `n` particles scattered over a grid of `dims` cells of 0.1 m (origin at 0, as a simulation's), in
/// clusters so that some cells hold many and some none, with velocities and APIC matrices of order 1; a few
/// lie outside the domain or are not finite, which both transfers drop.
fn particles<const D: usize>(dims: [usize; D], n: usize, seed: u64) -> Particles<D> {
    let mut rng = SplitMix64::new(seed);
    let mut p = Particles::<D>::new();
    for i in 0..n {
        let cluster = (i / 64) as u64;
        let mut centre = SplitMix64::new(seed ^ cluster.wrapping_mul(0x9e37_79b9));
        let x: [f64; D] = std::array::from_fn(|a| {
            let c = centre.next_f64() * dims[a] as f64;
            0.1 * (c + 3.0 * (rng.next_f64() - 0.5)).clamp(0.0, dims[a] as f64 - 1e-3)
        });
        let v: [f64; D] = std::array::from_fn(|_| 2.0 * rng.next_f64() - 1.0);
        p.push(x, v, true);
        for k in 0..D {
            for a in 0..D {
                *p.affine[k][a].last_mut().unwrap() = (4.0 * rng.next_f64() - 2.0) as f32;
            }
        }
    }
    p.pos[0][3] = f32::NAN;
    p.pos[D - 1][5] = 1e3;
    p.pos[1][7] = -0.01;
    p
}

/// The largest difference between the two transfers' sums, relative to the largest weight sum.
fn sums_differ<const D: usize>(a: &[Grid<[f32; 2], D>; D], b: &[Grid<[f32; 2], D>; D]) -> f64 {
    let (mut diff, mut top) = (0.0f64, 0.0f64);
    for (ga, gb) in a.iter().zip(b) {
        for (x, y) in ga.data.iter().zip(&gb.data) {
            for c in 0..2 {
                assert!(x[c].is_finite() && y[c].is_finite());
                diff = diff.max((x[c] - y[c]).abs() as f64);
            }
            top = top.max(x[0] as f64);
        }
    }
    diff / top
}

fn transfer_on<const D: usize>(
    device: &mut dyn TransferDevice<D>,
    p: &Particles<D>,
    grid: &MacGrid<D>,
    transfer: Transfer,
) -> [Grid<[f32; 2], D>; D] {
    let mut sums = std::array::from_fn(|k| grid.u[k].same_shape([0.0f32; 2]));
    assert!(device
        .particles_to_grid(p, grid, transfer, GridSums::Sums(&mut sums))
        .unwrap());
    sums
}

/// GPU and CPU sums agree for PIC/FLIP and APIC, 2D and 3D, on grids whose half-cell counts take one, two
/// and three levels of prefix sums, with launches folded into two dimensions: a face adds at most 4ᴰ·(a few)
/// terms of magnitude ≤ 1 (weights) or ≤ 3 (APIC velocities at the face) in single precision, in orders
/// that differ, so the sums agree to about 100 · 2⁻²⁴ ≈ 6e-6 of the largest weight sum; the bound is 2e-5.
/// The GPU's sums repeat bit for bit, and what it derives from them is what the host derives
/// ([`derived_as_on_the_host`]).
#[test]
fn the_gpu_transfer_matches_the_cpus() {
    let Some(dev) = super::transfer() else {
        return;
    };
    let mut dev = dev.lock().unwrap();
    fn check<const D: usize>(dev: &mut eddies_gpu::flip::GpuTransfer, dims: [usize; D], n: usize)
    where
        eddies_gpu::flip::GpuTransfer: TransferDevice<D>,
    {
        let grid = MacGrid::new(dims, [0.0; D], 0.1);
        let p = particles(dims, n, 7 + n as u64);
        for transfer in [Transfer::Flip, Transfer::Apic] {
            let cpu = transfer_on(&mut CpuTransfer, &p, &grid, transfer);
            let gpu = transfer_on(dev, &p, &grid, transfer);
            let diff = sums_differ(&gpu, &cpu);
            println!("{D}D {dims:?}, {n} particles, {transfer:?}: {diff:.2e}");
            assert!(diff <= 2e-5, "{dims:?} {transfer:?}: {diff:e}");
            if transfer == Transfer::Apic {
                let flip = transfer_on(dev, &p, &grid, Transfer::Flip);
                assert!(sums_differ(&gpu, &flip) > 1e-3, "the affine term counts");
                derived_as_on_the_host(dev, &p, &grid, &gpu);
            }
            assert_eq!(
                gpu,
                transfer_on(dev, &p, &grid, transfer),
                "{dims:?} {transfer:?}"
            );
        }
    }
    check(&mut dev, [8, 5], 300);
    check(&mut dev, [40, 30], 6000);
    dev.limit_workgroups_per_dimension(3);
    check(&mut dev, [12, 10, 9], 9000);
    dev.limit_workgroups_per_dimension(u32::MAX);
    check(&mut dev, [66, 50, 40], 30000);
}

/// The face velocities and the fill fraction that the device derives from its `sums` of `p` on `grid`, read
/// back in their place, are those the host derives from the same sums (`GridSums::take_from`, in double
/// precision), to single-precision rounding: a velocity is one division, correctly rounded on the host and
/// within WGSL's 2.5 ulp on the device, so the bound is 4 · 2⁻²⁴ of its size; a fill fraction adds 2D
/// non-negative weights, each divided by a kernel mass (exact: 1, 0.5, 0.875 or their products), and scales
/// them, about 2D + 3 roundings, bounded by 12 · 2⁻²⁴ of its size. Faces no particle reaches read 0 on both,
/// closed and open domains; the derived values repeat bit for bit.
fn derived_as_on_the_host<const D: usize>(
    dev: &mut eddies_gpu::flip::GpuTransfer,
    p: &Particles<D>,
    grid: &MacGrid<D>,
    sums: &[Grid<[f32; 2], D>; D],
) where
    eddies_gpu::flip::GpuTransfer: TransferDevice<D>,
{
    let dims = grid.dims;
    for closed in [true, false] {
        let derive = |dev: Option<&mut eddies_gpu::flip::GpuTransfer>| {
            let (mut u, mut fill) = (grid.clone(), Grid::new(dims, [0.0; D], 0.1, f64::NAN));
            let out = GridSums::Derived(Derived {
                u: &mut u,
                fill: &mut fill,
                closed,
                seeds: 2f64.powi(D as i32),
            });
            match dev {
                Some(d) => {
                    assert!(
                        TransferDevice::<D>::particles_to_grid(d, p, grid, Transfer::Apic, out)
                            .unwrap()
                    )
                }
                None => out.take_from(sums),
            }
            (u, fill)
        };
        let (host, device) = (derive(None), derive(Some(&mut *dev)));
        // The difference in units of 2⁻²⁴ of the host's value.
        let ulps =
            |h: f64, d: f64| (h - d).abs() / (h.abs() * 2f64.powi(-24)).max(f64::MIN_POSITIVE);
        let (mut du, mut zeros) = (0.0f64, 0);
        for (h, d) in host.0.u.iter().zip(&device.0.u) {
            for (&h, &d) in h.data.iter().zip(&d.data) {
                assert!(d.is_finite(), "{dims:?}: a derived velocity {d}");
                du = du.max(ulps(h, d));
                zeros += (h == 0.0 && d == 0.0) as usize;
            }
        }
        let mut df = 0.0f64;
        for (&h, &d) in host.1.data.iter().zip(&device.1.data) {
            assert!(d.is_finite() && d >= 0.0, "{dims:?}: a derived fill {d}");
            df = df.max(ulps(h, d));
        }
        println!(
            "{D}D {dims:?}, closed {closed}: velocities {du:.1} ulp, fill {df:.1} ulp, \
             {zeros} empty faces"
        );
        assert!(
            du <= 4.0,
            "{dims:?} closed {closed}: velocities differ by {du} ulp"
        );
        assert!(
            df <= 12.0,
            "{dims:?} closed {closed}: fill differs by {df} ulp"
        );
        assert!(zeros > 0, "{dims:?}: some faces are empty");
        let max_fill = host.1.data.iter().fold(0.0f64, |a, &b| a.max(b));
        assert!(
            max_fill > 0.1,
            "{dims:?}: the clusters fill cells ({max_fill})"
        );
        assert!(
            device == derive(Some(&mut *dev)),
            "{dims:?}: the same bits again"
        );
    }
}

/// A grid of `dims` cells of 0.1 m whose faces hold random velocities of order 1 (m/s).
fn random_grid<const D: usize>(dims: [usize; D], seed: u64, scale: f64) -> MacGrid<D> {
    let mut rng = SplitMix64::new(seed);
    let mut g = MacGrid::new(dims, [0.0; D], 0.1);
    for c in &mut g.u {
        for v in &mut c.data {
            *v = scale * (2.0 * rng.next_f64() - 1.0);
        }
    }
    g
}

/// The grid-to-particle pass on the GPU moves particles as the CPU's does, for PIC, the FLIP blend and APIC,
/// closed and open walls, with and without the volume correction's displacement and obstacles, 2D and 3D.
/// Both interpolate the same single-precision fields, the CPU in double precision and the GPU in single, so
/// they differ by a few single-precision roundings: positions within 1e-5 of a cell (a position near 1 m has
/// steps of 6e-7 of a 0.1 m cell; measured up to 6e-6, with obstacles), velocities within 1e-5 m/s of speeds
/// up to 1 m/s (measured 1.4e-6) and APIC matrices within 1e-5 of 20/s, the largest gradient of these fields
/// (measured 5.7e-7). Particles that leave an open domain are NaN on both; with obstacles (a rotated, scaled
/// union with a part cut away, then a ball) no particle ends inside the ball. The GPU's pass repeats bit for
/// bit, also when it takes the particles its particle-to-grid transfer holds; a shape nested deeper than its
/// kernel's stack is declined and the CPU runs.
#[test]
fn the_gpu_particle_pass_matches_the_cpus() {
    let Some(dev) = super::transfer() else {
        return;
    };
    let mut dev = dev.lock().unwrap();
    fn check<const D: usize>(dev: &mut eddies_gpu::flip::GpuTransfer, dims: [usize; D], n: usize)
    where
        eddies_gpu::flip::GpuTransfer: TransferDevice<D>,
    {
        let u = random_grid(dims, 3, 1.0);
        let u_old = random_grid(dims, 4, 1.0);
        let disp = random_grid(dims, 5, 0.01);
        let mut start = particles(dims, n, 11);
        // Only live particles reach the pass.
        for a in 0..D {
            start.pos[a][3] = 0.05;
            start.pos[a][5] = 0.05;
            start.pos[a][7] = 0.05;
        }
        // A rotated, scaled union of a box and a cylinder with a slab cut away, and a ball (in 2D: their
        // sections by the plane z = 0).
        let size: [f64; D] = std::array::from_fn(|a| 0.1 * dims[a] as f64);
        let mid_z = if D == 3 { 0.5 * size[D - 1] } else { 0.0 };
        let centre = glam::DVec3::new(0.5 * size[0], 0.5 * size[1], mid_z);
        let shapes = [
            Shape::Transform {
                shape: Box::new(Shape::Difference {
                    base: Box::new(Shape::Union(vec![
                        Shape::Box {
                            min: glam::DVec3::new(-0.1, -0.05, -1.0),
                            max: glam::DVec3::new(0.1, 0.05, 1.0),
                        },
                        Shape::Cylinder {
                            center: glam::DVec3::ZERO,
                            axis: glam::DVec3::Z,
                            radius: 0.08,
                            height: 2.0,
                        },
                    ])),
                    cut: Box::new(Shape::HalfSpace {
                        point: glam::DVec3::new(0.0, 0.03, 0.0),
                        normal: glam::DVec3::Y,
                    }),
                }),
                rotation: glam::DQuat::from_rotation_z(0.5),
                translation: centre,
                scale: 1.5,
            },
            Shape::Sphere {
                center: glam::DVec3::new(0.3 * size[0], 0.3 * size[1], mid_z),
                radius: 0.15,
            },
        ];
        for transfer in [Transfer::Pic, Transfer::Flip, Transfer::Apic] {
            for boundary in [Boundary::Closed, Boundary::Open] {
                for (displacement, obstacles) in [
                    (Displacement::None, &[][..]),
                    (Displacement::Host(&disp), &[][..]),
                    (Displacement::Host(&disp), &shapes[..]),
                ] {
                    let step = Advection {
                        u: &u,
                        u_old: &u_old,
                        displacement,
                        transfer,
                        pic_ratio: 0.05,
                        obstacles,
                        boundary,
                        // Up to a cell and a half of travel: the midpoint samples other faces.
                        dt: 0.15,
                        unchanged: false,
                        kept: None,
                        extrapolate: None,
                        projected: false,
                    };
                    let (mut cpu, mut gpu) = (start.clone(), start.clone());
                    assert!(CpuTransfer
                        .grid_to_particles_advect(&mut cpu, &step)
                        .unwrap());
                    assert!(dev.grid_to_particles_advect(&mut gpu, &step).unwrap());
                    let (mut dx, mut dv, mut dc, mut gone) = (0.0f64, 0.0f64, 0.0f64, 0);
                    for i in 0..n {
                        for a in 0..D {
                            let (xc, xg) = (cpu.pos[a][i], gpu.pos[a][i]);
                            assert_eq!(
                                xc.is_nan(),
                                xg.is_nan(),
                                "particle {i} {transfer:?} {boundary:?}"
                            );
                            gone += xc.is_nan() as usize;
                            if !xc.is_nan() {
                                dx = dx.max((xc - xg).abs() as f64 / 0.1);
                            }
                            dv = dv.max((cpu.vel[a][i] - gpu.vel[a][i]).abs() as f64);
                            for c in 0..D {
                                let (ac, ag) = (cpu.affine[a][c][i], gpu.affine[a][c][i]);
                                dc = dc.max((ac - ag).abs() as f64 / 20.0);
                            }
                        }
                    }
                    println!(
                        "{D}D {transfer:?} {boundary:?} displaced {}, {} obstacles: {dx:.1e} cells, {dv:.1e} m/s, {dc:.1e} of C, {gone} NaN",
                        !matches!(displacement, Displacement::None),
                        obstacles.len()
                    );
                    if !obstacles.is_empty() && boundary == Boundary::Closed {
                        // Each obstacle pushes particles out in turn, along its normal by its distance, so the
                        // last one, a ball whose distance is exact, leaves none inside it (the first, whose
                        // distance is only a bound inside, may leave some: the CPU's rule too).
                        let last = obstacles.last().unwrap();
                        let inside = |p: &Particles<D>| {
                            (0..n)
                                .filter(|&i| {
                                    let q = eddies::grid::to_dvec3::<D>(std::array::from_fn(|a| {
                                        p.pos[a][i] as f64
                                    }));
                                    last.sdf(q) < -1e-6
                                })
                                .count()
                        };
                        println!(
                            "  inside the last obstacle: {} before, {} after",
                            inside(&start),
                            inside(&gpu)
                        );
                        assert!(inside(&start) > 0);
                        assert_eq!(inside(&gpu), 0);
                    }
                    assert!(
                        dx <= 1e-5 && dv <= 1e-5 && dc <= 1e-5,
                        "{transfer:?} {boundary:?}"
                    );
                    if boundary == Boundary::Open {
                        assert!(gone > 0, "some particles leave the open domain");
                    }
                    // Again, after a particle-to-grid transfer of the same particles, with `u_old` the
                    // velocity of its sums as the host derives it: sent with the fields, and taken from the
                    // device, which then also derives `u_old` from the sums it still holds.
                    let u_old = velocities_of(&u, &transfer_on(dev, &start, &u, transfer));
                    let sent = Advection {
                        u_old: &u_old,
                        ..step
                    };
                    let mut expected = start.clone();
                    dev.grid_to_particles_advect(&mut expected, &sent).unwrap();
                    let mut again = start.clone();
                    transfer_on(dev, &again, &u, transfer);
                    let resident = Advection {
                        unchanged: true,
                        ..sent
                    };
                    dev.grid_to_particles_advect(&mut again, &resident).unwrap();
                    same_but_flips_rounding(&again, &expected, &u, &u_old, transfer);
                }
            }
        }
        // A union nested deeper than the kernel's stack stays on the CPU.
        let mut deep = shapes[0].clone();
        for _ in 0..20 {
            deep = Shape::Union(vec![shapes[0].clone(), deep]);
        }
        let step = Advection {
            u: &u,
            u_old: &u_old,
            displacement: Displacement::None,
            transfer: Transfer::Flip,
            pic_ratio: 0.05,
            obstacles: &[deep],
            boundary: Boundary::Closed,
            dt: 0.1,
            unchanged: false,
            kept: None,
            extrapolate: None,
            projected: false,
        };
        assert!(!dev
            .grid_to_particles_advect(&mut start.clone(), &step)
            .unwrap());
    }
    check(&mut dev, [9, 7], 2000);
    check(&mut dev, [10, 8, 7], 6000);
}

/// Every attribute's bits, NaN included.
/// The velocity `Σ w u / Σ w` of each face of `sums` (0 where `Σ w` is 0), in double precision as the host
/// derives it after a transfer (`eddies::flip` transfer.rs, `velocities_from_sums`).
fn velocities_of<const D: usize>(grid: &MacGrid<D>, sums: &[Grid<[f32; 2], D>; D]) -> MacGrid<D> {
    let mut out = grid.clone();
    for (g, s) in out.u.iter_mut().zip(sums) {
        for (v, &[w, m]) in g.data.iter_mut().zip(&s.data) {
            *v = if w > 0.0 {
                f64::from(m) / f64::from(w)
            } else {
                0.0
            };
        }
    }
    out
}

/// `a` and `b`, moved from the same particles by passes that differ only in where `u − u_old` was formed
/// (on the host in double precision, or on the device from its sums in single), hold the same positions
/// and APIC matrices, which do not read it, bit for bit, and with PIC and APIC the same velocities. With
/// FLIP each velocity adds `(1 − α)` times an interpolation (a convex combination) of `u − u_old`, whose
/// two forms differ by at most four roundings of f32 at the larger of `|u|` and `|u_old|`, and the device's
/// division by up to 2.5 ulp (Vulkan's bound): 8 ulp of that size bounds them.
fn same_but_flips_rounding<const D: usize>(
    a: &Particles<D>,
    b: &Particles<D>,
    u: &MacGrid<D>,
    u_old: &MacGrid<D>,
    transfer: Transfer,
) {
    let mut bits_a = bits(a);
    let mut bits_b = bits(b);
    if transfer != Transfer::Flip {
        assert_eq!(bits_a, bits_b, "{transfer:?}: the same bits");
        return;
    }
    let top = [u, u_old]
        .iter()
        .flat_map(|g| g.u.iter().flat_map(|c| c.data.iter()))
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let bound = 8.0 * f64::from(f32::EPSILON) * top;
    let mut worst = 0.0f64;
    for k in 0..D {
        for (x, y) in a.vel[k].iter().zip(&b.vel[k]) {
            assert_eq!(x.is_nan(), y.is_nan(), "Flip: the same lost particles");
            if !x.is_nan() {
                worst = worst.max(f64::from((x - y).abs()));
            }
        }
    }
    println!("  FLIP's u − u_old formed on the device: {worst:.1e} m/s (bound {bound:.1e})");
    assert!(worst <= bound, "{worst} > {bound}");
    // The rest, bit for bit: the velocities' bits set aside.
    let n = a.len();
    for bits in [&mut bits_a, &mut bits_b] {
        let mut at = 0;
        for _ in 0..D {
            at += n;
            bits[at..at + n].fill(0);
            at += n + D * n;
        }
    }
    assert_eq!(bits_a, bits_b, "Flip: the same positions and matrices");
}

fn bits<const D: usize>(p: &Particles<D>) -> Vec<u32> {
    let mut out = Vec::new();
    for a in 0..D {
        out.extend(p.pos[a].iter().map(|x| x.to_bits()));
        out.extend(p.vel[a].iter().map(|x| x.to_bits()));
        for c in 0..D {
            out.extend(p.affine[a][c].iter().map(|x| x.to_bits()));
        }
    }
    out
}
