//! The file formats eddies writes for other tools, each as plain encoders of arrays into bytes (no
//! simulation types): VTK XML for ParaView ([`vtk`]), PLY for point clouds and meshes ([`ply`]), Wavefront OBJ
//! meshes ([`obj`]), OpenVDB sparse volumes ([`vdb`]), and plots of a run's `stats.jsonl` ([`plot`]).
//!
//! The program (`eddies-cli`) decides what to write and where; this crate only knows the formats, so that
//! every driver (the program, the Python package) writes the same bytes.

pub mod obj;
pub mod plot;
pub mod ply;
pub mod vdb;
pub mod vtk;
