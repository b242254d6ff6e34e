//! OpenVDB volumes (`.vdb`, OpenVDB's native file format), so that Blender (Add > Volume > Import OpenVDB) and
//! Houdini (File SOP) open our density, temperature and velocity fields directly.
//!
//! [`write_vdb`] encodes dense, cell-centred arrays into one file holding several named grids. The subset of
//! the format written, read off OpenVDB's own writer (`io/Archive.cc`, `tree/RootNode.h`, `InternalNode.h`,
//! `LeafNode.h`, `io/Compression.h`, `math/Maps.h`):
//!
//! - **file format version 224** (`OPENVDB_FILE_VERSION_MULTIPASS_IO`), written by OpenVDB 3.3 to 12 and
//!   read by every release since (225, OpenVDB 13's, only adds half-precision grid types), tagged as library
//!   version 12.0; little-endian; seekable (grid offsets filled in); no file-level metadata;
//! - the **standard tree** `5_4_3`: a root table of 4096³-voxel internal nodes (32³ children), each child an
//!   internal node of 128³ voxels (16³ children), each of those a leaf of 8³ voxels. Only leaves holding at
//!   least one voxel farther than `tolerance` from the background 0 are stored, with those voxels active;
//!   there are no tiles. Grid types `Tree_float_5_4_3` ([`VdbValues::Float`]) and `Tree_vec3s_5_4_3`
//!   ([`VdbValues::Vec3`]);
//! - **no compression**: per-grid compression flags 0, so every node's values are stored whole after the
//!   per-node byte `NO_MASK_AND_ALL_VALS` (6). That keeps the writer free of zlib/Blosc, and leaves hold
//!   2 KiB (float) or 6 KiB (vec3) each; a viewer re-saving the file compresses it;
//! - per grid, the metadata OpenVDB writes with its statistics on: `class`, `creator`, `name`,
//!   `file_bbox_min`/`max` (index space, inclusive), `file_voxel_count` (active voxels), `file_mem_bytes`,
//!   `is_local_space` = false, `is_saved_as_half_float` = false, and for vec3 grids `vector_type` =
//!   `contravariant relative` (OpenVDB's "Displacement/Velocity/Acceleration": the transform's scale applies,
//!   its translation does not). OpenVDB's optional `file_delayed_load` (offsets for partial loading of
//!   compressed data) is not written: readers then load the grid whole;
//! - the transform ([`index_to_world`]): a `UniformScaleTranslateMap`.
//!
//! The file's UUID is derived from its contents rather than drawn at random, so that the same fields give the
//! same bytes (reproducible outputs) while different files still carry different identifiers.

mod encode;
mod tree;

#[cfg(test)]
mod read_back;
#[cfg(test)]
mod tests;

use std::collections::HashSet;

/// OpenVDB's file format version written (`OPENVDB_FILE_VERSION_MULTIPASS_IO`).
pub const VDB_FILE_VERSION: u32 = 224;

/// The samples of one grid: one value per cell of the dense array, x fastest, then y, then z.
#[derive(Clone, Copy, Debug)]
pub enum VdbValues<'a> {
    /// Scalars (density in kg/m³ or a fraction, temperature in K, ...), written as a `Tree_float_5_4_3`.
    Float(&'a [f32]),
    /// Vectors (velocity in m/s), written as a `Tree_vec3s_5_4_3`; a voxel is active when the vector's length
    /// exceeds the tolerance.
    Vec3(&'a [[f32; 3]]),
}

impl VdbValues<'_> {
    fn len(&self) -> usize {
        match self {
            VdbValues::Float(v) => v.len(),
            VdbValues::Vec3(v) => v.len(),
        }
    }
}

/// What a grid holds, written as its `class` metadata; viewers pick a shading from it (Blender and Houdini
/// render a fog volume as density).
///
/// There is no level-set class: a level set's background is the narrow band's half-width, not the zero this
/// writer sparsifies against. There is no staggered class either: the samples are cell-centred.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridClass {
    /// A density-like scalar, zero outside the medium (`fog volume`).
    FogVolume,
    /// Anything else: temperature, velocity (`unknown`, as OpenVDB and Houdini write velocity fields).
    Unknown,
}

impl GridClass {
    /// The `class` metadata string, as OpenVDB's `GridBase::gridClassToString`.
    fn as_str(self) -> &'static str {
        match self {
            GridClass::FogVolume => "fog volume",
            GridClass::Unknown => "unknown",
        }
    }
}

/// One named grid of a `.vdb` file.
#[derive(Clone, Copy, Debug)]
pub struct VdbGrid<'a> {
    /// The grid's name, which viewers show and look fields up by (`density`, `temperature`, `velocity`).
    pub name: &'a str,
    /// What the grid holds.
    pub class: GridClass,
    /// The dense samples, `dims[0] * dims[1] * dims[2]` of them.
    pub values: VdbValues<'a>,
}

/// Why a set of grids cannot be written.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum VdbError {
    /// A grid's sample count differs from the product of the dimensions.
    #[error("grid `{name}` holds {got} samples, but dimensions {dims:?} need {expected}")]
    LengthMismatch {
        /// The grid's name.
        name: String,
        /// The dimensions given.
        dims: [usize; 3],
        /// `dims[0] * dims[1] * dims[2]`.
        expected: usize,
        /// The number of samples given.
        got: usize,
    },
    /// A grid has an empty name (OpenVDB would rename it, and viewers find fields by name).
    #[error("grid {index} has an empty name")]
    EmptyName {
        /// The grid's position in the list.
        index: usize,
    },
    /// A grid name holds a control character (OpenVDB uses one, `\x1e`, to suffix duplicate names).
    #[error("grid name {name:?} holds a control character")]
    ControlCharacterInName {
        /// The name.
        name: String,
    },
    /// Two grids share a name (OpenVDB would rename the second one).
    #[error("two grids are named `{name}`")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// The voxel size is not a positive finite length.
    #[error("voxel size {voxel_size} m is not positive and finite")]
    InvalidVoxelSize {
        /// The voxel size given, in m.
        voxel_size: f64,
    },
    /// The origin has a non-finite coordinate.
    #[error("origin {origin:?} m is not finite")]
    NonFiniteOrigin {
        /// The origin given, in m.
        origin: [f64; 3],
    },
    /// The tolerance is negative or not finite.
    #[error("tolerance {tolerance} is not a finite non-negative number")]
    InvalidTolerance {
        /// The tolerance given.
        tolerance: f32,
    },
    /// The dimensions exceed OpenVDB's 32-bit signed index coordinates, or their product overflows.
    #[error("dimensions {dims:?} exceed OpenVDB's 32-bit index space")]
    DimensionsTooLarge {
        /// The dimensions given.
        dims: [usize; 3],
    },
}

/// The index-to-world map written for a grid of voxel size `h` (m) whose lower corner sits at `origin` (m):
/// returns OpenVDB's `UniformScaleTranslateMap` as (scale, translation), world = scale · index + translation.
///
/// OpenVDB places a voxel's centre at its integer index coordinates, and our samples sit at cell centres, so
/// the translation is `origin + h/2`: voxel (i, j, k)'s centre lands at `origin + h (i + ½, j + ½, k + ½)`, the
/// centre of cell (i, j, k), and the voxel's box `[i - ½, i + ½]` covers the cell exactly.
pub fn index_to_world(voxel_size: f64, origin: [f64; 3]) -> (f64, [f64; 3]) {
    let half = 0.5 * voxel_size;
    (
        voxel_size,
        [origin[0] + half, origin[1] + half, origin[2] + half],
    )
}

/// Encodes `grids`, dense arrays of shape `dims` = [nx, ny, nz] (x fastest, then y, then z) sampled at the
/// centres of cells of size `voxel_size` (m) whose lower corner is `origin` (m), as the bytes of a `.vdb` file.
///
/// Voxels whose value differs from the background 0 by more than `tolerance` (the vector length for
/// [`VdbValues::Vec3`]) are stored and active; the others read back as the background, 0, including those in
/// stored leaves. Non-finite samples count as different from the background, so that a diverged field shows
/// in the viewer instead of vanishing. Cell (i, j, k) is voxel (i, j, k) of the index space (see
/// [`index_to_world`]).
///
/// Takes of the order of 0.1 s per 256³ float grid in a release build (most of it touching the dense input); use a positive tolerance (such as
/// 1e-6 of the field's scale) so that numerical dust does not make the whole domain active.
pub fn write_vdb(
    grids: &[VdbGrid],
    dims: [usize; 3],
    voxel_size: f64,
    origin: [f64; 3],
    tolerance: f32,
) -> Result<Vec<u8>, VdbError> {
    validate(grids, dims, voxel_size, origin, tolerance)?;
    let (scale, translation) = index_to_world(voxel_size, origin);
    let mut out = encode::file_header(grids.len());
    for grid in grids {
        match grid.values {
            VdbValues::Float(values) => {
                let tree = tree::SparseTree::from_dense(values, dims, tolerance);
                encode::grid(&mut out, grid, &tree, scale, translation);
            }
            VdbValues::Vec3(values) => {
                let tree = tree::SparseTree::from_dense(values, dims, tolerance);
                encode::grid(&mut out, grid, &tree, scale, translation);
            }
        }
    }
    encode::stamp_uuid(&mut out);
    Ok(out)
}

/// Checks the arguments of [`write_vdb`] before anything is encoded.
fn validate(
    grids: &[VdbGrid],
    dims: [usize; 3],
    voxel_size: f64,
    origin: [f64; 3],
    tolerance: f32,
) -> Result<(), VdbError> {
    if !(voxel_size.is_finite() && voxel_size > 0.0) {
        return Err(VdbError::InvalidVoxelSize { voxel_size });
    }
    if origin.iter().any(|c| !c.is_finite()) {
        return Err(VdbError::NonFiniteOrigin { origin });
    }
    if !(tolerance.is_finite() && tolerance >= 0.0) {
        return Err(VdbError::InvalidTolerance { tolerance });
    }
    // Index coordinates are i32 and the last voxel's leaf must not wrap either.
    let fits = dims.iter().all(|&n| n <= i32::MAX as usize - 8);
    let expected = dims[0]
        .checked_mul(dims[1])
        .and_then(|n| n.checked_mul(dims[2]));
    let expected = match expected {
        Some(n) if fits => n,
        _ => return Err(VdbError::DimensionsTooLarge { dims }),
    };
    let mut names = HashSet::new();
    for (index, grid) in grids.iter().enumerate() {
        if grid.name.is_empty() {
            return Err(VdbError::EmptyName { index });
        }
        if grid.name.chars().any(char::is_control) {
            return Err(VdbError::ControlCharacterInName {
                name: grid.name.to_owned(),
            });
        }
        if !names.insert(grid.name) {
            return Err(VdbError::DuplicateName {
                name: grid.name.to_owned(),
            });
        }
        if grid.values.len() != expected {
            return Err(VdbError::LengthMismatch {
                name: grid.name.to_owned(),
                dims,
                expected,
                got: grid.values.len(),
            });
        }
    }
    Ok(())
}
