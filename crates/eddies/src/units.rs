//! The SI unit of every quantity a method offers by name: its grid fields ([`Description::fields`]), its
//! per-particle values ([`Description::particle_values`]) and the particle views pictures are made of
//! (`tracers`). Drivers label pictures, colour bars and files with these and never restate a unit.
//!
//! A 2D simulation is a slab of unit depth, and its quantities are per unit of that depth: density is mass
//! per area (kg/m², as the methods' rest densities are given in 2D) and pressure force per length (N/m = Pa·m,
//! from ρ a = −∇p with ρ in kg/m²). Quantities without a dimension (mass fractions, cell types, counts) have
//! the unit "1".
//!
//! [`Description::fields`]: crate::Description::fields
//! [`Description::particle_values`]: crate::Description::particle_values

/// The unit of a dimensionless quantity.
pub const DIMENSIONLESS: &str = "1";

/// The SI unit of the quantity `name` in a `dim`-dimensional simulation, or `None` for a name no method
/// offers. `substance_K` is any substance's mass fraction.
pub fn unit(name: &str, dim: usize) -> Option<&'static str> {
    let plane = dim == 2;
    let unit = match name {
        "density" | "density_deviation" if plane => "kg/m²",
        "density" | "density_deviation" => "kg/m³",
        "pressure" if plane => "N/m",
        "pressure" => "Pa",
        // The pressure solve's residual b − A p, a pressure over an area.
        "residual" if plane => "N/m³",
        "residual" => "Pa/m²",
        "mass" => "kg",
        "speed" | "velocity_x" | "velocity_y" | "velocity_z" => "m/s",
        "vorticity" | "vorticity_magnitude" | "vorticity_x" | "vorticity_y" | "vorticity_z" => {
            "1/s"
        }
        "divergence" | "divergence_before" => "1/s",
        "surface" | "radius" => "m",
        "temperature" => "K",
        "vector_potential" => "m²/s",
        // A vorton's strength |ω| V.
        "strength" => "m³/s",
        // Counts, indices, fractions and flags.
        "tracers" | "cell_type" | "fill" | "volume_excess" | "substance" => DIMENSIONLESS,
        _ if is_substance_fraction(name) => DIMENSIONLESS,
        _ => return None,
    };
    Some(unit)
}

/// Whether `name` is `substance_K`, a substance's mass fraction.
fn is_substance_fraction(name: &str) -> bool {
    name.strip_prefix("substance_")
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{flip, reint, vpm, Description};

    /// Every name any method offers, in either dimension, with the dimension it is offered in.
    fn offered() -> Vec<(Description, usize)> {
        let mut all = Vec::new();
        for dim in [2, 3] {
            all.push((reint::describe(dim, reint::MAX_SUBSTANCES), dim));
            all.push((flip::describe(dim), dim));
        }
        all.push((vpm::describe(), 3));
        all
    }

    #[test]
    fn every_field_particle_value_and_view_has_a_unit() {
        for (d, dim) in offered() {
            let names = d
                .fields
                .iter()
                .chain(&d.particle_values)
                .chain([&d.default_view]);
            for name in names {
                assert!(
                    unit(name, dim).is_some(),
                    "{} offers \"{name}\" in {dim}D without a unit",
                    d.method
                );
            }
        }
        // vpm's particle views besides its default `tracers`.
        assert_eq!(unit("vorticity_magnitude", 3), Some("1/s"));
        assert_eq!(unit("tracers", 3), Some(DIMENSIONLESS));
    }

    #[test]
    fn densities_are_per_area_in_2d_and_per_volume_in_3d() {
        assert_eq!(unit("density", 2), Some("kg/m²"));
        assert_eq!(unit("density", 3), Some("kg/m³"));
        assert_eq!(unit("pressure", 2), Some("N/m"));
        assert_eq!(unit("pressure", 3), Some("Pa"));
        assert_eq!(unit("substance_3", 2), Some(DIMENSIONLESS));
        assert_eq!(unit("substance_", 2), None);
        assert_eq!(unit("colour", 2), None);
    }
}
