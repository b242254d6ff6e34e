//! Parameters of the vortex particle method.

/// How velocity (and its gradient, for stretching) is obtained from the vortons (Gourlay, parts 3 and 12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

impl VelocityMethod {
    /// Whether velocity is evaluated on the grid and interpolated.
    pub fn on_grid(self) -> bool {
        matches!(self, Self::DirectGrid | Self::TreeGrid)
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
}

impl Default for TreeParams {
    fn default() -> Self {
        Self {
            theta: 0.5,
            leaf_size: 64,
            original_leaves: true,
        }
    }
}

/// Time integrator of the advection and stretching terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Integrator {
    /// Heun's second-order Runge–Kutta (two velocity evaluations per step).
    Rk2,
    /// Classical fourth-order Runge–Kutta (four evaluations per step).
    Rk4,
}

/// Physical and numerical parameters of a vorton simulation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VpmParams {
    /// Velocity-from-vorticity technique.
    pub velocity: VelocityMethod,
    /// Treecode settings (used by the tree techniques).
    pub tree: TreeParams,
    /// Kinematic viscosity ν (m²/s); 0 switches viscous diffusion off.
    pub viscosity: f64,
    /// Ambient fluid density ρ₀ (kg/m³), for the kinetic energy.
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
            viscosity: 0.0,
            ambient_density: 1.0,
            stretching: true,
            auto_mollify: false,
            length_scale: 2.0,
            grid_resolution: [32, 32, 32],
            grid_margin: 0.05,
            integrator: Integrator::Rk2,
        }
    }
}
