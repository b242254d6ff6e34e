//! PLY, the Stanford polygon format (Turk 1994; <http://paulbourke.net/dataformats/ply/>): point clouds and
//! triangle meshes in binary little-endian, and a strict reader of any PLY file ([`read`]).
//!
//! # What is written
//! * Point clouds ([`points`]): one `vertex` element with `float x`, `float y`, `float z` (z = 0 for 2D
//!   data), then one property per scalar attribute under its own name (`float`, `int` or `uchar`), and three
//!   `float` properties `NAME_x NAME_y NAME_z` per vector attribute (`NAME_x NAME_y` for 2-vectors). The
//!   suffixes keep each property's attribute unambiguous for any name; Houdini imports every property as a
//!   point attribute by its name, ParaView as a point array. One exception: a vector attribute named
//!   `normal` is written as `nx ny nz`, the names Blender, MeshLab and CloudCompare read as normals.
//! * Meshes ([`mesh`]): `vertex` with `float x y z` (and `float nx ny nz` if normals are given), then `face`
//!   with `property list uchar int vertex_indices`, three 0-based indices per triangle in the mesh's winding
//!   (counter-clockwise seen from outside for eddies' surfaces).
//!
//! Headers end their lines with `\n` and carry one comment, `comment written by eddies`.

mod read;
#[cfg(test)]
mod tests;

pub use read::{read, Element, Format, Ply, Property, PropertyData, ScalarType};

/// The comment line of every header eddies writes.
const COMMENT: &str = "written by eddies";

/// One per-point attribute of a point cloud: a PLY property name and one value per point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attribute<'a> {
    /// The property name (for vectors, the stem of `NAME_x NAME_y NAME_z`): ASCII letters, digits and `_`,
    /// not starting with a digit.
    pub name: &'a str,
    /// The values.
    pub values: Values<'a>,
}

/// The values of an [`Attribute`], one per point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Values<'a> {
    /// PLY `float`.
    F32(&'a [f32]),
    /// PLY `int`.
    I32(&'a [i32]),
    /// PLY `uchar`.
    U8(&'a [u8]),
    /// Two `float` properties, `NAME_x NAME_y`.
    Vec2(&'a [[f32; 2]]),
    /// Three `float` properties, `NAME_x NAME_y NAME_z` (`nx ny nz` for `normal`).
    Vec3(&'a [[f32; 3]]),
}

impl<'a> Attribute<'a> {
    /// An attribute named `name` with `values`.
    pub fn new(name: &'a str, values: Values<'a>) -> Self {
        Self { name, values }
    }
}

/// Why a PLY file could not be written or read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlyError {
    /// An attribute (or normals) has a different length from the positions.
    #[error("`{name}` has {found} values for {expected} points")]
    LengthMismatch {
        /// The attribute's name.
        name: String,
        /// The number of points.
        expected: usize,
        /// The number of values.
        found: usize,
    },
    /// A name is not usable as a PLY property name.
    #[error(
        "`{0}` is not a property name (ASCII letters, digits and `_`, not starting with a digit)"
    )]
    BadName(String),
    /// Two properties would have the same name.
    #[error("property `{0}` appears twice")]
    DuplicateName(String),
    /// Positions of a dimension other than 2 or 3.
    #[error("positions of dimension {0}: only 2 and 3 are written")]
    Dimension(usize),
    /// A triangle refers to a vertex that does not exist.
    #[error("triangle {triangle} refers to vertex {index} of {vertices}")]
    IndexOutOfRange {
        /// The triangle's index.
        triangle: usize,
        /// The offending vertex index.
        index: u32,
        /// The number of vertices.
        vertices: usize,
    },
    /// More vertices than a PLY `int` index can address.
    #[error("{0} vertices: PLY `int` indices address at most 2³¹ − 1")]
    TooManyVertices(usize),
    /// The file does not start with the line `ply`.
    #[error("not a PLY file: it does not start with the line `ply`")]
    Magic,
    /// A header line is malformed, unknown or out of place.
    #[error("PLY header line {line}: {reason}")]
    Header {
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The data ends before the header's elements are complete.
    #[error("PLY data ends inside {element} {index}")]
    Truncated {
        /// The element's name.
        element: String,
        /// The index of the incomplete instance.
        index: usize,
    },
    /// A value does not fit its property's type, or a list count is negative.
    #[error("PLY {element} {index}: {reason}")]
    Value {
        /// The element's name.
        element: String,
        /// The instance's index.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// Bytes follow the last element.
    #[error("{0} bytes after the last PLY element")]
    TrailingBytes(usize),
}

/// A binary little-endian PLY point cloud: positions (2D ones get z = 0) and per-point attributes, as
/// described in the [module doc](self).
///
/// # Errors
/// [`PlyError::Dimension`] unless `D` is 2 or 3, [`PlyError::LengthMismatch`] for an attribute whose length
/// is not the number of points, [`PlyError::BadName`] / [`PlyError::DuplicateName`] for unusable names.
pub fn points<const D: usize>(
    positions: &[[f32; D]],
    attributes: &[Attribute],
) -> Result<Vec<u8>, PlyError> {
    if D != 2 && D != 3 {
        return Err(PlyError::Dimension(D));
    }
    let n = positions.len();
    let mut columns: Vec<(String, &'static str)> =
        ["x", "y", "z"].map(|c| (c.to_string(), "float")).to_vec();
    for a in attributes {
        check_name(a.name)?;
        let (len, names, ty) = match a.values {
            Values::F32(v) => (v.len(), vec![a.name.to_string()], "float"),
            Values::I32(v) => (v.len(), vec![a.name.to_string()], "int"),
            Values::U8(v) => (v.len(), vec![a.name.to_string()], "uchar"),
            Values::Vec2(v) => (v.len(), vector_names(a.name, 2), "float"),
            Values::Vec3(v) => (v.len(), vector_names(a.name, 3), "float"),
        };
        if len != n {
            return Err(PlyError::LengthMismatch {
                name: a.name.to_string(),
                expected: n,
                found: len,
            });
        }
        for name in names {
            if columns.iter().any(|(c, _)| *c == name) {
                return Err(PlyError::DuplicateName(name));
            }
            columns.push((name, ty));
        }
    }

    let mut out = header(&[("vertex", n, &columns)]);
    let stride: usize = columns
        .iter()
        .map(|(_, ty)| if *ty == "uchar" { 1 } else { 4 })
        .sum();
    let body = out.len();
    out.resize(body + n * stride, 0);
    let records = &mut out[body..];
    // Column by column: each pass is a tight loop that the compiler specialises for the column's type.
    let mut at = 0;
    let position =
        |c: usize| move |i: usize| (if c < D { positions[i][c] } else { 0.0 }).to_le_bytes();
    for c in [0, 1, 2] {
        at = put_column(records, stride, at, position(c));
    }
    for a in attributes {
        at = match a.values {
            Values::F32(v) => put_column(records, stride, at, |i| v[i].to_le_bytes()),
            Values::I32(v) => put_column(records, stride, at, |i| v[i].to_le_bytes()),
            Values::U8(v) => put_column(records, stride, at, |i| [v[i]]),
            Values::Vec2(v) => put_column(records, stride, at, |i| f32_bytes::<2, 8>(v[i])),
            Values::Vec3(v) => put_column(records, stride, at, |i| f32_bytes::<3, 12>(v[i])),
        };
    }
    Ok(out)
}

/// A binary little-endian PLY triangle mesh: `vertex` (`x y z`, and `nx ny nz` unless `normals` is empty)
/// and `face` (`vertex_indices`, 0-based, in the given winding).
///
/// # Errors
/// [`PlyError::LengthMismatch`] if `normals` is neither empty nor one per position,
/// [`PlyError::IndexOutOfRange`] for a triangle index past the positions, [`PlyError::TooManyVertices`]
/// beyond what a PLY `int` can index.
pub fn mesh(
    positions: &[[f32; 3]],
    normals: &[[f32; 3]],
    triangles: &[[u32; 3]],
) -> Result<Vec<u8>, PlyError> {
    let n = positions.len();
    check_mesh(n, normals.len(), triangles)?;
    let with_normals = !normals.is_empty();
    let names: &[&str] = if with_normals {
        &["x", "y", "z", "nx", "ny", "nz"]
    } else {
        &["x", "y", "z"]
    };
    let vertex: Vec<(String, &str)> = names.iter().map(|c| (c.to_string(), "float")).collect();
    let face = vec![("vertex_indices".to_string(), "list uchar int")];
    let mut out = header(&[("vertex", n, &vertex), ("face", triangles.len(), &face)]);
    out.reserve(n * 4 * names.len() + triangles.len() * 13);
    for (i, p) in positions.iter().enumerate() {
        let mut rec = [0u8; 24];
        put_f32s(&mut rec[..12], p);
        if with_normals {
            put_f32s(&mut rec[12..], &normals[i]);
        }
        out.extend_from_slice(&rec[..4 * names.len()]);
    }
    for t in triangles {
        let mut rec = [3u8; 13];
        put_u32s(&mut rec[1..], t);
        out.extend_from_slice(&rec);
    }
    Ok(out)
}

/// Checks a mesh's normals' length and its triangles' indices against `n` vertices; shared with [`crate::obj`].
pub(crate) fn check_mesh(n: usize, normals: usize, triangles: &[[u32; 3]]) -> Result<(), PlyError> {
    if normals != 0 && normals != n {
        return Err(PlyError::LengthMismatch {
            name: "normals".to_string(),
            expected: n,
            found: normals,
        });
    }
    if n > i32::MAX as usize {
        return Err(PlyError::TooManyVertices(n));
    }
    for (triangle, t) in triangles.iter().enumerate() {
        if let Some(&index) = t.iter().find(|&&v| v as usize >= n) {
            return Err(PlyError::IndexOutOfRange {
                triangle,
                index,
                vertices: n,
            });
        }
    }
    Ok(())
}

/// An element of a header: its name, count and properties as `(name, type)`.
type ElementSpec<'a> = (&'a str, usize, &'a [(String, &'a str)]);

/// The header text, each element with its count and its properties as `(name, type)`; a type is a scalar
/// type name or `list COUNT ITEM`.
fn header(elements: &[ElementSpec]) -> Vec<u8> {
    let mut h = format!("ply\nformat binary_little_endian 1.0\ncomment {COMMENT}\n");
    for (name, count, properties) in elements {
        h.push_str(&format!("element {name} {count}\n"));
        for (p, ty) in properties.iter() {
            h.push_str(&format!("property {ty} {p}\n"));
        }
    }
    h.push_str("end_header\n");
    h.into_bytes()
}

/// The property names of a vector attribute's components.
fn vector_names(name: &str, dim: usize) -> Vec<String> {
    if name == "normal" && dim == 3 {
        return ["nx", "ny", "nz"].map(String::from).to_vec();
    }
    ["x", "y", "z"][..dim]
        .iter()
        .map(|c| format!("{name}_{c}"))
        .collect()
}

fn check_name(name: &str) -> Result<(), PlyError> {
    let ok = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.bytes().next().is_some_and(|b| !b.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(PlyError::BadName(name.to_string()))
    }
}

/// Writes `bytes(i)` at byte `at` of each record `i` of length `stride`; returns the next column's offset.
fn put_column<const W: usize>(
    records: &mut [u8],
    stride: usize,
    at: usize,
    bytes: impl Fn(usize) -> [u8; W],
) -> usize {
    if stride > 0 {
        for (i, rec) in records.chunks_exact_mut(stride).enumerate() {
            rec[at..at + W].copy_from_slice(&bytes(i));
        }
    }
    at + W
}

/// The little-endian bytes of `N` floats, `B = 4·N` of them.
fn f32_bytes<const N: usize, const B: usize>(xs: [f32; N]) -> [u8; B] {
    let mut out = [0; B];
    put_f32s(&mut out, &xs);
    out
}

fn put_f32s(out: &mut [u8], xs: &[f32]) {
    for (b, x) in out.chunks_exact_mut(4).zip(xs) {
        b.copy_from_slice(&x.to_le_bytes());
    }
}

/// Writes indices already checked to be below 2³¹ as little-endian `int`s.
fn put_u32s(out: &mut [u8], xs: &[u32]) {
    for (b, x) in out.chunks_exact_mut(4).zip(xs) {
        b.copy_from_slice(&x.to_le_bytes());
    }
}
