//! A strict reader of the subset of `.vdb` that [`super::write_vdb`] writes, for the tests: it parses the file
//! the way OpenVDB's `io::File` does (descriptor, seek to the grid position, compression, metadata, transform,
//! topology, buffers) and rejects anything it does not expect, checking every count, mask, offset and the
//! write order of nodes, so that a reader as strict as OpenVDB's accepts the bytes.
//!
//! Written from OpenVDB's sources, independently of the writer's code (it shares no function with it).

use std::collections::BTreeMap;

/// A metadata value read back.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum MetaValue {
    Bool(bool),
    Int64(i64),
    String(String),
    Vec3i([i32; 3]),
}

/// One grid read back.
#[derive(Debug)]
pub(super) struct ReadGrid {
    pub name: String,
    pub grid_type: String,
    pub metadata: BTreeMap<String, MetaValue>,
    /// Uniform scale of the index-to-world map, m.
    pub scale: f64,
    /// Translation of the index-to-world map, m.
    pub translation: [f64; 3],
    /// Active voxels and their components (1 for float, 3 for vec3s).
    pub active: BTreeMap<[i32; 3], Vec<f32>>,
    /// Numbers of upper internal nodes, lower internal nodes and leaves.
    pub node_counts: [usize; 3],
}

/// A whole file read back.
#[derive(Debug)]
pub(super) struct ReadFile {
    pub uuid: String,
    pub grids: Vec<ReadGrid>,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated: {n} bytes wanted at {}", self.pos))?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    fn f32(&mut self) -> Result<f32, String> {
        Ok(f32::from_le_bytes(self.array()?))
    }
    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.array()?))
    }
    fn vec3d(&mut self) -> Result<[f64; 3], String> {
        Ok([self.f64()?, self.f64()?, self.f64()?])
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|e| e.to_string())
    }
    /// A node mask of `bits` bits as its 64-bit words.
    fn mask(&mut self, bits: usize) -> Result<Vec<u64>, String> {
        (0..bits / 64)
            .map(|_| Ok(u64::from_le_bytes(self.array()?)))
            .collect()
    }
}

fn expect<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {want:?}"))
    }
}

fn set_bits(mask: &[u64]) -> Vec<usize> {
    (0..mask.len() * 64)
        .filter(|&n| mask[n / 64] >> (n % 64) & 1 == 1)
        .collect()
}

/// Reads a whole file, failing on the first departure from the expected subset.
pub(super) fn read_vdb(bytes: &[u8]) -> Result<ReadFile, String> {
    let mut c = Cursor { bytes, pos: 0 };
    expect("magic", c.i64()?, 0x5644_4220)?;
    expect("file version", c.u32()?, 224)?;
    expect("library version", (c.u32()?, c.u32()?), (12, 0))?;
    expect("has grid offsets", c.u8()?, 1)?;
    let uuid = String::from_utf8(c.take(36)?.to_vec()).map_err(|e| e.to_string())?;
    for (i, ch) in uuid.chars().enumerate() {
        let ok = if [8, 13, 18, 23].contains(&i) {
            ch == '-'
        } else {
            ch.is_ascii_hexdigit()
        };
        if !ok {
            return Err(format!("malformed UUID {uuid}"));
        }
    }
    expect("file metadata count", c.u32()?, 0)?;
    let grid_count = c.u32()?;
    let mut grids = Vec::new();
    for _ in 0..grid_count {
        grids.push(read_grid(&mut c)?);
    }
    expect("bytes after the last grid", bytes.len() - c.pos, 0)?;
    Ok(ReadFile { uuid, grids })
}

fn read_grid(c: &mut Cursor) -> Result<ReadGrid, String> {
    let name = c.string()?;
    let grid_type = c.string()?;
    let components = match grid_type.as_str() {
        "Tree_float_5_4_3" => 1,
        "Tree_vec3s_5_4_3" => 3,
        other => return Err(format!("grid type {other}")),
    };
    expect("instance parent", c.string()?, String::new())?;
    let (grid_pos, block_pos, end_pos) = (c.i64()?, c.i64()?, c.i64()?);
    expect("grid position", grid_pos, c.pos as i64)?;
    expect("compression", c.u32()?, 0)?;
    let metadata = read_metadata(c)?;
    expect(
        "map type",
        c.string()?,
        "UniformScaleTranslateMap".to_owned(),
    )?;
    let translation = c.vec3d()?;
    let [scale, voxel, inverse, inverse2, half_inverse] =
        [c.vec3d()?, c.vec3d()?, c.vec3d()?, c.vec3d()?, c.vec3d()?];
    let s = scale[0];
    expect("uniform scale", scale, [s; 3])?;
    expect("voxel size", voxel, [s.abs(); 3])?;
    expect("inverse scale", inverse, [1.0 / s; 3])?;
    expect(
        "inverse scale squared",
        inverse2,
        [inverse[0] * inverse[0]; 3],
    )?;
    expect("half inverse scale", half_inverse, [inverse[0] / 2.0; 3])?;

    expect("buffer count", c.u32()?, 1)?;
    let value =
        |c: &mut Cursor| -> Result<Vec<f32>, String> { (0..components).map(|_| c.f32()).collect() };
    expect("background", value(c)?, vec![0.0; components])?;
    expect("root tiles", c.u32()?, 0)?;
    let upper_count = c.u32()?;
    let mut leaves: Vec<([i32; 3], Vec<u64>)> = Vec::new();
    let mut previous_upper: Option<[i32; 3]> = None;
    let mut node_counts = [upper_count as usize, 0, 0];
    for _ in 0..upper_count {
        let origin = [c.i32()?, c.i32()?, c.i32()?];
        if origin.iter().any(|x| x % 4096 != 0) || previous_upper.is_some_and(|p| p >= origin) {
            return Err(format!(
                "root child origin {origin:?} unaligned or out of order"
            ));
        }
        previous_upper = Some(origin);
        for lower in read_internal(c, 32, components)? {
            node_counts[1] += 1;
            let lower_origin = child_origin(origin, lower, 32, 128);
            for leaf in read_internal(c, 16, components)? {
                let mask = c.mask(512)?;
                if mask.iter().all(|&w| w == 0) {
                    return Err("stored leaf without active voxels".to_owned());
                }
                leaves.push((child_origin(lower_origin, leaf, 16, 8), mask));
            }
        }
    }
    node_counts[2] = leaves.len();

    expect("block position", block_pos, c.pos as i64)?;
    let mut active = BTreeMap::new();
    for (origin, mask) in leaves {
        expect("buffer mask", c.mask(512)?, mask.clone())?;
        expect("leaf compression byte", c.u8()?, 6)?;
        for n in 0..512 {
            let v = value(c)?;
            let local = [(n >> 6) as i32, (n >> 3 & 7) as i32, (n & 7) as i32];
            let xyz = [0, 1, 2].map(|a| origin[a] + local[a]);
            if mask[n / 64] >> (n % 64) & 1 == 1 {
                active.insert(xyz, v);
            } else if v.iter().any(|&x| x.to_bits() != 0) {
                return Err(format!(
                    "inactive voxel {xyz:?} holds {v:?}, not the background"
                ));
            }
        }
    }
    expect("end position", end_pos, c.pos as i64)?;
    Ok(ReadGrid {
        name,
        grid_type,
        metadata,
        scale: s,
        translation,
        active,
        node_counts,
    })
}

/// An internal node with `dim`³ entries: returns the offsets of its children, after checking that it has no
/// tiles and that its values are all background.
fn read_internal(c: &mut Cursor, dim: usize, components: usize) -> Result<Vec<usize>, String> {
    let entries = dim * dim * dim;
    let children = set_bits(&c.mask(entries)?);
    expect("internal value mask", set_bits(&c.mask(entries)?), vec![])?;
    expect("internal compression byte", c.u8()?, 6)?;
    for _ in 0..entries * components {
        expect("internal value", c.f32()?.to_bits(), 0)?;
    }
    if children.is_empty() {
        return Err("internal node without children".to_owned());
    }
    Ok(children)
}

/// Origin of the child at linear `offset` (z fastest) of a node at `origin` with `dim`³ children of edge
/// `child_edge` voxels.
fn child_origin(origin: [i32; 3], offset: usize, dim: usize, child_edge: i32) -> [i32; 3] {
    let local = [offset / (dim * dim), offset / dim % dim, offset % dim];
    [0, 1, 2].map(|a| origin[a] + local[a] as i32 * child_edge)
}

fn read_metadata(c: &mut Cursor) -> Result<BTreeMap<String, MetaValue>, String> {
    let count = c.u32()?;
    let mut metadata = BTreeMap::new();
    let mut previous = String::new();
    for _ in 0..count {
        let name = c.string()?;
        if name <= previous {
            return Err(format!("metadata `{name}` out of order"));
        }
        previous.clone_from(&name);
        let type_name = c.string()?;
        let size = c.u32()? as usize;
        let value = match (type_name.as_str(), size) {
            ("bool", 1) => MetaValue::Bool(match c.u8()? {
                0 => false,
                1 => true,
                b => return Err(format!("bool byte {b}")),
            }),
            ("int64", 8) => MetaValue::Int64(c.i64()?),
            ("vec3i", 12) => MetaValue::Vec3i([c.i32()?, c.i32()?, c.i32()?]),
            ("string", n) => MetaValue::String(
                String::from_utf8(c.take(n)?.to_vec()).map_err(|e| e.to_string())?,
            ),
            (t, n) => return Err(format!("metadata `{name}` of type {t} and size {n}")),
        };
        metadata.insert(name, value);
    }
    Ok(metadata)
}
