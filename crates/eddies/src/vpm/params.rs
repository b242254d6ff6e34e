//! Parameters of the vortex particle method.

use crate::check::{self, Check};
use crate::linsolve::Restriction;

/// How velocity (and its gradient, for stretching) is obtained from the vortons (Gourlay, parts 3 and 12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum VelocityMethod {
    /// Direct Biot–Savart summation over all vortons, evaluated at each vorton and tracer: O(N²), the
    /// reference of part 12 (no self-induced motion, no jerk from sampling).
    DirectVortons,
    /// Direct summation at the grid points, then trilinear interpolation at vortons and tracers (part 3).
    DirectGrid,
    /// Treecode evaluated at each vorton and tracer: O(N log N).
    TreeVortons,
    /// Treecode at the grid points, then interpolation (part 3; jerky without auto-mollification, part 12).
    TreeGrid,
    /// Part 20's recipe: vorticity splatted to the grid, the vector potential on the grid's boundary from the
    /// Biot–Savart integral, the interior from a multigrid vector Poisson solve `∇²A = −ω`, velocity `∇ × A`
    /// on the grid, interpolated at vortons and tracers ([`super::poisson`]).
    Poisson,
}

impl VelocityMethod {
    /// Whether velocity is evaluated on the grid and interpolated.
    pub fn on_grid(self) -> bool {
        matches!(self, Self::DirectGrid | Self::TreeGrid | Self::Poisson)
    }

    /// Whether the treecode approximates the far field.
    pub fn uses_tree(self) -> bool {
        matches!(self, Self::TreeVortons | Self::TreeGrid)
    }

    /// The scene-file spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::DirectVortons => "direct-vortons",
            Self::DirectGrid => "direct-grid",
            Self::TreeVortons => "tree-vortons",
            Self::TreeGrid => "tree-grid",
            Self::Poisson => "poisson",
        }
    }
}

/// Where the Poisson technique's boundary values of the vector potential come from (part 20, Figure 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum PotentialBoundary {
    /// The treecode integral `A(x) = (1/4π) Σ αⱼ G(x − xⱼ)`: O(N_b log N), the default.
    Tree,
    /// The same integral by direct summation: O(N_b N), the reference.
    Direct,
    /// Zero: the domain boundary acts as a wall that the flow cannot cross (part 20's bottom row).
    Zero,
}

impl PotentialBoundary {
    /// The scene-file spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tree => "tree",
            Self::Direct => "direct",
            Self::Zero => "zero",
        }
    }
}

/// Which boundary points of the Poisson technique get the integral, the others interpolated (part 20's
/// decimation, "about half the cost").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Decimation {
    /// Every boundary point.
    Off,
    /// Part 20's: every other point along a row (along x on the y and z faces, along y on the x faces); the
    /// points between take the mean of their two neighbours (part 20 copies one).
    Rows,
    /// Every other point along both directions of each face, and the last point of every row and column:
    /// about a quarter of the points. The others lie between two or four computed points of their face and
    /// take their mean. Cheaper than `Rows` and, with no copies at the ends of rows, closer to the full values.
    #[default]
    Lattice,
}

/// Read from "lattice", "rows" or "off", or from a boolean: true is the default ([`Decimation::Lattice`]),
/// false is "off".
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Decimation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Decimation;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"lattice\", \"rows\", \"off\", true (lattice) or false (off)")
            }
            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Decimation, E> {
                Ok(if on {
                    Decimation::default()
                } else {
                    Decimation::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Decimation, E> {
                match v {
                    "lattice" => Ok(Decimation::Lattice),
                    "rows" => Ok(Decimation::Rows),
                    "off" => Ok(Decimation::Off),
                    _ => Err(E::unknown_variant(v, &["lattice", "rows", "off"])),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Decimation {
    /// The scene-file spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Rows => "rows",
            Self::Lattice => "lattice",
        }
    }
}

/// How the Poisson technique shares the vortons' strengths out to the grid points.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Splat {
    /// Part 20's cloud-in-cell: the 8 grid points around a vorton, a tent two cells wide whatever its core.
    /// The default: smooth where the vortons' cores are at most about a cell wide, and cheap.
    #[default]
    Cic,
    /// A Gaussian with the second moment of the vorton's core (per-axis variance σ²/2), at least one cell in
    /// σ ([`super::blob_splat`]): the grid sees the vorticity the vortons carry, no sharper. The choice where
    /// the cores are wider than a cell (a dense ball on a lattice): cloud-in-cell makes the motion jerk there
    /// (issue 25). About 1.8× the cost of a Poisson step.
    Gaussian,
}

impl Splat {
    /// The scene-file spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cic => "cic",
            Self::Gaussian => "gaussian",
        }
    }
}

/// Settings of the Poisson velocity technique (part 20).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoissonParams {
    /// Boundary values of the vector potential.
    pub boundary: PotentialBoundary,
    /// Which boundary points get the integral ([`Decimation`]).
    pub decimate: Decimation,
    /// How vorticity reaches the grid ([`Splat`]).
    pub splat: Splat,
    /// Opening parameter θ of the treecode for the boundary values (1). The boundary is smooth and away from
    /// the vortons, and its error decays into the interior, so it tolerates a coarser θ than velocity at the
    /// vortons does. The default 0.7 gives about 5e-3 RMS relative error on a box surface 10% outside the
    /// vortons ([`super::tree::POTENTIAL_GROUP`]).
    pub boundary_theta: f64,
    /// Stop the multigrid cycles when the residual has fallen by this factor (1).
    pub tolerance: f64,
    /// How the V-cycle restricts residuals: part 20's "nearest" (faster, less accurate) or full weighting.
    pub restriction: Restriction,
}

impl Default for PoissonParams {
    fn default() -> Self {
        Self {
            boundary: PotentialBoundary::Tree,
            decimate: Decimation::Lattice,
            splat: Splat::Cic,
            boundary_theta: 0.7,
            tolerance: 1e-3,
            restriction: Restriction::Nearest,
        }
    }
}

/// Buoyancy: baroclinic generation of vorticity from density deviations (part 8) and thermal expansion.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BuoyancyParams {
    /// Baroclinic generation `Dω/Dt = (∇ρ × g)/ρ₀`; off leaves density as a passive label.
    pub baroclinic: bool,
    /// Gravitational acceleration (m/s²).
    pub gravity: [f64; 3],
    /// Thermal expansion coefficient β (1/K): a temperature deviation T' changes the density by −ρ₀ β T'
    /// (Boussinesq). 1/300 K⁻¹ is an ideal gas at room temperature.
    pub thermal_expansion: f64,
    /// Thermal diffusivity κ (m²/s) of heat diffusion by particle strength exchange; 0 switches it off.
    pub heat_diffusivity: f64,
}

impl Default for BuoyancyParams {
    fn default() -> Self {
        Self {
            baroclinic: true,
            gravity: [0.0, -9.81, 0.0],
            thermal_expansion: 1.0 / 300.0,
            heat_diffusivity: 0.0,
        }
    }
}

/// Treecode settings (Gourlay part 3's nested grid of supervortons, part 12's leaf-layer option).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TreeParams {
    /// Opening parameter θ (1): a cell of width `s` is used as one supervorton for targets farther than
    /// `s / θ` from its centre; smaller is more accurate and slower.
    pub theta: f64,
    /// Most vortons in a leaf cell (1); fuller cells are split.
    pub leaf_size: usize,
    /// Use the original vortons of a leaf that is too near to approximate (part 12's
    /// `USE_ORIGINAL_VORTONS_IN_BASE_LAYER`); `false` uses the leaf's supervorton at any distance.
    pub original_leaves: bool,
    /// How the far field reaches the targets.
    pub method: TreeMethod,
}

/// How the tree's far field reaches the targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum TreeMethod {
    /// Part 12's treecode: each group of nearby targets walks the tree, and every target sums the
    /// supervortons (second-order moments) its group accepted.
    Treecode,
    /// The fast multipole method ([`super::fmm`]): a target cell and a vorton cell that are far apart
    /// interact once, through a local Taylor expansion about the target cell's centre that its targets
    /// share. Same θ semantics with both cells' radii counted; near leaves sum their vortons directly.
    Fmm,
}

impl TreeMethod {
    /// The scene-file spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Treecode => "treecode",
            Self::Fmm => "fmm",
        }
    }
}

impl Default for TreeParams {
    fn default() -> Self {
        Self {
            theta: 0.5,
            leaf_size: 64,
            original_leaves: true,
            method: TreeMethod::Treecode,
        }
    }
}

/// Time integrator of the advection and stretching terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Integrator {
    /// Heun's second-order Runge–Kutta (two velocity evaluations per step).
    Rk2,
    /// Classical fourth-order Runge–Kutta (four evaluations per step).
    Rk4,
}

/// Physical and numerical parameters of a vorton simulation. With the `serde` feature it reads and writes as
/// the flat keys of a scene file's `[vpm]` section (`theta`, `poisson_tolerance`, `tree_method`…; see
/// `docs/vpm.md`); the domain supplies `grid_resolution` and `buoyancy.gravity`. [`VpmParams::validate`]
/// states what each accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(from = "keys::Keys", into = "keys::Keys"))]
pub struct VpmParams {
    /// Velocity-from-vorticity technique.
    pub velocity: VelocityMethod,
    /// Treecode settings (used by the tree techniques).
    pub tree: TreeParams,
    /// Kinematic viscosity ν (m²/s); 0 switches viscous diffusion off.
    pub viscosity: f64,
    /// Settings of the Poisson technique.
    pub poisson: PoissonParams,
    /// Buoyancy and heat.
    pub buoyancy: BuoyancyParams,
    /// Ambient fluid density ρ₀ (kg/m³): the kinetic energy's density and the baroclinic term's denominator.
    /// Default 1.2 (air).
    pub ambient_density: f64,
    /// Vortex stretching and tilting, (ω·∇)u.
    pub stretching: bool,
    /// Spread vorton radii to the grid's resolvable scale (part 12).
    pub auto_mollify: bool,
    /// Auto-mollification target: a vorton's diameter spans about this many grid cells (1).
    pub length_scale: f64,
    /// Grid points per axis `[nx, ny, nz]` when the grid is sized to fit the vortons (the longest axis gets
    /// its count; the others as many cells of the same size as their extent needs).
    pub grid_resolution: [usize; 3],
    /// Margin around the vortons' bounding box, as a fraction of its largest extent on each side (1).
    pub grid_margin: f64,
    /// Time integrator.
    pub integrator: Integrator,
}

impl Default for VpmParams {
    fn default() -> Self {
        Self {
            velocity: VelocityMethod::TreeVortons,
            tree: TreeParams::default(),
            poisson: PoissonParams::default(),
            buoyancy: BuoyancyParams::default(),
            viscosity: 0.0,
            ambient_density: 1.2,
            stretching: true,
            auto_mollify: false,
            length_scale: 2.0,
            grid_resolution: [32, 32, 32],
            grid_margin: 0.05,
            integrator: Integrator::Rk2,
        }
    }
}

impl VpmParams {
    /// Checks every value of the `[vpm]` keys; the first one out of range is named by its key.
    pub fn validate(&self) -> Check {
        check::range("theta", self.tree.theta, 0.0, 2.0, true)?;
        check::int_range("leaf_size", self.tree.leaf_size as i128, 1, 4096)?;
        check::range("viscosity", self.viscosity, 0.0, 1e6, false)?;
        check::positive("ambient_density", self.ambient_density, "kg/m³")?;
        check::range("length_scale", self.length_scale, 0.0, 100.0, true)?;
        check::range("grid_margin", self.grid_margin, 0.0, 10.0, false)?;
        check::range("poisson_tolerance", self.poisson.tolerance, 0.0, 0.5, true)?;
        check::range(
            "boundary_theta",
            self.poisson.boundary_theta,
            0.0,
            2.0,
            true,
        )?;
        check::range(
            "thermal_expansion",
            self.buoyancy.thermal_expansion,
            -1.0,
            1.0,
            false,
        )?;
        check::range(
            "heat_diffusivity",
            self.buoyancy.heat_diffusivity,
            0.0,
            1e6,
            false,
        )
    }
}

/// The scene-file form of [`VpmParams`]: one flat table of keys, the grouping by stage undone.
#[cfg(feature = "serde")]
mod keys {
    use super::*;

    /// `[vpm]`'s parameter keys, in the order a resolved scene file lists them.
    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields, default)]
    pub(super) struct Keys {
        velocity: VelocityMethod,
        boundary: PotentialBoundary,
        decimate: Decimation,
        splat: Splat,
        boundary_theta: f64,
        poisson_tolerance: f64,
        restriction: Restriction,
        baroclinic: bool,
        thermal_expansion: f64,
        heat_diffusivity: f64,
        theta: f64,
        leaf_size: usize,
        original_leaves: bool,
        tree_method: TreeMethod,
        viscosity: f64,
        ambient_density: f64,
        stretching: bool,
        auto_mollify: bool,
        length_scale: f64,
        grid_margin: f64,
        integrator: Integrator,
    }

    impl Default for Keys {
        fn default() -> Self {
            VpmParams::default().into()
        }
    }

    impl From<VpmParams> for Keys {
        fn from(p: VpmParams) -> Self {
            Self {
                velocity: p.velocity,
                boundary: p.poisson.boundary,
                decimate: p.poisson.decimate,
                splat: p.poisson.splat,
                boundary_theta: p.poisson.boundary_theta,
                poisson_tolerance: p.poisson.tolerance,
                restriction: p.poisson.restriction,
                baroclinic: p.buoyancy.baroclinic,
                thermal_expansion: p.buoyancy.thermal_expansion,
                heat_diffusivity: p.buoyancy.heat_diffusivity,
                theta: p.tree.theta,
                leaf_size: p.tree.leaf_size,
                original_leaves: p.tree.original_leaves,
                tree_method: p.tree.method,
                viscosity: p.viscosity,
                ambient_density: p.ambient_density,
                stretching: p.stretching,
                auto_mollify: p.auto_mollify,
                length_scale: p.length_scale,
                grid_margin: p.grid_margin,
                integrator: p.integrator,
            }
        }
    }

    impl From<Keys> for VpmParams {
        fn from(k: Keys) -> Self {
            let d = VpmParams::default();
            Self {
                velocity: k.velocity,
                tree: TreeParams {
                    theta: k.theta,
                    leaf_size: k.leaf_size,
                    original_leaves: k.original_leaves,
                    method: k.tree_method,
                },
                viscosity: k.viscosity,
                poisson: PoissonParams {
                    boundary: k.boundary,
                    decimate: k.decimate,
                    splat: k.splat,
                    boundary_theta: k.boundary_theta,
                    tolerance: k.poisson_tolerance,
                    restriction: k.restriction,
                },
                buoyancy: BuoyancyParams {
                    baroclinic: k.baroclinic,
                    thermal_expansion: k.thermal_expansion,
                    heat_diffusivity: k.heat_diffusivity,
                    ..d.buoyancy
                },
                ambient_density: k.ambient_density,
                stretching: k.stretching,
                auto_mollify: k.auto_mollify,
                length_scale: k.length_scale,
                grid_resolution: d.grid_resolution,
                grid_margin: k.grid_margin,
                integrator: k.integrator,
            }
        }
    }
}
