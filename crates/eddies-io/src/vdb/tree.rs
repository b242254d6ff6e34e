//! The sparse `5_4_3` tree of one grid, built from a dense array: which 8³ leaves are stored, their active
//! voxels and values, in the order OpenVDB writes them.
//!
//! OpenVDB's root keeps its children in a `std::map` keyed by origin, so they come out in lexicographic
//! (x, y, z) order; internal nodes write their children in the order of their linear offsets, in which z is
//! fastest (`InternalNode::coordToOffset`, `LeafNode::coordToOffset`). Sorting the leaves by the key (origin
//! of their upper node, offset of their lower node in it, their offset in the lower node) reproduces that
//! depth-first order, and each internal node is a run of leaves sharing a prefix of the key.

/// log2 of a leaf's edge in voxels (8).
pub(super) const LEAF_LOG2: u32 = 3;
/// log2 of the edge in voxels of the lower internal node (16³ leaves: 128 voxels).
pub(super) const NODE4_LOG2: u32 = LEAF_LOG2 + 4;
/// log2 of the edge in voxels of the upper internal node (32³ lower nodes: 4096 voxels).
pub(super) const NODE5_LOG2: u32 = NODE4_LOG2 + 5;
/// Voxels in a leaf.
pub(super) const LEAF_VOXELS: usize = 1 << (3 * LEAF_LOG2);

/// A value type of the grids written: its name in OpenVDB's tree type, its bytes and whether it stands out
/// from the background 0.
pub(super) trait VoxelValue: Copy {
    /// The value type's part of the grid type name (`Tree_float_5_4_3`).
    const TYPE_NAME: &'static str;
    /// Size in bytes, as OpenVDB stores it.
    const BYTES: usize;
    /// The background (and inactive) value, 0.
    const BACKGROUND: Self;
    /// Whether the value differs from the background by more than `tolerance`; true for non-finite values.
    fn is_active(self, tolerance: f32) -> bool;
    /// Appends the value's little-endian bytes.
    fn put_le(self, out: &mut Vec<u8>);
}

impl VoxelValue for f32 {
    const TYPE_NAME: &'static str = "float";
    const BYTES: usize = 4;
    const BACKGROUND: Self = 0.0;
    fn is_active(self, tolerance: f32) -> bool {
        self.abs() > tolerance || self.is_nan()
    }
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl VoxelValue for [f32; 3] {
    const TYPE_NAME: &'static str = "vec3s";
    const BYTES: usize = 12;
    const BACKGROUND: Self = [0.0; 3];
    fn is_active(self, tolerance: f32) -> bool {
        // Compared squared to spare the root; in f64 so that neither side over- nor underflows.
        let length2: f64 = self.iter().map(|&c| f64::from(c) * f64::from(c)).sum();
        length2 > f64::from(tolerance) * f64::from(tolerance) || length2.is_nan()
    }
    fn put_le(self, out: &mut Vec<u8>) {
        for c in self {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
}

/// Inclusive bounds (lowest, highest) of a set of voxels, in index coordinates.
pub(super) type IndexBox = ([i32; 3], [i32; 3]);

/// One stored 8³ leaf.
#[derive(Clone, Copy, Debug)]
pub(super) struct Leaf {
    /// Index coordinates of the leaf's first voxel (multiples of 8).
    pub origin: [i32; 3],
    /// Active voxels, bit n of word n / 64 for the voxel at linear offset n (z fastest).
    pub mask: [u64; 8],
    /// Where the leaf's 512 values start in [`SparseTree::values`].
    pub first: usize,
}

/// The stored leaves of one grid with their values, statistics included.
pub(super) struct SparseTree<T> {
    /// Leaves in OpenVDB's write order (see the module documentation).
    pub leaves: Vec<Leaf>,
    /// 512 values per leaf, z fastest within a leaf; inactive voxels hold the background.
    pub values: Vec<T>,
    /// Inclusive index bounds of the active voxels, `None` when there are none.
    pub bbox: Option<IndexBox>,
    /// Number of active voxels.
    pub active_voxels: u64,
}

impl<T: VoxelValue> SparseTree<T> {
    /// Keeps the leaves of `dense` (shape `dims`, x fastest) that hold a voxel farther than `tolerance` from
    /// the background. `dims` were checked to fit i32 index coordinates and `dense` to have their product.
    pub fn from_dense(dense: &[T], dims: [usize; 3], tolerance: f32) -> Self {
        let [nx, ny, _] = dims;
        let leaf_counts = dims.map(|n| n.div_ceil(1 << LEAF_LOG2));
        let mut leaves = Vec::new();
        let mut values = Vec::new();
        let mut block = [T::BACKGROUND; LEAF_VOXELS];
        for bz in 0..leaf_counts[2] {
            for by in 0..leaf_counts[1] {
                for bx in 0..leaf_counts[0] {
                    let start = [bx, by, bz].map(|b| b << LEAF_LOG2);
                    let extent: [usize; 3] = std::array::from_fn(|a| (dims[a] - start[a]).min(8));
                    block.fill(T::BACKGROUND);
                    let mut mask = [0u64; 8];
                    for lz in 0..extent[2] {
                        for ly in 0..extent[1] {
                            let row = start[0] + nx * ((start[1] + ly) + ny * (start[2] + lz));
                            for (lx, &v) in dense[row..row + extent[0]].iter().enumerate() {
                                if v.is_active(tolerance) {
                                    let n = (lx << 6) | (ly << 3) | lz;
                                    block[n] = v;
                                    mask[n >> 6] |= 1 << (n & 63);
                                }
                            }
                        }
                    }
                    if mask.iter().any(|&w| w != 0) {
                        leaves.push(Leaf {
                            origin: start.map(|s| s as i32),
                            mask,
                            first: values.len(),
                        });
                        values.extend_from_slice(&block);
                    }
                }
            }
        }
        leaves.sort_unstable_by_key(|leaf| write_order_key(leaf.origin));
        let (bbox, active_voxels) = active_statistics(&leaves);
        SparseTree {
            leaves,
            values,
            bbox,
            active_voxels,
        }
    }

    /// The memory OpenVDB would take to hold the tree, for the `file_mem_bytes` metadata, in bytes: its
    /// `Tree::memUsage` on a 64-bit build (a leaf's 512 values, masks and origin plus 96 bytes of members; an
    /// internal node's value-or-child-pointer union per entry, two masks and an origin; the root's table).
    pub fn mem_bytes(&self) -> i64 {
        let union = T::BYTES.max(8) as i64;
        let leaf = (LEAF_VOXELS * T::BYTES) as i64 + 96;
        let node4 = 4096 * union + 2 * 512 + 12;
        let node5 = 32768 * union + 2 * 4096 + 12;
        let (n5, n4) = self.internal_node_counts();
        // The root's size and one std::map entry (key, child pointer, tile, tree links) per child.
        let root = 96 + 80 * n5 as i64;
        root + n5 as i64 * node5 + n4 as i64 * node4 + self.leaves.len() as i64 * leaf
    }

    /// Numbers of upper (32³) and lower (16³) internal nodes holding the stored leaves.
    pub fn internal_node_counts(&self) -> (usize, usize) {
        let n5 = self
            .leaves
            .chunk_by(|a, b| node5_origin(a.origin) == node5_origin(b.origin))
            .count();
        let n4 = self
            .leaves
            .chunk_by(|a, b| node4_origin(a.origin) == node4_origin(b.origin))
            .count();
        (n5, n4)
    }
}

/// Origin of the upper internal node (4096³ voxels) holding index coordinates `c`.
pub(super) fn node5_origin(c: [i32; 3]) -> [i32; 3] {
    c.map(|x| x & !((1 << NODE5_LOG2) - 1))
}

/// Origin of the lower internal node (128³ voxels) holding index coordinates `c`.
pub(super) fn node4_origin(c: [i32; 3]) -> [i32; 3] {
    c.map(|x| x & !((1 << NODE4_LOG2) - 1))
}

/// Linear offset (z fastest) of the child holding `c` within the node of edge `2^node_log2` voxels whose
/// children have edge `2^child_log2`, as OpenVDB's `InternalNode::coordToOffset`.
pub(super) fn child_offset(c: [i32; 3], node_log2: u32, child_log2: u32) -> usize {
    let per_axis = node_log2 - child_log2;
    let local = c.map(|x| ((x & ((1 << node_log2) - 1)) >> child_log2) as usize);
    (local[0] << (2 * per_axis)) | (local[1] << per_axis) | local[2]
}

/// The depth-first order in which OpenVDB writes leaves: root children lexicographically by origin, then
/// lower-node offset within the upper node, then leaf offset within the lower node.
fn write_order_key(origin: [i32; 3]) -> ([i32; 3], usize, usize) {
    (
        node5_origin(origin),
        child_offset(origin, NODE5_LOG2, NODE4_LOG2),
        child_offset(origin, NODE4_LOG2, LEAF_LOG2),
    )
}

/// Inclusive bounds and count of the active voxels of `leaves`, from the masks alone: word x of a leaf's mask
/// holds the voxels of slice x, byte y of a word row y, bit z of a byte voxel z.
fn active_statistics(leaves: &[Leaf]) -> (Option<IndexBox>, u64) {
    let mut bbox: Option<IndexBox> = None;
    let mut count = 0u64;
    for leaf in leaves {
        count += leaf
            .mask
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum::<u64>();
        let x_bits = leaf
            .mask
            .iter()
            .enumerate()
            .fold(0u8, |acc, (x, &w)| acc | (u8::from(w != 0) << x));
        let rows = leaf.mask.iter().fold(0u64, |acc, &w| acc | w);
        let y_bits = (0..8).fold(0u8, |acc, y| {
            acc | (u8::from((rows >> (8 * y)) & 0xff != 0) << y)
        });
        let z_bits = rows.to_le_bytes().iter().fold(0u8, |acc, &b| acc | b);
        let span = |bits: u8| {
            (
                bits.trailing_zeros() as i32,
                7 - bits.leading_zeros() as i32,
            )
        };
        let spans = [span(x_bits), span(y_bits), span(z_bits)];
        let lo: [i32; 3] = std::array::from_fn(|a| leaf.origin[a] + spans[a].0);
        let hi: [i32; 3] = std::array::from_fn(|a| leaf.origin[a] + spans[a].1);
        bbox = Some(match bbox {
            None => (lo, hi),
            Some((l, h)) => (
                std::array::from_fn(|a| l[a].min(lo[a])),
                std::array::from_fn(|a| h[a].max(hi[a])),
            ),
        });
    }
    (bbox, count)
}
