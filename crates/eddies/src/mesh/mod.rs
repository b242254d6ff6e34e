//! Liquid surface meshes: the iso-surface of a scalar field sampled at cell centres, as a closed, oriented
//! triangle mesh for rendering and export (PLY, OBJ through `eddies-io`).
//!
//! The fields it is made for are the FLIP solver's level set (negative inside the liquid:
//! [`Inside::Below`]) and reintegration tracking's density (liquid where it exceeds a level:
//! [`Inside::Above`]).
//!
//! # Method: marching tetrahedra on Kuhn's triangulation
//! Each cube of eight neighbouring samples is cut into six tetrahedra along its main diagonal (Kuhn's, or
//! Freudenthal's, triangulation: one tetrahedron per order in which the path from the cube's lowest corner to
//! its highest adds the three axes). The cut is the same in every cube, so the tetrahedra of neighbouring
//! cubes share whole faces and the grid as a whole is one simplicial complex. Inside a tetrahedron the field is
//! taken as linear, so the surface there is one triangle or one quad, and it is unique: there is no ambiguous
//! case to resolve and no lookup table to get wrong. Marching cubes needs one of the disambiguated tables
//! (Chernyaev's 33 cases, or Nielson's asymptotic decider) to be manifold; marching tetrahedra is manifold by
//! construction in about a tenth of the code, at the price of about twice as many triangles. Each crossed grid
//! edge holds one vertex, shared by every triangle that meets it, so the mesh is closed wherever the liquid is
//! bounded (Doi & Koide 1991, "An efficient method of triangulating equi-valued surfaces by using tetrahedral
//! cells").
//!
//! # Walls
//! Samples beyond the grid count as outside: the grid is padded with one layer of outside samples, so liquid
//! that touches the domain walls is closed by a face **on the wall**, the boundary of the box
//! `origin .. origin + dims·h`. A vertex on an edge to a padding sample is put at the edge's midpoint, which is
//! exactly on the wall, since samples sit half a cell inside it. Where liquid fills a box edge (two walls
//! meeting), the tetrahedra bevel it on the edges that run across their common diagonal, (+x, −y) and
//! (−x, +y) and their analogues in the other planes: a bevel whose legs are half a cell, inside the box, so
//! a grid full of liquid encloses the box less about `h²/8` per metre of those six edges. The walls'
//! faces themselves are exact.
//!
//! # Values at the level
//! A sample whose value equals the level counts as outside (for both [`Inside`] conventions), and so does NaN.
//! A vertex is kept at least [`T_MIN`] of its edge away from the edge's ends, so a sample exactly at the level
//! does not collapse the vertices of its edges into one point and the triangles around it keep a non-zero area.
//!
//! # Cost
//! The grid is processed slab by slab (the cubes between two z-layers), in parallel over slabs with scratch of
//! a few arrays of one layer per worker; vertices and triangles are stored only where the surface is. The
//! result is bit-identical for any number of threads: slabs are concatenated in slab order and a slab refers
//! to the next slab's vertices by the rank they have in that slab, which both compute the same way.

mod marching;
mod trimesh;

#[cfg(test)]
mod tests;

pub use marching::{extract, T_MIN};
pub use trimesh::Topology;

/// Which side of the level is the liquid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Inside {
    /// Liquid where the value is below the level: a level set (signed distance, negative inside).
    Below,
    /// Liquid where the value is above the level: a density or volume fraction.
    Above,
}

/// Parameters of [`extract`].
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct IsoSurface {
    /// The value on the surface, in the field's unit (m for a level set, kg/m³ for a density). Default 0.
    pub level: f32,
    /// Which side of the level is the liquid. Default [`Inside::Below`] (a level set).
    pub inside: Inside,
    /// Passes of Taubin λ|μ smoothing ([`TriMesh::smooth_taubin`]); 0, the default, for none.
    pub smoothing_iterations: u32,
}

impl Default for IsoSurface {
    fn default() -> Self {
        Self {
            level: 0.0,
            inside: Inside::Below,
            smoothing_iterations: 0,
        }
    }
}

impl IsoSurface {
    /// Whether a sample of value `v` is liquid. Values equal to the level, and NaN, are not.
    #[inline]
    pub fn is_inside(&self, v: f32) -> bool {
        match self.inside {
            Inside::Below => v < self.level,
            Inside::Above => v > self.level,
        }
    }
}

/// An indexed triangle mesh: positions in m, unit normals, and triangles as indices into both, wound
/// counter-clockwise seen from outside the liquid (their right-hand normal points out of the liquid).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriMesh {
    /// Vertex positions, m.
    pub positions: Vec<[f32; 3]>,
    /// Unit vertex normals pointing out of the liquid (one per position).
    pub normals: Vec<[f32; 3]>,
    /// Triangles: three indices into `positions`, counter-clockwise seen from outside.
    pub triangles: Vec<[u32; 3]>,
}

/// Why a surface could not be extracted.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MeshError {
    /// The number of values is not the product of the dimensions.
    #[error("the field has {found} values, but dims {dims:?} need {expected}")]
    LengthMismatch {
        /// The grid's dimensions, `[nx, ny, nz]`.
        dims: [usize; 3],
        /// `nx·ny·nz`.
        expected: usize,
        /// The length of the values given.
        found: usize,
    },
    /// The cell size is not a positive finite number.
    #[error("cell size {0} m is not a positive finite number")]
    CellSize(f64),
    /// The origin has a NaN or infinite coordinate.
    #[error("origin {0:?} m is not finite")]
    Origin([f64; 3]),
    /// The surface has more vertices than a `u32` index can address.
    #[error("the surface has more than 2³¹ vertices in one slab or 2³² in all")]
    TooManyVertices,
}
