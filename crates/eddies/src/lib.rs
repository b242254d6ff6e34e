//! eddies: hybrid particle/grid fluid simulation.
//!
//! Methods:
//! * [`reint`]: reintegration tracking with SPH forces (Moroz 2020), 2D and 3D.
//!
//! Foundations shared by the methods: [`grid`] (cell-centred and staggered grids, stencils, sampling), [`par`]
//! (deterministic parallel loops), [`shape`] (signed-distance shapes), [`diag`] (per-step records and timers)
//! and the [`sim::Simulation`] trait through which drivers run any method.

pub mod diag;
pub mod grid;
pub mod par;
pub mod reint;
pub mod shape;
pub mod sim;
pub mod validation;

pub use diag::{Quantity, StageTimer, StepRecord};
pub use shape::Shape;
pub use sim::{Field, SimError, Simulation};
