//! `[output]`: what frames show, which files are written for other tools (docs/OUTPUTS.md), and checkpoints.

use serde::{Deserialize, Serialize};

/// Colour map of frames that show a field other than `density`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Colormap {
    /// "diverging" for signed fields, "viridis" otherwise.
    #[default]
    Auto,
    /// Perceptually uniform, dark blue to yellow.
    Viridis,
    /// Perceptually uniform, black to pale yellow.
    Inferno,
    /// Blue (negative) – white (zero) – red (positive), symmetric about zero.
    Diverging,
}

/// How a 3D scene becomes a 2D frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum View {
    /// A rendered picture through `[output.camera]`: liquids as a lit surface, smoke and dye as a lit
    /// volume, obstacles, a floor with shadows (docs/RENDERING.md). 2D scenes show their grid as usual.
    #[default]
    Render,
    /// Looking along −z through the whole depth (column density, or the density-weighted mean of a field).
    Projection,
    /// The cells of the middle z layer.
    Slice,
}

/// Where rendered pictures are ray-marched (`output.renderer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RendererChoice {
    /// A hardware GPU when there is one (through wgpu), else the CPU. A software Vulkan driver (Mesa's
    /// lavapipe) counts as none: the CPU path is faster than it.
    #[default]
    Auto,
    /// The CPU, on all its cores.
    Cpu,
    /// The GPU through wgpu, whatever the adapter (a software one too); an error without one.
    Gpu,
}

/// `[output.camera]`: how rendered 3D pictures see the domain. Every key is optional; the default camera
/// stands before the domain, a little to the right and above, and frames all of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CameraSpec {
    /// Where the eye is (m, scene coordinates). Default: framing the domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<Vec<f64>>,
    /// The point at the picture's centre (m). Default: the domain's centre.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Vec<f64>>,
    /// Vertical field of view (degrees, 1–170). Default 35.
    pub fov: f64,
    /// Picture width and height in pixels (16–8192). Default [1280, 720].
    pub pixels: Vec<i64>,
}

impl Default for CameraSpec {
    fn default() -> Self {
        Self {
            position: None,
            target: None,
            fov: 35.0,
            pixels: vec![1280, 720],
        }
    }
}

/// The liquid surface's file format (`output.mesh`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MeshFormat {
    /// No surface.
    #[default]
    None,
    /// Binary little-endian PLY with vertex normals.
    Ply,
    /// Wavefront OBJ with vertex normals.
    Obj,
}

/// An animation of a run's frames (`output.animation`), written when the run ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnimationFormat {
    /// No animation.
    #[default]
    None,
    /// `animation.gif`: an animated GIF, 256 colours per frame.
    Gif,
    /// `animation.mp4`: H.264 (yuv420p) through the `ffmpeg` program, which must be on PATH.
    Mp4,
}

/// `[output]`: frames, arrays, files for other tools, checkpoints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Output {
    /// Field the PNG frames show. "density" colours the fluid by substance over a dark background; other
    /// fields ("speed", "pressure", "vorticity", ...) use `colormap`. Default "density".
    pub field: String,
    /// Whether to write `particles_NNNNN.npy` and the field arrays per frame (`field_mass_NNNNN.npy` for
    /// reint, `field_pressure_NNNNN.npy` and `field_divergence_NNNNN.npy` for flip). Default false.
    pub npy: bool,
    /// "auto", "viridis", "inferno" or "diverging". Default "auto".
    pub colormap: Colormap,
    /// 3D only: "render" (a lit picture through `[output.camera]`), "projection" (along −z) or "slice"
    /// (the middle z layer). Default "render".
    pub view: View,
    /// Where rendered pictures are made: "auto", "cpu" or "gpu". Default "auto".
    pub renderer: RendererChoice,
    /// The camera of rendered pictures.
    pub camera: CameraSpec,
    /// Whether frames show the simulated time, a scale bar and, for colour-mapped fields, a colour bar with
    /// the field's name, unit and range. Default true.
    pub annotate: bool,
    /// An animation of the frames, written when the run ends (also a resumed one), at `time.fps`: "none",
    /// "gif" (`animation.gif`) or "mp4" (`animation.mp4`, needs `ffmpeg` on PATH). Default "none".
    pub animation: AnimationFormat,
    /// Side-by-side variants of the scene (vpm, with field "tracers" or "vorticity_magnitude"): each entry
    /// is one panel, a list of `key=value` overrides separated by `;` (as `--set` takes them) applied to
    /// this scene; the frames show the panels left to right, and `stats.jsonl` the first panel's
    /// diagnostics. Up to 4. Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub panels: Vec<String>,
    /// VTK XML for ParaView: `grid_NNNNN.vti` (every grid field as cell data), `particles_NNNNN.vtp` (and
    /// `tracers_NNNNN.vtp`) with the particles' attributes, and `series.pvd` with each frame's time.
    /// Default false.
    pub vtk: bool,
    /// Binary PLY point clouds: `particles_NNNNN.ply` (and `tracers_NNNNN.ply`) with the particles'
    /// attributes. Default false.
    pub ply: bool,
    /// The liquid surface per frame (3D flip and reint), closed against the walls, with vertex normals:
    /// "none", "ply" or "obj" (`surface_NNNNN.ply` / `.obj`). Default "none".
    pub mesh: MeshFormat,
    /// Reint's surface: where the density crosses this fraction of the first substance's rest density
    /// (0 < level < 4). Default 0.5.
    pub mesh_level: f64,
    /// Taubin smoothing passes over the surface mesh (0–100); they keep its volume. Default 0.
    pub mesh_smoothing: u32,
    /// OpenVDB volumes (3D): `volume_NNNNN.vdb` with `density`, `temperature` (vpm) and `velocity` grids.
    /// Default false.
    pub vdb: bool,
    /// Plots of `stats.jsonl` (SVG and PNG, in `plots/`) when the run ends, as `eddies plot DIR`.
    /// Default false.
    pub plots: bool,
    /// Write a checkpoint (`checkpoint_NNNNN.ckpt`, NNNNN frames done) every this many frames; 0 for none.
    /// A run interrupted by Ctrl-C or SIGTERM writes one in any case. `eddies run --resume DIR` continues
    /// from the latest. Default 0.
    pub checkpoint_every: u64,
    /// How many of the latest checkpoints to keep (at least 1). Default 2.
    pub checkpoint_keep: u64,
}

impl Default for Output {
    fn default() -> Self {
        Self {
            field: "density".to_string(),
            npy: false,
            colormap: Colormap::Auto,
            view: View::Render,
            renderer: RendererChoice::Auto,
            camera: CameraSpec::default(),
            annotate: true,
            animation: AnimationFormat::None,
            panels: Vec::new(),
            vtk: false,
            ply: false,
            mesh: MeshFormat::None,
            mesh_level: 0.5,
            mesh_smoothing: 0,
            vdb: false,
            plots: false,
            checkpoint_every: 0,
            checkpoint_keep: 2,
        }
    }
}
