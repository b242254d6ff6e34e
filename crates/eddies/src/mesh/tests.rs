//! Tests of surface extraction: topology and volume of analytic shapes, walls, special values, determinism.

use super::marching::TETS;
use super::*;
use std::f64::consts::PI;

/// Samples `f` at the cell centres of an `n` grid over `[0, n·h]` (x fastest).
fn sample(n: [usize; 3], h: f64, f: impl Fn([f64; 3]) -> f64) -> Vec<f32> {
    let mut values = Vec::with_capacity(n.iter().product());
    for k in 0..n[2] {
        for j in 0..n[1] {
            for i in 0..n[0] {
                let x = [i, j, k].map(|c| (c as f64 + 0.5) * h);
                values.push(f(x) as f32);
            }
        }
    }
    values
}

/// A reproducible pseudo-random number in [0, 1) per index (SplitMix64's finaliser).
fn noise(i: usize) -> f64 {
    let mut z = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

fn sphere(c: [f64; 3], r: f64) -> impl Fn([f64; 3]) -> f64 {
    move |x| ((x[0] - c[0]).powi(2) + (x[1] - c[1]).powi(2) + (x[2] - c[2]).powi(2)).sqrt() - r
}

fn level_set(values: &[f32], n: [usize; 3], h: f64) -> TriMesh {
    extract(values, n, h, [0.0; 3], &IsoSurface::default()).expect("valid grid")
}

fn assert_closed(mesh: &TriMesh, chi: i64) -> Topology {
    let topo = mesh.topology();
    assert!(topo.is_closed_manifold(), "{topo:?}");
    assert_eq!(topo.euler_characteristic, chi, "{topo:?}");
    assert_eq!(mesh.normals.len(), mesh.positions.len());
    // Every vertex is used: each one is on a crossed edge, which lies in some tetrahedron's surface.
    let mut used = vec![false; mesh.positions.len()];
    mesh.triangles
        .iter()
        .flatten()
        .for_each(|&v| used[v as usize] = true);
    assert!(used.iter().all(|&u| u), "unused vertices");
    topo
}

#[test]
fn kuhn_tetrahedra_are_positive_and_fill_the_cube() {
    // Unit determinant each: six tetrahedra of volume 1/6 fill the unit cube.
    for tet in TETS {
        let p = tet.map(|c| [c & 1, (c >> 1) & 1, (c >> 2) & 1].map(f64::from));
        let e: [[f64; 3]; 3] =
            std::array::from_fn(|v| std::array::from_fn(|c| p[v + 1][c] - p[0][c]));
        let det = e[0][0] * (e[1][1] * e[2][2] - e[1][2] * e[2][1])
            - e[0][1] * (e[1][0] * e[2][2] - e[1][2] * e[2][0])
            + e[0][2] * (e[1][0] * e[2][1] - e[1][1] * e[2][0]);
        assert_eq!(det, 1.0, "{tet:?}");
    }
}

#[test]
fn sphere_is_a_closed_sphere_with_its_volume_and_outward_normals() {
    let r = 0.35;
    for n in [32, 64] {
        let h = 1.0 / n as f64;
        let mesh = level_set(&sample([n; 3], h, sphere([0.5; 3], r)), [n; 3], h);
        assert_closed(&mesh, 2);
        // The vertices lie on the sphere to second order in h, and the flat triangles between them cut inside
        // it by at most l²/(8r) for edges of length l ≤ √3·h, i.e. a relative volume deficit of at most
        // 3·(3h²)/(8r²): 0.9 % at 32³ (h = r/11), 0.2 % at 64³. 1 % holds both with room for the vertices.
        let exact = 4.0 / 3.0 * PI * r.powi(3);
        let err = (mesh.enclosed_volume() - exact).abs() / exact;
        assert!(err < 0.01, "n = {n}: volume off by {:.3} %", 100.0 * err);
        let mean_dot: f64 = mesh
            .positions
            .iter()
            .zip(&mesh.normals)
            .map(|(p, nrm)| {
                let d = p.map(|x| f64::from(x) - 0.5);
                let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                (0..3).map(|c| d[c] / len * f64::from(nrm[c])).sum::<f64>()
            })
            .sum::<f64>()
            / mesh.positions.len() as f64;
        assert!(mean_dot > 0.99, "n = {n}: mean normal·radial {mean_dot}");
    }
}

#[test]
fn torus_has_euler_characteristic_zero() {
    let (big, small) = (0.3, 0.1);
    let n = 64;
    let h = 1.0 / n as f64;
    let torus = |x: [f64; 3]| {
        let (dx, dy, dz) = (x[0] - 0.5, x[1] - 0.5, x[2] - 0.5);
        ((dx * dx + dy * dy).sqrt() - big).hypot(dz) - small
    };
    let mesh = level_set(&sample([n; 3], h, torus), [n; 3], h);
    assert_closed(&mesh, 0);
    // The tube's radius is 6.4 cells: the bound of the sphere test gives 3·3/(8·6.4²) ≈ 2.7 %.
    let exact = 2.0 * PI * PI * big * small * small;
    let err = (mesh.enclosed_volume() - exact).abs() / exact;
    assert!(err < 0.03, "volume off by {:.3} %", 100.0 * err);
}

#[test]
fn liquid_in_a_corner_is_closed_on_the_three_walls() {
    let n = [32, 40, 24];
    let h = 1.0 / 32.0;
    let size = [0.4, 0.5, 0.3];
    let corner = |x: [f64; 3]| (x[0] - size[0]).max(x[1] - size[1]).max(x[2] - size[2]);
    let mesh = level_set(&sample(n, h, corner), n, h);
    assert_closed(&mesh, 2);
    // The field is linear across each face, so the faces are exact; only along the three free edges of the
    // box do the tetrahedra cut off a sliver of the corner where two planes meet, of cross-section at most
    // h²/2: (0.4 + 0.5 + 0.3)·h²/2 = 5.9e-4 m³ of 0.06 m³, 1 %.
    let exact = size.iter().product::<f64>();
    let err = (mesh.enclosed_volume() - exact).abs() / exact;
    assert!(err < 0.01, "volume off by {:.3} %", 100.0 * err);
    // The wall faces are on the walls: the box's lowest corner is a vertex's position in each coordinate.
    for c in 0..3 {
        let lowest = mesh.positions.iter().map(|p| p[c]).fold(f32::MAX, f32::min);
        assert_eq!(lowest, 0.0, "axis {c}");
    }
}

#[test]
fn empty_grids_give_empty_meshes() {
    let mesh = level_set(&vec![1.0; 8 * 9 * 10], [8, 9, 10], 0.1);
    assert_eq!(mesh, TriMesh::default());
    let mesh = level_set(&[], [0, 5, 5], 0.1);
    assert_eq!(mesh, TriMesh::default());
}

#[test]
fn a_full_grid_gives_the_box() {
    let n = [6, 7, 8];
    let h = 0.25;
    let origin = [-1.0, 2.0, 0.5];
    let mesh =
        extract(&vec![-1.0; 6 * 7 * 8], n, h, origin, &IsoSurface::default()).expect("valid");
    assert_closed(&mesh, 2);
    // Every vertex is on the box's boundary.
    let hi: [f64; 3] = std::array::from_fn(|c| origin[c] + n[c] as f64 * h);
    for p in &mesh.positions {
        let on_wall = (0..3).any(|c| f64::from(p[c]) == origin[c] || f64::from(p[c]) == hi[c]);
        assert!(on_wall, "{p:?}");
    }
    // The faces are the box's, but the six box edges that run across the tetrahedra's diagonal are bevelled
    // (see the module doc): a prism of cross-section h²/8 along each, 1.5 + 1.75 + 2 m of edges counted
    // twice, less where the bevels meet at corners.
    let exact = 1.5 * 1.75 * 2.0;
    let bevels = h * h / 8.0 * 2.0 * (1.5 + 1.75 + 2.0);
    let deficit = exact - mesh.enclosed_volume();
    assert!(
        deficit > 0.0 && deficit <= bevels + 1e-6,
        "deficit {deficit} m³, bevels {bevels} m³"
    );
}

#[test]
fn values_at_the_level_count_as_outside_and_leave_no_zero_area_triangle() {
    // Values in {-1, 0, 1}: a third of the samples sit exactly at the level, so many triangles would collapse
    // onto them without the vertex's distance from the edge's ends.
    let n = [17, 13, 11];
    let values: Vec<f32> = (0..17 * 13 * 11)
        .map(|i| (noise(i) * 3.0).floor() as f32 - 1.0)
        .collect();
    let mesh = level_set(&values, n, 1.0);
    let topo = assert_closed(&mesh, mesh.topology().euler_characteristic);
    assert!(topo.faces > 1000, "{topo:?}");
    assert!(mesh.enclosed_volume() > 0.0);
    let min_area = mesh
        .triangles
        .iter()
        .map(|&t| {
            TriMesh {
                positions: t.map(|v| mesh.positions[v as usize]).to_vec(),
                normals: vec![],
                triangles: vec![[0, 1, 2]],
            }
            .area()
        })
        .fold(f64::MAX, f64::min);
    assert!(min_area > 0.0);
    // The liquid is exactly the samples below the level: flipping them to 0 empties the grid.
    let zeros: Vec<f32> = values.iter().map(|&v| v.max(0.0)).collect();
    assert!(level_set(&zeros, n, 1.0).triangles.is_empty());
}

#[test]
fn random_fields_give_closed_oriented_manifolds() {
    // Noise hits every configuration of the tetrahedra many times, including liquid in single samples on the
    // walls and at the corners.
    for seed in 0..3 {
        let n = [12 + seed, 9, 10];
        let values: Vec<f32> = (0..n.iter().product::<usize>())
            .map(|i| (noise(i + 10_000 * seed) - 0.5) as f32)
            .collect();
        let mesh = level_set(&values, n, 0.1);
        assert_closed(&mesh, mesh.topology().euler_characteristic);
        assert!(mesh.enclosed_volume() > 0.0);
    }
}

#[test]
fn density_above_a_level_is_the_level_set_below_it() {
    let n = [20, 20, 20];
    let h = 0.05;
    let phi = sample(n, h, sphere([0.4, 0.5, 0.6], 0.3));
    let density: Vec<f32> = phi.iter().map(|&p| 1000.0 - 100.0 * p).collect();
    let below = level_set(&phi, n, h);
    let params = IsoSurface {
        level: 1000.0,
        inside: Inside::Above,
        ..Default::default()
    };
    let above = extract(&density, n, h, [0.0; 3], &params).expect("valid");
    assert_eq!(below.triangles, above.triangles);
    for (a, b) in below.positions.iter().zip(&above.positions) {
        for c in 0..3 {
            // The interpolation weights differ by the rounding of the density's affine map, about 1e-4 of a
            // 1000 kg/m³ value over a 100 kg/m³ step: below 1e-3 of a cell.
            assert!((a[c] - b[c]).abs() < 1e-3 * h as f32, "{a:?} {b:?}");
        }
    }
}

#[test]
fn the_mesh_is_the_same_for_any_thread_count() {
    let n = [40, 33, 29];
    let h = 1.0 / 40.0;
    let values = sample(n, h, |x| {
        sphere([0.5, 0.4, 0.35], 0.3)(x).min(x[2] - 0.2) + 0.02 * noise((x[0] * 1e4) as usize)
    });
    let params = IsoSurface {
        smoothing_iterations: 3,
        ..Default::default()
    };
    let run =
        |threads| crate::par::with_threads(threads, || extract(&values, n, h, [0.0; 3], &params));
    let one = run(1).expect("valid");
    assert!(!one.triangles.is_empty());
    for threads in [2, 3] {
        let many = run(threads).expect("valid");
        let bits = |m: &TriMesh| {
            (
                m.positions
                    .iter()
                    .flatten()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>(),
                m.normals
                    .iter()
                    .flatten()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(one.triangles, many.triangles, "{threads} threads");
        assert_eq!(bits(&one), bits(&many), "{threads} threads");
    }
}

#[test]
fn taubin_smoothing_keeps_the_sphere_volume() {
    let n = 32;
    let h = 1.0 / n as f64;
    let r = 0.35;
    let values = sample([n; 3], h, sphere([0.5; 3], r));
    let params = IsoSurface {
        smoothing_iterations: 10,
        ..Default::default()
    };
    let mesh = extract(&values, [n; 3], h, [0.0; 3], &params).expect("valid");
    assert_closed(&mesh, 2);
    // Taubin's μ step undoes the λ step's shrinkage to first order; what remains over 10 passes on a sphere
    // of 11 cells is a fraction of a percent. 2 % is the bound the renderer can live with.
    let exact = 4.0 / 3.0 * PI * r.powi(3);
    let err = (mesh.enclosed_volume() - exact).abs() / exact;
    assert!(err < 0.02, "volume off by {:.3} %", 100.0 * err);
    // Smoothing evens out the staircase: the vertices' distances from the centre spread less.
    let spread = |m: &TriMesh| {
        let radii: Vec<f64> = m
            .positions
            .iter()
            .map(|p| sphere([0.5; 3], 0.0)(p.map(f64::from)))
            .collect();
        let mean = radii.iter().sum::<f64>() / radii.len() as f64;
        (radii.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / radii.len() as f64).sqrt()
    };
    assert!(spread(&mesh) < spread(&level_set(&values, [n; 3], h)));
}

#[test]
fn bad_input_is_an_error() {
    let params = IsoSurface::default();
    assert!(matches!(
        extract(&[0.0; 7], [2, 2, 2], 1.0, [0.0; 3], &params),
        Err(MeshError::LengthMismatch {
            expected: 8,
            found: 7,
            ..
        })
    ));
    assert_eq!(
        extract(&[0.0; 8], [2, 2, 2], 0.0, [0.0; 3], &params),
        Err(MeshError::CellSize(0.0))
    );
    assert!(matches!(
        extract(&[0.0; 8], [2, 2, 2], 1.0, [f64::NAN, 0.0, 0.0], &params),
        Err(MeshError::Origin(_))
    ));
}
