//! Wavefront OBJ triangle meshes: the plainest mesh format, read by every 3D tool.
//!
//! A file holds one comment line (`# written by eddies: V vertices, T triangles`), then `v x y z` per vertex,
//! `vn nx ny nz` per vertex if normals are given, and `f a//a b//b c//c` per triangle (`f a b c` without
//! normals) with 1-based indices in the mesh's winding (counter-clockwise seen from outside for eddies'
//! surfaces). Numbers are written in Rust's shortest form that reads back to the same `f32`, without exponent.

use crate::ply::{check_mesh, PlyError};
use std::fmt::Write as _;

/// Why an OBJ file could not be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ObjError {
    /// Normals of the wrong length, or a triangle index past the vertices (the checks PLY makes).
    #[error(transparent)]
    Mesh(#[from] PlyError),
    /// A position or normal is NaN or infinite, which OBJ readers do not parse.
    #[error("vertex {0} has a NaN or infinite coordinate")]
    NonFinite(usize),
}

/// An OBJ text of a triangle mesh: `positions` (m), `normals` (one per position, or none) and 0-based
/// `triangles`.
///
/// # Errors
/// [`ObjError::Mesh`] if `normals` is neither empty nor one per position or a triangle index is past the
/// positions; [`ObjError::NonFinite`] for a NaN or infinite coordinate.
pub fn mesh(
    positions: &[[f32; 3]],
    normals: &[[f32; 3]],
    triangles: &[[u32; 3]],
) -> Result<String, ObjError> {
    check_mesh(positions.len(), normals.len(), triangles)?;
    let bad = |v: &[[f32; 3]]| v.iter().position(|p| p.iter().any(|x| !x.is_finite()));
    if let Some(v) = bad(positions).or_else(|| bad(normals)) {
        return Err(ObjError::NonFinite(v));
    }
    // About 30 bytes a vertex line and 25 a face line at typical magnitudes.
    let mut out = String::with_capacity(60 * positions.len() + 40 * triangles.len());
    // Writing to a String cannot fail, so the fmt::Results below carry nothing.
    let _ = writeln!(
        out,
        "# written by eddies: {} vertices, {} triangles",
        positions.len(),
        triangles.len()
    );
    for (tag, rows) in [("v", positions), ("vn", normals)] {
        for [x, y, z] in rows {
            let _ = writeln!(out, "{tag} {x} {y} {z}");
        }
    }
    let mut index = itoa_buffer();
    for t in triangles {
        out.push('f');
        for &v in t {
            out.push(' ');
            let i = format_index(&mut index, v);
            out.push_str(i);
            if !normals.is_empty() {
                out.push_str("//");
                out.push_str(i);
            }
        }
        out.push('\n');
    }
    Ok(out)
}

/// Room for the decimal digits of any `u32` + 1.
fn itoa_buffer() -> [u8; 10] {
    [0; 10]
}

/// The decimal text of the 1-based index `v + 1`: faster than `write!` for the bulk of an OBJ file.
fn format_index(buf: &mut [u8; 10], v: u32) -> &str {
    let mut n = u64::from(v) + 1;
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[start..]).unwrap_or("0")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses the lines `mesh` writes: vertices, normals and faces as 0-based `(vertex, normal)` pairs.
    #[allow(clippy::type_complexity)]
    fn parse(text: &str) -> (Vec<[f32; 3]>, Vec<[f32; 3]>, Vec<[(u32, Option<u32>); 3]>) {
        let (mut v, mut vn, mut f) = (Vec::new(), Vec::new(), Vec::new());
        for line in text.lines() {
            let mut words = line.split(' ');
            let tag = words.next().expect("a tag");
            let rest: Vec<&str> = words.collect();
            let floats = || -> [f32; 3] {
                assert_eq!(rest.len(), 3, "{line}");
                std::array::from_fn(|c| rest[c].parse().expect("a float"))
            };
            match tag {
                "#" => {}
                "v" => v.push(floats()),
                "vn" => vn.push(floats()),
                "f" => {
                    assert_eq!(rest.len(), 3, "{line}");
                    f.push(std::array::from_fn(|c| {
                        let mut parts = rest[c].split("//");
                        let one =
                            |s: Option<&str>| s.map(|s| s.parse::<u32>().expect("an index") - 1);
                        let vi = one(parts.next()).expect("a vertex index");
                        (vi, one(parts.next()))
                    }));
                }
                _ => panic!("unexpected line {line}"),
            }
        }
        (v, vn, f)
    }

    #[test]
    fn meshes_round_trip_exactly() {
        let pos = [
            [0.1f32, -2.5e-7, 3.0e7],
            [1.0 / 3.0, f32::MAX, f32::MIN_POSITIVE],
            [0.0, -0.0, 12345.678],
        ];
        let nrm = [[0.0f32, 0.0, 1.0], [0.6, 0.8, 0.0], [-1.0, 0.0, 0.0]];
        let tri = [[0u32, 1, 2], [2, 1, 0]];
        let text = mesh(&pos, &nrm, &tri).expect("valid");
        assert!(
            text.starts_with("# written by eddies: 3 vertices, 2 triangles\nv 0.1 "),
            "{text}"
        );
        let (v, vn, f) = parse(&text);
        // Bitwise equal: the shortest round-trip form reads back to the same f32 (including -0).
        let bits = |a: &[[f32; 3]]| a.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&v), bits(&pos));
        assert_eq!(bits(&vn), bits(&nrm));
        let expected: Vec<[(u32, Option<u32>); 3]> =
            tri.iter().map(|t| t.map(|i| (i, Some(i)))).collect();
        assert_eq!(f, expected);
        let (_, vn, f) = parse(&mesh(&pos, &[], &tri).expect("valid"));
        assert!(vn.is_empty());
        assert_eq!(f[1], [(2, None), (1, None), (0, None)]);
    }

    #[test]
    fn indices_are_formatted_one_based() {
        let mut buf = itoa_buffer();
        assert_eq!(format_index(&mut buf, 0), "1");
        assert_eq!(format_index(&mut buf, 9), "10");
        assert_eq!(format_index(&mut buf, u32::MAX), "4294967296");
    }

    #[test]
    fn bad_meshes_are_errors() {
        let pos = [[0.0f32; 3]; 3];
        assert!(matches!(
            mesh(&pos, &[], &[[0, 1, 3]]),
            Err(ObjError::Mesh(PlyError::IndexOutOfRange { .. }))
        ));
        assert!(matches!(
            mesh(&pos, &[[0.0; 3]], &[]),
            Err(ObjError::Mesh(PlyError::LengthMismatch { .. }))
        ));
        let nan = [[0.0, 0.0, 0.0], [0.0, f32::NAN, 0.0]];
        assert_eq!(mesh(&nan, &[], &[]), Err(ObjError::NonFinite(1)));
    }

    /// A large mesh (500k vertices, 1M triangles, about 45 MB) has a line for each vertex, normal and face,
    /// and its last face names the last vertices, counted from 1. How fast it is written is `eddies bench
    /// outputs-3d-flip` (`write-mesh`), not a test's concern.
    #[test]
    fn a_million_triangles_are_a_line_each() {
        let n = 500_000u32;
        let pos: Vec<[f32; 3]> = (0..n)
            .map(|i| [i as f32 * 1e-3, (i % 977) as f32 / 977.0, 0.5])
            .collect();
        let tri: Vec<[u32; 3]> = (0..2 * n)
            .map(|i| [i / 2, (i / 2 + 1) % n, (i / 2 + 2) % n])
            .collect();
        let text = mesh(&pos, &pos, &tri).expect("valid");
        assert_eq!(text.lines().count(), 1 + 2 * n as usize + tri.len());
        let [a, b, c] = tri.last().unwrap().map(|v| v + 1);
        assert_eq!(
            text.lines().last(),
            Some(format!("f {a}//{a} {b}//{b} {c}//{c}").as_str())
        );
    }
}
