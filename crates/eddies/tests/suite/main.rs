//! The library's integration tests, one module per subject, linked into one test binary: every generic
//! stage is then compiled (and optimised) once for the whole suite rather than once per file.

mod common;

mod flip;
mod grid;
mod linsolve;
mod par;
mod reint;
mod shape;
mod sim;
mod vpm;
mod vpm_poisson;
