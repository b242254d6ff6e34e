//! The writer checked through the strict reader of [`super::read_back`]: every voxel, count, bound and offset.
//! Values are compared bit for bit: the format stores the f32 samples unchanged, so no tolerance applies.

use super::read_back::{read_vdb, MetaValue, ReadGrid};
use super::*;

/// Deterministic samples in [-1, 1) (a 64-bit LCG), so that failures reproduce.
fn samples(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Index coordinates of dense cell `c` of an array of shape `dims`.
fn cell(c: usize, dims: [usize; 3]) -> [i32; 3] {
    [c % dims[0], c / dims[0] % dims[1], c / (dims[0] * dims[1])].map(|x| x as i32)
}

/// Checks a grid read back against the dense components it came from: active exactly where some component
/// set makes `is_active` true, bitwise equal there, and bounds and count metadata agreeing.
fn check_against_dense(
    grid: &ReadGrid,
    dense: &[Vec<f32>],
    dims: [usize; 3],
    is_active: impl Fn(&[f32]) -> bool,
) {
    let mut expected = std::collections::BTreeMap::new();
    for (c, v) in dense.iter().enumerate() {
        if is_active(v) {
            expected.insert(cell(c, dims), v.clone());
        }
    }
    assert_eq!(
        grid.active.len(),
        expected.len(),
        "{}: active voxel count",
        grid.name
    );
    for (xyz, v) in &expected {
        let got = grid
            .active
            .get(xyz)
            .unwrap_or_else(|| panic!("{}: voxel {xyz:?} not active", grid.name));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(got), bits(v), "{}: voxel {xyz:?}", grid.name);
    }
    assert_eq!(
        grid.metadata["file_voxel_count"],
        MetaValue::Int64(expected.len() as i64)
    );
    if let (Some(first), Some(_)) = (expected.keys().next(), expected.keys().last()) {
        let lo = expected
            .keys()
            .fold(*first, |m, k| [0, 1, 2].map(|a| m[a].min(k[a])));
        let hi = expected
            .keys()
            .fold(*first, |m, k| [0, 1, 2].map(|a| m[a].max(k[a])));
        assert_eq!(
            grid.metadata["file_bbox_min"],
            MetaValue::Vec3i(lo),
            "{}",
            grid.name
        );
        assert_eq!(
            grid.metadata["file_bbox_max"],
            MetaValue::Vec3i(hi),
            "{}",
            grid.name
        );
    }
}

#[test]
fn float_and_vec3_grids_read_back_voxel_by_voxel() {
    // Dimensions not multiples of 8, so that the last leaves along each axis are partial.
    let dims = [37, 20, 13];
    let n = dims.iter().product();
    let tolerance = 0.25f32;
    // Mostly zero, with values straddling the tolerance: exactly at it (inactive), just above (active).
    let density: Vec<f32> = samples(n, 1)
        .iter()
        .map(|&s| match s {
            s if s < 0.0 => 0.0,
            s if s < 0.1 => tolerance,
            s if s < 0.2 => f32::from_bits(tolerance.to_bits() + 1),
            s => s,
        })
        .collect();
    let temperature: Vec<f32> = samples(n, 2)
        .iter()
        .map(|&s| if s > 0.9 { 300.0 * s } else { 0.0 })
        .collect();
    let (a, b, c) = (samples(n, 3), samples(n, 4), samples(n, 5));
    let velocity: Vec<[f32; 3]> = (0..n)
        .map(|i| [a[i], b[i], c[i]].map(|x| if a[i] > 0.0 { x * 0.3 } else { 0.0 }))
        .collect();
    let grids = [
        VdbGrid {
            name: "density",
            class: GridClass::FogVolume,
            values: VdbValues::Float(&density),
        },
        VdbGrid {
            name: "temperature",
            class: GridClass::Unknown,
            values: VdbValues::Float(&temperature),
        },
        VdbGrid {
            name: "velocity",
            class: GridClass::Unknown,
            values: VdbValues::Vec3(&velocity),
        },
    ];
    let bytes = write_vdb(&grids, dims, 0.1, [1.0, -2.0, 0.5], tolerance).expect("valid grids");
    let file = read_vdb(&bytes).expect("the strict reader accepts the file");
    let names: Vec<&str> = file.grids.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["density", "temperature", "velocity"]);

    let scalar = |v: &[f32]| v.iter().map(|&x| vec![x]).collect::<Vec<_>>();
    check_against_dense(&file.grids[0], &scalar(&density), dims, |v| {
        v[0].abs() > tolerance
    });
    check_against_dense(&file.grids[1], &scalar(&temperature), dims, |v| {
        v[0].abs() > tolerance
    });
    let vectors: Vec<Vec<f32>> = velocity.iter().map(|v| v.to_vec()).collect();
    let length = |v: &[f32]| {
        v.iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>()
            .sqrt()
    };
    check_against_dense(&file.grids[2], &vectors, dims, |v| {
        length(v) > f64::from(tolerance)
    });
    assert_eq!(file.grids[0].grid_type, "Tree_float_5_4_3");
    assert_eq!(file.grids[2].grid_type, "Tree_vec3s_5_4_3");
}

#[test]
fn metadata_carries_class_name_and_vector_type() {
    let dims = [8, 8, 8];
    let ones = vec![1.0f32; 512];
    let up = vec![[0.0f32, 0.0, 1.0]; 512];
    let grids = [
        VdbGrid {
            name: "density",
            class: GridClass::FogVolume,
            values: VdbValues::Float(&ones),
        },
        VdbGrid {
            name: "velocity",
            class: GridClass::Unknown,
            values: VdbValues::Vec3(&up),
        },
    ];
    let file =
        read_vdb(&write_vdb(&grids, dims, 1.0, [0.0; 3], 0.0).expect("valid")).expect("readable");
    let string = |s: &str| MetaValue::String(s.to_owned());
    let (density, velocity) = (&file.grids[0].metadata, &file.grids[1].metadata);
    assert_eq!(density["class"], string("fog volume"));
    assert_eq!(density["name"], string("density"));
    assert_eq!(density["is_local_space"], MetaValue::Bool(false));
    assert_eq!(density["is_saved_as_half_float"], MetaValue::Bool(false));
    assert!(!density.contains_key("vector_type"));
    assert_eq!(velocity["class"], string("unknown"));
    assert_eq!(velocity["vector_type"], string("contravariant relative"));
    // One full leaf under one node of each internal level: OpenVDB's memUsage is dominated by the upper
    // node's 32768 8-byte entries (float) or 12-byte ones (vec3s), so the estimate lies above those.
    for (meta, entry) in [(density, 8), (velocity, 12)] {
        let MetaValue::Int64(bytes) = meta["file_mem_bytes"] else {
            panic!("file_mem_bytes")
        };
        assert!(
            bytes > 32768 * entry && bytes < 2 * 32768 * entry,
            "file_mem_bytes {bytes}"
        );
    }
}

#[test]
fn leaves_across_internal_nodes_come_in_openvdb_order() {
    // Active voxels on both sides of an upper-node boundary (x = 4096) and of lower-node boundaries (y and
    // z = 128), so that the root holds two children and the strict reader checks the depth-first order.
    let dims = [4100, 130, 3];
    let mut density = vec![0f32; dims.iter().product()];
    let points = [
        [0, 0, 0],
        [4095, 129, 2],
        [4096, 0, 1],
        [4099, 127, 0],
        [127, 128, 2],
        [2000, 64, 1],
    ];
    for (k, p) in points.iter().enumerate() {
        density[p[0] + dims[0] * (p[1] + dims[1] * p[2])] = k as f32 + 1.0;
    }
    let grids = [VdbGrid {
        name: "density",
        class: GridClass::FogVolume,
        values: VdbValues::Float(&density),
    }];
    let file =
        read_vdb(&write_vdb(&grids, dims, 0.01, [0.0; 3], 0.0).expect("valid")).expect("readable");
    let grid = &file.grids[0];
    // Upper nodes: x < 4096 and x ≥ 4096. Lower nodes of 128³: 5 distinct ones. Leaves: one per point.
    assert_eq!(grid.node_counts, [2, 5, 6]);
    for (k, p) in points.iter().enumerate() {
        assert_eq!(grid.active[&p.map(|x| x as i32)], vec![k as f32 + 1.0]);
    }
    assert_eq!(
        grid.metadata["file_bbox_max"],
        MetaValue::Vec3i([4099, 129, 2])
    );
}

#[test]
fn empty_grid_has_no_nodes_and_openvdb_empty_bounds() {
    let zeros = vec![0f32; 24];
    let grids = [VdbGrid {
        name: "density",
        class: GridClass::FogVolume,
        values: VdbValues::Float(&zeros),
    }];
    let file = read_vdb(&write_vdb(&grids, [2, 3, 4], 1.0, [0.0; 3], 0.0).expect("valid"))
        .expect("readable");
    let grid = &file.grids[0];
    assert_eq!(grid.node_counts, [0, 0, 0]);
    assert_eq!(grid.metadata["file_voxel_count"], MetaValue::Int64(0));
    assert_eq!(
        grid.metadata["file_bbox_min"],
        MetaValue::Vec3i([i32::MAX; 3])
    );
    assert_eq!(
        grid.metadata["file_bbox_max"],
        MetaValue::Vec3i([i32::MIN; 3])
    );
}

#[test]
fn voxel_centres_land_on_cell_centres() {
    let (h, origin) = (0.05, [-1.0, 2.0, 0.25]);
    let density = vec![1.0f32; 8];
    let grids = [VdbGrid {
        name: "density",
        class: GridClass::FogVolume,
        values: VdbValues::Float(&density),
    }];
    let file =
        read_vdb(&write_vdb(&grids, [2, 2, 2], h, origin, 0.0).expect("valid")).expect("readable");
    let grid = &file.grids[0];
    assert_eq!(grid.scale, h);
    // Cell (i, j, k) spans origin + h [i, i + 1]; OpenVDB puts voxel (i, j, k) at scale · index + translation.
    // One rounding in origin + h/2 and one in the product: 1e-15 m is a few ulps at these magnitudes.
    for ijk in [[0, 0, 0], [1, 0, 1], [1, 1, 1]] {
        for a in 0..3 {
            let voxel_centre = grid.scale * f64::from(ijk[a]) + grid.translation[a];
            let cell_centre = origin[a] + h * (f64::from(ijk[a]) + 0.5);
            assert!(
                (voxel_centre - cell_centre).abs() < 1e-15,
                "{ijk:?} axis {a}: {voxel_centre} vs {cell_centre}"
            );
        }
    }
}

#[test]
fn vec3_activity_follows_the_vector_length() {
    let tolerance = 1.0;
    // Each component below the tolerance but length 1.13 > 1: active. Length 0.87: inactive.
    let velocity = [[0.8, 0.8, 0.0], [0.5, 0.5, 0.5]];
    let grids = [VdbGrid {
        name: "velocity",
        class: GridClass::Unknown,
        values: VdbValues::Vec3(&velocity),
    }];
    let file = read_vdb(&write_vdb(&grids, [2, 1, 1], 1.0, [0.0; 3], tolerance).expect("valid"))
        .expect("readable");
    let active: Vec<[i32; 3]> = file.grids[0].active.keys().copied().collect();
    assert_eq!(active, [[0, 0, 0]]);
}

#[test]
fn non_finite_samples_stay_visible() {
    let density = [f32::NAN, f32::INFINITY, 0.0, f32::NEG_INFINITY];
    let grids = [VdbGrid {
        name: "density",
        class: GridClass::FogVolume,
        values: VdbValues::Float(&density),
    }];
    let file = read_vdb(&write_vdb(&grids, [4, 1, 1], 1.0, [0.0; 3], 1e-3).expect("valid"))
        .expect("readable");
    let active = &file.grids[0].active;
    assert_eq!(active.len(), 3);
    assert!(active[&[0, 0, 0]][0].is_nan());
    assert_eq!(active[&[3, 0, 0]][0], f32::NEG_INFINITY);
}

#[test]
fn same_fields_give_same_bytes_and_others_another_uuid() {
    let a = vec![1.0f32; 27];
    let mut b = a.clone();
    b[13] = 2.0;
    let write = |v: &[f32]| {
        let grids = [VdbGrid {
            name: "density",
            class: GridClass::FogVolume,
            values: VdbValues::Float(v),
        }];
        write_vdb(&grids, [3, 3, 3], 1.0, [0.0; 3], 0.0).expect("valid")
    };
    assert_eq!(write(&a), write(&a));
    let uuid = |bytes: Vec<u8>| read_vdb(&bytes).expect("readable").uuid;
    assert_ne!(uuid(write(&a)), uuid(write(&b)));
}

#[test]
fn invalid_arguments_are_errors() {
    let one = [1.0f32; 8];
    let seven = [1.0f32; 7];
    let grid = |name, values| VdbGrid {
        name,
        class: GridClass::FogVolume,
        values: VdbValues::Float(values),
    };
    let write = |grids: &[VdbGrid], h, origin, tol| write_vdb(grids, [2, 2, 2], h, origin, tol);
    let ok = [grid("density", &one)];
    assert!(matches!(
        write(&[grid("d", &seven)], 1.0, [0.0; 3], 0.0),
        Err(VdbError::LengthMismatch {
            expected: 8,
            got: 7,
            ..
        })
    ));
    assert_eq!(
        write(&[grid("", &one)], 1.0, [0.0; 3], 0.0),
        Err(VdbError::EmptyName { index: 0 })
    );
    assert!(matches!(
        write(&[grid("a\u{1e}", &one)], 1.0, [0.0; 3], 0.0),
        Err(VdbError::ControlCharacterInName { .. })
    ));
    assert!(matches!(
        write(&[grid("d", &one), grid("d", &one)], 1.0, [0.0; 3], 0.0),
        Err(VdbError::DuplicateName { .. })
    ));
    for h in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            matches!(
                write(&ok, h, [0.0; 3], 0.0),
                Err(VdbError::InvalidVoxelSize { .. })
            ),
            "voxel size {h}"
        );
    }
    assert!(matches!(
        write(&ok, 1.0, [0.0, f64::NAN, 0.0], 0.0),
        Err(VdbError::NonFiniteOrigin { .. })
    ));
    for tol in [-1.0, f32::NAN, f32::INFINITY] {
        assert!(
            matches!(
                write(&ok, 1.0, [0.0; 3], tol),
                Err(VdbError::InvalidTolerance { .. })
            ),
            "tolerance {tol}"
        );
    }
    let huge = [usize::MAX / 2, 4, 4];
    assert!(matches!(
        write_vdb(&ok, huge, 1.0, [0.0; 3], 0.0),
        Err(VdbError::DimensionsTooLarge { .. })
    ));
    assert!(write(&ok, 1.0, [0.0; 3], 0.0).is_ok());
}
