//! What a FLIP simulation shows: its grid fields (Eng's debug views among them, and the Zhu–Bridson
//! surface), and the [`Description`] of its fields and stages.

use super::FlipSim;
use crate::grid::CellFlag;
use crate::sim::{Description, Field, FrameSource};

impl<const D: usize> FlipSim<D> {
    fn interior_field(&self, signed: bool, f: impl Fn(usize) -> f64) -> Field {
        Field {
            shape: self.cfg.resolution.iter().rev().copied().collect(),
            data: (0..self.count.len()).map(|i| f(i) as f32).collect(),
            signed,
        }
    }

    /// The grid field `name` ([`describe`]), or `None` for a name it does not have.
    pub(super) fn grid_field(&self, name: &str) -> Option<Field> {
        let cv = |i: usize| self.u.cell_velocity(self.count.coords(i));
        let rho = self.cfg.params.density;
        let per_cell = self.cfg.params.seeds_per_axis.pow(D as u32) as f64;
        Some(match name {
            "density" => self.interior_field(false, |i| {
                (self.count.data[i] as f64 / per_cell).min(1.0) * rho
            }),
            "substance_0" => self.interior_field(false, |i| (self.count.data[i] > 0) as u8 as f64),
            "speed" => {
                self.interior_field(false, |i| cv(i).iter().map(|x| x * x).sum::<f64>().sqrt())
            }
            "velocity_x" => self.interior_field(true, |i| cv(i)[0]),
            "velocity_y" => self.interior_field(true, |i| cv(i)[1]),
            "velocity_z" if D == 3 => self.interior_field(true, |i| cv(i)[2]),
            "cell_type" => self.interior_field(false, |i| match self.flags.data[i] {
                CellFlag::Air => 0.0,
                CellFlag::Fluid => 1.0,
                CellFlag::Solid => 2.0,
            }),
            "divergence_before" => self.interior_field(true, |i| {
                if self.flags.data[i] == CellFlag::Fluid {
                    self.div_before.data[i]
                } else {
                    0.0
                }
            }),
            "divergence" => self.interior_field(true, |i| {
                if self.flags.data[i] == CellFlag::Fluid {
                    self.div_after.data[i]
                } else {
                    0.0
                }
            }),
            "pressure" => self.interior_field(true, |i| self.pressure.data[i]),
            "fill" => self.interior_field(false, |i| self.fill.data[i]),
            "volume_excess" => self.interior_field(false, |i| self.excess.data[i]),
            "residual" => {
                // b − A p of the last solve. With the velocity update matching the operator, A p − b equals
                // (ρ/Δt) times the divergence left after projection, so it is read off that divergence.
                let dt = self.last_substep_dt;
                let rho = self.cfg.params.density;
                self.interior_field(true, |i| {
                    if self.flags.data[i] == CellFlag::Fluid && dt > 0.0 {
                        -rho / dt * self.div_after.data[i]
                    } else {
                        0.0
                    }
                })
            }
            "surface" => {
                let mut g = self.pressure.clone();
                self.surface_distance(&mut g);
                self.interior_field(true, |i| g.data[i])
            }
            _ => return None,
        })
    }
}

/// Stages of a step, in order ([`Description::stages`]).
pub const STAGES: &[&str] = &[
    "sort",
    "particles_to_grid",
    "save_velocities",
    "mark_cells",
    "forces",
    "project",
    "volume_correction",
    "extrapolate",
    "grid_to_particles_advect",
    "diagnostics",
];

/// The grid fields of a `dim`-dimensional FLIP simulation, Eng's debug views among them:
/// `density` (kg/m^D, particle count over the seeding count, capped at ρ), `substance_0` (1 where liquid),
/// `speed` and `velocity_*` (m/s, cell-centred), `cell_type` (0 air, 1 fluid, 2 solid), `divergence_before`
/// and `divergence` (1/s, before and after projection), `pressure` (Pa), `fill` (1, the smoothed particle density
/// over the seeding density), `volume_excess` (1, the relative
/// excess the volume correction removes), `residual` (Pa/m², the pressure
/// solve's `b − A p`) and `surface` (m, the Zhu–Bridson signed distance, negative inside).
pub fn describe(dim: usize) -> Description {
    let mut names = vec![
        "density",
        "substance_0",
        "speed",
        "velocity_x",
        "velocity_y",
    ];
    if dim == 3 {
        names.push("velocity_z");
    }
    names.extend([
        "cell_type",
        "divergence_before",
        "divergence",
        "pressure",
        "fill",
        "volume_excess",
        "residual",
        "surface",
    ]);
    Description {
        method: "flip",
        fields: names,
        particle_values: ["velocity_x", "velocity_y", "velocity_z"][..dim].to_vec(),
        stages: STAGES,
        array_fields: &["pressure", "divergence"],
        picture: FrameSource::Grid,
        default_view: "density",
    }
}
