//! `[output]`: what frames show and which arrays are written.

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
    /// Looking along −z through the whole depth (column density, or the density-weighted mean of a field).
    #[default]
    Projection,
    /// The cells of the middle z layer.
    Slice,
}

/// `[output]`: frames and arrays.
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
    /// 3D only: "projection" or "slice". Default "projection".
    pub view: View,
    /// Side-by-side variants of the scene (vpm, with field "tracers" or "vorticity_magnitude"): each entry
    /// is one panel, a list of `key=value` overrides separated by `;` (as `--set` takes them) applied to
    /// this scene; the frames show the panels left to right, and `stats.jsonl` the first panel's
    /// diagnostics. Up to 4. Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub panels: Vec<String>,
}

impl Default for Output {
    fn default() -> Self {
        Self {
            field: "density".to_string(),
            npy: false,
            colormap: Colormap::Auto,
            view: View::Projection,
            panels: Vec::new(),
        }
    }
}
