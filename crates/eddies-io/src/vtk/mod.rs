//! VTK XML files for ParaView and VisIt: `.vti` image data (a uniform grid's cell fields), `.vtp` poly data
//! (particles with their attributes) and the `.pvd` collection that gives each file its simulated time.
//!
//! Data is binary, appended after the XML in raw form (`<AppendedData encoding="raw">`, VTK's file format
//! documentation, "Appended data"): each array is a 64-bit little-endian byte count (`header_type="UInt64"`)
//! followed by its little-endian values, and each `DataArray` names the offset of its block from the byte
//! after the `_` that opens the section. Raw appended data is the smallest and fastest form ParaView reads;
//! ASCII would triple the size and base64 add a third.

use std::borrow::Cow;
use std::fmt::Write as _;

/// One named array of a dataset: `components` values per cell or point (1 for a scalar, 3 for a vector).
#[derive(Clone, Copy, Debug)]
pub struct VtkArray<'a> {
    /// The name ParaView shows.
    pub name: &'a str,
    /// Values per tuple.
    pub components: usize,
    /// Values, tuple by tuple.
    pub values: &'a [f32],
}

/// Why arrays cannot be written as a VTK file.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum VtkError {
    /// An array's length is not its tuple count times its components.
    #[error(
        "array `{name}` has {len} values, but {tuples} tuples of {components} need {expected}"
    )]
    Length {
        /// The array.
        name: String,
        /// Values given.
        len: usize,
        /// Tuples of the dataset.
        tuples: usize,
        /// Values per tuple.
        components: usize,
        /// Values needed.
        expected: usize,
    },
    /// A name that XML or ParaView cannot carry (empty, or with quotes, angle brackets or control
    /// characters), or used twice.
    #[error("array name {0:?} is empty, repeated or holds characters an XML attribute cannot")]
    Name(String),
    /// Positions are not 3 values per point, or the grid's spacing is not positive and finite.
    #[error("{0}")]
    Geometry(String),
}

/// An XML document with its appended binary blocks, assembled as arrays are added: the blocks are borrowed
/// where the values already are little-endian bytes in memory, and copied once, into the file.
struct Appended<'a> {
    xml: String,
    blocks: Vec<Cow<'a, [u8]>>,
    offset: usize,
    names: Vec<String>,
}

/// Little-endian bytes of `values`: the values' own memory on a little-endian machine.
fn le_bytes<T: bytemuck::Pod, const N: usize>(
    values: &[T],
    to_le: fn(T) -> [u8; N],
) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        Cow::Borrowed(bytemuck::cast_slice(values))
    } else {
        Cow::Owned(values.iter().flat_map(|&x| to_le(x)).collect())
    }
}

impl<'a> Appended<'a> {
    fn new(kind: &str) -> Self {
        let mut xml = String::new();
        let _ = writeln!(
            xml,
            "<?xml version=\"1.0\"?>\n<VTKFile type=\"{kind}\" version=\"1.0\" byte_order=\"LittleEndian\" \
             header_type=\"UInt64\">"
        );
        Self {
            xml,
            blocks: Vec::new(),
            offset: 0,
            names: Vec::new(),
        }
    }

    /// A `DataArray` element for `bytes` (little-endian values), its block appended.
    fn array(&mut self, vtk_type: &str, name: &str, components: usize, bytes: Cow<'a, [u8]>) {
        let _ = writeln!(
            self.xml,
            "        <DataArray type=\"{vtk_type}\" Name=\"{name}\" NumberOfComponents=\"{components}\" \
             format=\"appended\" offset=\"{}\"/>",
            self.offset
        );
        self.offset += 8 + bytes.len();
        self.blocks.push(bytes);
    }

    /// Checks and adds the named arrays of a dataset of `tuples` cells or points.
    fn arrays(&mut self, tuples: usize, arrays: &[VtkArray<'a>]) -> Result<(), VtkError> {
        for a in arrays {
            let bad = |c: char| c.is_control() || "\"<>&".contains(c);
            if a.name.is_empty()
                || a.name.chars().any(bad)
                || self.names.iter().any(|n| n == a.name)
            {
                return Err(VtkError::Name(a.name.to_string()));
            }
            let expected = tuples * a.components;
            if a.components == 0 || a.values.len() != expected {
                return Err(VtkError::Length {
                    name: a.name.to_string(),
                    len: a.values.len(),
                    tuples,
                    components: a.components,
                    expected,
                });
            }
            self.names.push(a.name.to_string());
            self.array(
                "Float32",
                a.name,
                a.components,
                le_bytes(a.values, f32::to_le_bytes),
            );
        }
        Ok(())
    }

    fn finish(mut self, closing: &str) -> Vec<u8> {
        self.xml.push_str(closing);
        self.xml.push_str("  <AppendedData encoding=\"raw\">\n   _");
        let tail = b"\n  </AppendedData>\n</VTKFile>\n";
        let mut out = Vec::with_capacity(self.xml.len() + self.offset + tail.len());
        out.extend_from_slice(self.xml.as_bytes());
        for b in &self.blocks {
            out.extend_from_slice(&(b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
        }
        out.extend_from_slice(tail);
        out
    }
}

/// A `.vti` file: a grid of `cells` (`[nx, ny, nz]`, `nz = 1` in 2D) cells of edge `spacing` (m) whose lower
/// corner is `origin` (m), with `cell_data` of one tuple per cell, x fastest (the simulation's C order
/// `[nz, ny, nx]`).
pub fn image_data<'a>(
    cells: [usize; 3],
    origin: [f64; 3],
    spacing: f64,
    cell_data: &[VtkArray<'a>],
) -> Result<Vec<u8>, VtkError> {
    if !(spacing.is_finite() && spacing > 0.0) || origin.iter().any(|o| !o.is_finite()) {
        return Err(VtkError::Geometry(format!(
            "a grid needs a positive spacing and a finite origin (spacing {spacing}, origin {origin:?})"
        )));
    }
    let [nx, ny, nz] = cells;
    // Point extents: a flat grid (nz = 1) keeps its z extent at 0 0, which ParaView shows as a 2D image.
    let ez = if nz <= 1 { 0 } else { nz };
    let extent = format!("0 {nx} 0 {ny} 0 {ez}");
    let mut doc = Appended::new("ImageData");
    let _ = writeln!(
        doc.xml,
        "  <ImageData WholeExtent=\"{extent}\" Origin=\"{} {} {}\" Spacing=\"{spacing} {spacing} {spacing}\">\n    \
         <Piece Extent=\"{extent}\">\n      <CellData>",
        origin[0], origin[1], origin[2]
    );
    doc.arrays(nx * ny * nz.max(1), cell_data)?;
    doc.xml.push_str("      </CellData>\n");
    Ok(doc.finish("    </Piece>\n  </ImageData>\n"))
}

/// A `.vtp` file of points: `positions` (m), 3 values per point, each point also a vertex cell so that
/// ParaView draws it, with `point_data` of one tuple per point.
pub fn points<'a>(positions: &'a [f32], point_data: &[VtkArray<'a>]) -> Result<Vec<u8>, VtkError> {
    if !positions.len().is_multiple_of(3) {
        return Err(VtkError::Geometry(format!(
            "{} position values are not 3 per point",
            positions.len()
        )));
    }
    let n = positions.len() / 3;
    let mut doc = Appended::new("PolyData");
    let _ = writeln!(
        doc.xml,
        "  <PolyData>\n    <Piece NumberOfPoints=\"{n}\" NumberOfVerts=\"{n}\" NumberOfLines=\"0\" \
         NumberOfStrips=\"0\" NumberOfPolys=\"0\">\n      <PointData>"
    );
    doc.arrays(n, point_data)?;
    doc.xml.push_str("      </PointData>\n      <Points>\n");
    doc.array(
        "Float32",
        "Points",
        3,
        le_bytes(positions, f32::to_le_bytes),
    );
    doc.xml.push_str("      </Points>\n      <Verts>\n");
    // Vertex i is point i: 32-bit indices while they fit (half the bytes of VTK's default 64).
    let (kind, ids, offsets): (&str, Vec<u8>, Vec<u8>) = if i32::try_from(n).is_ok() {
        let ids: Vec<i32> = (0..n as i32).collect();
        let ends: Vec<i32> = (1..=n as i32).collect();
        (
            "Int32",
            le_bytes(&ids, i32::to_le_bytes).into_owned(),
            le_bytes(&ends, i32::to_le_bytes).into_owned(),
        )
    } else {
        let ids: Vec<i64> = (0..n as i64).collect();
        let ends: Vec<i64> = (1..=n as i64).collect();
        (
            "Int64",
            le_bytes(&ids, i64::to_le_bytes).into_owned(),
            le_bytes(&ends, i64::to_le_bytes).into_owned(),
        )
    };
    doc.array(kind, "connectivity", 1, Cow::Owned(ids));
    doc.array(kind, "offsets", 1, Cow::Owned(offsets));
    doc.xml.push_str("      </Verts>\n");
    Ok(doc.finish("    </Piece>\n  </PolyData>\n"))
}

/// One file of a `.pvd` collection.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectionEntry {
    /// Simulated time (s).
    pub time: f64,
    /// Which dataset of the time step (0 for the grid, 1 for the particles, say): ParaView shows each part
    /// as a block of one source.
    pub part: usize,
    /// The file, relative to the `.pvd`.
    pub file: String,
}

/// A `.pvd` collection: ParaView opens it as one time series, each file at its simulated time.
pub fn collection(entries: &[CollectionEntry]) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"1.0\" byte_order=\"LittleEndian\">\n  \
         <Collection>\n",
    );
    for e in entries {
        let _ = writeln!(
            xml,
            "    <DataSet timestep=\"{}\" part=\"{}\" file=\"{}\"/>",
            e.time, e.part, e.file
        );
    }
    xml.push_str("  </Collection>\n</VTKFile>\n");
    xml
}

mod read;
pub use read::{read, VtkFile, VtkReadError};
