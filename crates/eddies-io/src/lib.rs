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

/// DejaVu Sans (Bitstream Vera licence, `assets/DejaVuSans-LICENSE.txt`), the one font eddies sets text in:
/// the plots' and the frames' annotations. Bundled, so that no system font is looked up and every machine
/// draws the same picture.
pub static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
