//! eddies: hybrid particle/grid fluid simulation.
//!
//! Methods:
//! * [`reint`]: reintegration tracking with SPH forces (Moroz 2020), 2D and 3D.
//! * [`vpm`]: the vortex particle method (Gourlay 2012, vortons with treecode Biot–Savart), 3D.
//! * [`flip`]: PIC/FLIP/APIC liquids on a MAC grid (Zhu & Bridson 2005, Jiang et al. 2015), 2D and 3D.
//!
//! Solvers: [`linsolve`] (matrix-free PCG with IC/MIC/Incomplete-Poisson/multigrid preconditioners, geometric
//! multigrid, for the pressure projection and vector Poisson problems).
//!
//! Foundations shared by the methods: [`grid`] (cell-centred and staggered grids, stencils, sampling), [`par`]
//! (deterministic parallel loops), [`rng`] (the seeded generator), [`shape`] (signed-distance shapes),
//! [`check`] (value checks that name their key), [`mesh`] (closed triangle meshes of the liquid surface),
//! [`diag`] (per-step records and timers), [`units`] (the SI unit of every quantity a method offers by name)
//! and [`sim`]: the [`Simulation`] trait through which drivers run any
//! method, its step template around each method's `advance`, and the [`Description`] each method gives of
//! itself. Each method's parameter type
//! ([`reint::ReintParams`], [`flip::FlipParams`], [`vpm::VpmParams`]) is its section of a scene file, with
//! its defaults and `validate()`. [`validation`] sits above the methods: the cases `eddies validate` runs.
//!
//! ```
//! use eddies::reint::{ReintConfig, ReintSim};
//! use eddies::{Shape, Simulation};
//!
//! let cfg = ReintConfig::<2> { resolution: [64, 64], cell_size: 1.0 / 64.0, ..Default::default() };
//! let mut sim = ReintSim::new(cfg)?;
//! sim.fill(&Shape::box2([0.0, 0.0], [0.4, 0.6]), 0, 1.0, [0.0, 0.0]);
//! let mass = sim.total_mass();
//! for _ in 0..20 {
//!     let record = sim.step(sim.max_dt(0.5))?; // per-step diagnostics: mass, energy, stage timings
//!     assert!(record.scalar("kinetic_energy").is_some());
//! }
//! assert_eq!(sim.total_mass(), mass); // exactly: masses are whole quanta
//! let density = sim.field("density").expect("reint has a density field"); // [ny, nx], kg/m²
//! assert_eq!(density.shape, vec![64, 64]);
//! sim.apply_impulse([0.2, 0.2], 0.05, [2.0, 0.0]); // push the fluid, e.g. from a mouse
//! # Ok::<(), eddies::SimError>(())
//! ```

pub mod check;
pub mod checkpoint;
pub mod diag;
pub mod flip;
pub mod grid;
pub mod linsolve;
pub mod mesh;
pub mod par;
pub mod reint;
pub mod rng;
pub mod shape;
pub mod sim;
pub mod units;
pub mod validation;
pub mod vpm;

pub use check::Invalid;
pub use checkpoint::{Checkpoint, SavedState};
pub use diag::{Clamp, Quantity, StageTimer, StepRecord};
pub use shape::Shape;
pub use sim::{
    impulse_vectors, Advance, Boundary, Description, Field, FrameSource, SimError, Simulation, Sink,
};
