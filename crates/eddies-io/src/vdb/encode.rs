//! The bytes of a `.vdb` file: header, grid descriptors with their offsets, metadata, transform, topology
//! and leaf buffers, laid out as OpenVDB's `io::Archive::write` does for an uncompressed, seekable file.

use super::tree::{
    child_offset, node4_origin, node5_origin, Leaf, SparseTree, VoxelValue, LEAF_LOG2, LEAF_VOXELS,
    NODE4_LOG2, NODE5_LOG2,
};
use super::{VdbGrid, VdbValues, VDB_FILE_VERSION};

/// OpenVDB's magic number, `OPENVDB_MAGIC`, written as an int64.
const MAGIC: i64 = 0x5644_4220;
/// Library version recorded in the header: the latest OpenVDB writing file format 224.
const LIBRARY_VERSION: (u32, u32) = (12, 0);
/// Where the 36-character UUID sits in the header: after magic (8), format (4), library versions (8) and the
/// has-grid-offsets flag (1).
const UUID_RANGE: std::ops::Range<usize> = 21..57;
/// Per-grid compression flags: none (no zip, no Blosc, no active-mask compression).
const COMPRESS_NONE: u32 = 0;
/// The per-node byte of `io::writeCompressedValues` announcing that all values follow, uncompressed.
const NO_MASK_AND_ALL_VALS: u8 = 6;

/// The file header with a blank UUID (see [`stamp_uuid`]), an empty file-level metadata table and the grid
/// count.
pub(super) fn file_header(grid_count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    put_u32(&mut out, VDB_FILE_VERSION);
    put_u32(&mut out, LIBRARY_VERSION.0);
    put_u32(&mut out, LIBRARY_VERSION.1);
    // The stream is seekable: grid descriptors carry their offsets.
    out.push(1);
    out.extend_from_slice(&[b'0'; 36]);
    debug_assert_eq!(out.len(), UUID_RANGE.end);
    put_u32(&mut out, 0);
    put_u32(&mut out, grid_count as u32);
    out
}

/// Writes the file's UUID (8-4-4-4-12 upper-case hex digits, as OpenVDB) from a 128-bit FNV-1a hash of all
/// that follows it, so that equal contents give equal files.
pub(super) fn stamp_uuid(out: &mut [u8]) {
    let digest = fnv1a_128(&out[UUID_RANGE.end..]);
    let hex: Vec<u8> = (0..32)
        .map(|i| b"0123456789ABCDEF"[((digest >> (124 - 4 * i)) & 0xf) as usize])
        .collect();
    let text = [
        &hex[0..8],
        b"-",
        &hex[8..12],
        b"-",
        &hex[12..16],
        b"-",
        &hex[16..20],
        b"-",
        &hex[20..32],
    ]
    .concat();
    out[UUID_RANGE].copy_from_slice(&text);
}

/// Appends one grid: descriptor (name, type, no instance parent, offsets), then at the grid position the
/// compression flags, metadata, transform and topology, then at the block position the leaf buffers.
pub(super) fn grid<T: VoxelValue>(
    out: &mut Vec<u8>,
    grid: &VdbGrid,
    tree: &SparseTree<T>,
    scale: f64,
    translation: [f64; 3],
) {
    put_string(out, grid.name);
    put_string(out, &format!("Tree_{}_5_4_3", T::TYPE_NAME));
    put_string(out, "");
    let offsets_at = out.len();
    out.extend_from_slice(&[0; 24]);
    let grid_pos = out.len();
    put_u32(out, COMPRESS_NONE);
    metadata(out, grid, tree);
    transform(out, scale, translation);
    topology(out, tree);
    let block_pos = out.len();
    buffers(out, tree);
    let end_pos = out.len();
    for (i, pos) in [grid_pos, block_pos, end_pos].into_iter().enumerate() {
        let at = offsets_at + 8 * i;
        out[at..at + 8].copy_from_slice(&(pos as i64).to_le_bytes());
    }
}

/// A metadata value, tagged with OpenVDB's type name.
enum Meta<'a> {
    Bool(bool),
    Int64(i64),
    String(&'a str),
    Vec3i([i32; 3]),
}

/// The grid's metadata table, in name order (OpenVDB's `MetaMap` is a sorted `std::map`).
fn metadata<T: VoxelValue>(out: &mut Vec<u8>, grid: &VdbGrid, tree: &SparseTree<T>) {
    // OpenVDB's evalActiveVoxelBoundingBox of an empty grid is the inverted box (max, min).
    let (lo, hi) = tree.bbox.unwrap_or(([i32::MAX; 3], [i32::MIN; 3]));
    let mut items = vec![
        ("class", Meta::String(grid.class.as_str())),
        (
            "creator",
            Meta::String(concat!("eddies ", env!("CARGO_PKG_VERSION"))),
        ),
        ("file_bbox_max", Meta::Vec3i(hi)),
        ("file_bbox_min", Meta::Vec3i(lo)),
        ("file_mem_bytes", Meta::Int64(tree.mem_bytes())),
        ("file_voxel_count", Meta::Int64(tree.active_voxels as i64)),
        ("is_local_space", Meta::Bool(false)),
        ("is_saved_as_half_float", Meta::Bool(false)),
        ("name", Meta::String(grid.name)),
    ];
    if matches!(grid.values, VdbValues::Vec3(_)) {
        items.push(("vector_type", Meta::String("contravariant relative")));
    }
    put_u32(out, items.len() as u32);
    for (name, value) in items {
        put_string(out, name);
        match value {
            Meta::Bool(b) => {
                put_string(out, "bool");
                put_u32(out, 1);
                out.push(u8::from(b));
            }
            Meta::Int64(n) => {
                put_string(out, "int64");
                put_u32(out, 8);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Meta::String(s) => {
                put_string(out, "string");
                put_string(out, s);
            }
            Meta::Vec3i(v) => {
                put_string(out, "vec3i");
                put_u32(out, 12);
                for c in v {
                    out.extend_from_slice(&c.to_le_bytes());
                }
            }
        }
    }
}

/// A `UniformScaleTranslateMap`: translation, scale, voxel size, inverse scale, its square and its half, as
/// `ScaleTranslateMap::write` stores them.
fn transform(out: &mut Vec<u8>, scale: f64, translation: [f64; 3]) {
    put_string(out, "UniformScaleTranslateMap");
    let inverse = 1.0 / scale;
    for v in [
        translation,
        [scale; 3],
        [scale; 3],
        [inverse; 3],
        [inverse * inverse; 3],
        [0.5 * inverse; 3],
    ] {
        for c in v {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
}

/// The tree's structure: buffer count, root (background, tile and child counts, children by origin), and
/// depth-first each internal node's child and value masks and values, and each leaf's value mask.
fn topology<T: VoxelValue>(out: &mut Vec<u8>, tree: &SparseTree<T>) {
    put_u32(out, 1);
    T::BACKGROUND.put_le(out);
    let (upper_count, _) = tree.internal_node_counts();
    put_u32(out, 0);
    put_u32(out, upper_count as u32);
    for upper in tree
        .leaves
        .chunk_by(|a, b| node5_origin(a.origin) == node5_origin(b.origin))
    {
        for c in node5_origin(upper[0].origin) {
            out.extend_from_slice(&c.to_le_bytes());
        }
        let lowers: Vec<&[Leaf]> = upper
            .chunk_by(|a, b| node4_origin(a.origin) == node4_origin(b.origin))
            .collect();
        internal_node::<T>(
            out,
            NODE5_LOG2,
            NODE4_LOG2,
            lowers.iter().map(|l| l[0].origin),
        );
        for lower in lowers {
            internal_node::<T>(out, NODE4_LOG2, LEAF_LOG2, lower.iter().map(|l| l.origin));
            for leaf in lower {
                put_mask(out, &leaf.mask);
            }
        }
    }
}

/// One internal node's own topology: the child mask from the children's coordinates, an empty value mask (no
/// tiles), and its values, all background (OpenVDB writes zero where a child sits).
fn internal_node<T: VoxelValue>(
    out: &mut Vec<u8>,
    node_log2: u32,
    child_log2: u32,
    children: impl Iterator<Item = [i32; 3]>,
) {
    let entries = 1usize << (3 * (node_log2 - child_log2));
    let mut child_mask = vec![0u64; entries / 64];
    for c in children {
        let n = child_offset(c, node_log2, child_log2);
        child_mask[n >> 6] |= 1 << (n & 63);
    }
    put_mask(out, &child_mask);
    put_mask(out, &vec![0u64; entries / 64]);
    out.push(NO_MASK_AND_ALL_VALS);
    for _ in 0..entries {
        T::BACKGROUND.put_le(out);
    }
}

/// The leaf buffers in topology order: each leaf's value mask again, then its 512 values whole.
fn buffers<T: VoxelValue>(out: &mut Vec<u8>, tree: &SparseTree<T>) {
    out.reserve(tree.leaves.len() * (64 + 1 + LEAF_VOXELS * T::BYTES));
    for leaf in &tree.leaves {
        put_mask(out, &leaf.mask);
        out.push(NO_MASK_AND_ALL_VALS);
        for &v in &tree.values[leaf.first..leaf.first + LEAF_VOXELS] {
            v.put_le(out);
        }
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A string as OpenVDB's `io::writeString`: u32 length, then the bytes.
fn put_string(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}

/// A node mask as `util::NodeMask::save`: its 64-bit words.
fn put_mask(out: &mut Vec<u8>, words: &[u64]) {
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// A 128-bit FNV-1a hash (offset basis and prime from the FNV reference) taken over little-endian 64-bit
/// words rather than bytes, eight times fewer multiplications for the megabytes of a grid; it only has to make
/// different files carry different UUIDs.
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let words = bytes.chunks(8).map(|chunk| {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        u64::from_le_bytes(word)
    });
    words.fold(OFFSET, |h, w| (h ^ u128::from(w)).wrapping_mul(PRIME))
}
