//! Cell-centred and staggered (MAC) grids in 2D and 3D, from one source (`const D: usize`).
//!
//! * [`Grid`]: a cell-centred field of any value type, x fastest in memory, with deterministic parallel loops
//!   ([`Grid::par_for_each_mut`], [`Grid::from_fn`], [`Grid::map`]) and multilinear sampling
//!   ([`Grid::sample`]).
//! * [`MacGrid`]: the staggered velocity grid (Harlow & Welch 1965), its sampling and divergence.
//! * [`stencil`]: gradient, divergence, curl and Laplacian, with the ghost-cell rules of [`BoundaryCondition`].
//! * [`CellFlag`] / [`FlagGrid`]: fluid/air/solid classification, marked from shapes and walls.
//!
//! Positions and spacings are in metres and always f64; cell values are f32 or f64 ([`Real`]) or fixed-size
//! vectors of them.

mod cell;
mod flags;
mod mac;
mod real;
pub mod stencil;

pub use cell::{cell_count, coords_of, strides_of, Grid, GRID_CHUNK};
pub use flags::{to_dvec3, CellFlag, FlagGrid};
pub use mac::MacGrid;
pub use real::{Linear, Real};
pub use stencil::{
    curl2, curl2_into, curl3, curl3_into, divergence, divergence_into, gradient, gradient_into,
    gradient_to_faces, gradient_to_faces_into, laplacian, laplacian_into, BoundaryCondition,
};
