//! Equations of state: pressure from density. Every law of reintegration tracking is here, once: its name in
//! scene files ([`Eos`]), the pressure term the SPH force uses ([`EosTerm::q_times_rest`]) and the pressure
//! the `pressure` field shows ([`EosTerm::pressure`]). Adding a law means a variant of [`Eos`] and an arm in
//! each of [`EosTerm`]'s three matches, all in this file.

/// Equation of state: pressure from density. Each is parametrised by its speed of sound `c` (m/s) at rest
/// density, so that switching the law keeps the time step and stiffness comparable. `s = ρ/ρ₀` is the
/// compression; ρ₀ is the rest density of the cell's substance mix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Eos {
    /// Moroz's liquid law `P = k ρ (ρ − ρ₀)` with `k = c² / ρ₀`, so that `dP/dρ = c²` at rest (Moroz 2020).
    /// Its negative pressure below rest density gives liquids cohesion when [`super::ReintParams::tension`]
    /// is on.
    #[default]
    Quadratic,
    /// Tait/Cole, `P = k((ρ/ρ₀)^γ − 1)` with `k = ρ₀ c² / γ` (Moroz 2020; γ = 7 for water), γ being
    /// [`super::ReintParams::gamma`].
    Tait,
    /// Ideal gas at constant temperature, `P = k ρ` with `k = c²` (Moroz 2020). Never negative: a gas
    /// expands.
    IdealGas,
}

impl Eos {
    /// The law with its constants: speed of sound `c` (m/s, in the simulation's length unit) and the Tait
    /// exponent `gamma`.
    pub(crate) fn term(self, c: f32, gamma: f32) -> EosTerm {
        let c2 = c * c;
        match self {
            Eos::IdealGas => EosTerm::IdealGas { c2 },
            Eos::Tait => EosTerm::Tait { c2, gamma },
            Eos::Quadratic => EosTerm::Quadratic { c2 },
        }
    }
}

/// An equation of state with its constants, in the form the force needs: `q = P/ρ²`, with `ρ = ρ₀ s` where s
/// is the compression (cell mass over rest mass) and ρ₀ the rest density of the cell's substance mix.
///
/// In `q` the compression is floored at [`S_FLOOR`]: a nearly empty cell is a speck of fluid, not a particle
/// of a cell's volume, and its true `P/ρ²`, growing as 1/ρ, would fling it at any speed. Any per-particle q
/// keeps the pair forces equal and opposite, so momentum is still conserved.
#[derive(Clone, Copy, Debug)]
pub(crate) enum EosTerm {
    /// `P = c² ρ`.
    IdealGas { c2: f32 },
    /// `P = (ρ₀ c²/γ)(s^γ − 1)`.
    Tait { c2: f32, gamma: f32 },
    /// `P = ρ₀ c² s (s − 1)`.
    Quadratic { c2: f32 },
}

/// Compression below which a cell's pressure term is computed as if it were this full.
pub(crate) const S_FLOOR: f32 = 0.5;

impl EosTerm {
    /// `P / (ρ₀ max(s, S_FLOOR))²` times ρ₀, i.e. the pressure term q multiplied by the mix's rest density.
    /// Without `tension`, negative pressure is clamped to zero.
    #[inline(always)]
    pub(crate) fn q_times_rest(self, s: f32, tension: bool) -> f32 {
        let sf = if s > S_FLOOR { s } else { S_FLOOR };
        let inv = 1.0 / (sf * sf);
        let q = match self {
            EosTerm::IdealGas { c2 } => c2 * s * inv,
            EosTerm::Tait { c2, gamma } => c2 / gamma * (s.powf(gamma) - 1.0) * inv,
            EosTerm::Quadratic { c2 } => c2 * s * (s - 1.0) * inv,
        };
        if tension || q > 0.0 {
            q
        } else {
            0.0
        }
    }

    /// Pressure (Pa) of a cell of density `rho` (kg/m^D) and compression `s`.
    pub(crate) fn pressure(self, rho: f32, s: f32) -> f32 {
        match self {
            EosTerm::IdealGas { c2 } => c2 * rho,
            EosTerm::Tait { c2, gamma } => rho / s * c2 / gamma * (s.powf(gamma) - 1.0),
            EosTerm::Quadratic { c2 } => rho / s * c2 * s * (s - 1.0),
        }
    }

    /// Calls `f` with this law in a match arm of its own, so that where `f` is inlined its variant is known
    /// and the law's choice is made once, not per cell.
    #[inline(always)]
    pub(crate) fn specialise<R>(self, mut f: impl FnMut(EosTerm) -> R) -> R {
        match self {
            EosTerm::IdealGas { c2 } => f(EosTerm::IdealGas { c2 }),
            EosTerm::Tait { c2, gamma } => f(EosTerm::Tait { c2, gamma }),
            EosTerm::Quadratic { c2 } => f(EosTerm::Quadratic { c2 }),
        }
    }
}
