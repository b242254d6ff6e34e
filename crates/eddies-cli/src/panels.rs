//! Side-by-side variants of one scene (`output.panels`): several simulations stepped in lock step and shown
//! next to each other, e.g. part 20's Figure 1 (one vorticity field, three ways to get velocity from it).

use eddies::diag::{StageTimer, StepRecord};
use eddies::sim::{Advance, Description, Field, SimError};
use eddies::{SavedState, Simulation};

use crate::load::{Override, SceneError};

/// The overrides of panel `entry` (`key=value` pairs separated by `;`), after the command line's.
///
/// # Errors
/// A pair that is not `key=value`.
pub fn overrides(base: &[Override], entry: &str) -> Result<Vec<Override>, SceneError> {
    let mut ovs = base.to_vec();
    for part in entry.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let mut ov = Override::parse_set(part)?;
        ov.origin = format!("output.panels entry \"{entry}\"");
        ovs.push(ov);
    }
    Ok(ovs)
}

/// Simulations stepped together; particles of panel k are shifted along x by k domain widths.
pub struct Panels {
    sims: Vec<Box<dyn Simulation>>,
    width: f64,
}

impl Panels {
    /// The panels, left to right, and the domain width (m) each is shifted by.
    pub fn new(sims: Vec<Box<dyn Simulation>>, width: f64) -> Self {
        assert!(!sims.is_empty(), "at least one panel");
        Self { sims, width }
    }

    fn shifted(&self, f: impl Fn(&dyn Simulation) -> Vec<f32>) -> Vec<f32> {
        let dim = self.sims[0].dim();
        let mut out = Vec::new();
        for (k, sim) in self.sims.iter().enumerate() {
            let p = f(sim.as_ref());
            let dx = (k as f64 * self.width) as f32;
            out.extend(
                p.chunks_exact(dim)
                    .flat_map(|c| std::iter::once(c[0] + dx).chain(c[1..].iter().copied())),
            );
        }
        out
    }
}

impl Simulation for Panels {
    fn dim(&self) -> usize {
        self.sims[0].dim()
    }

    fn resolution(&self) -> [usize; 3] {
        self.sims[0].resolution()
    }

    fn cell_size(&self) -> f64 {
        self.sims[0].cell_size()
    }

    fn grid_origin(&self) -> [f64; 3] {
        self.sims[0].grid_origin()
    }

    fn time(&self) -> f64 {
        self.sims[0].time()
    }

    fn steps(&self) -> u64 {
        self.sims[0].steps()
    }

    /// The smallest panel's step: all panels take the same steps.
    fn max_dt(&self, cfl: f64) -> f64 {
        self.sims
            .iter()
            .map(|s| s.max_dt(cfl))
            .fold(f64::INFINITY, f64::min)
    }

    /// Steps every panel; the record is the first panel's (its stage times and quantities), with the wall
    /// time and the clamps of all.
    fn advance(&mut self, dt: f64, timer: &mut StageTimer) -> Result<Advance, SimError> {
        let mut first: Option<StepRecord> = None;
        let mut clamps = Vec::new();
        for sim in &mut self.sims {
            let mut rec = sim.step(dt)?;
            clamps.append(&mut rec.clamps);
            first.get_or_insert(rec);
        }
        let rec = first.expect("at least one panel");
        for &(name, ms) in &rec.stage_ms {
            timer.add(name, ms);
        }
        Ok(Advance {
            substeps: rec.substeps,
            quantities: rec.quantities,
            clamps,
        })
    }

    fn completes_records_later(&self) -> bool {
        self.sims.iter().any(|s| s.completes_records_later())
    }

    /// Each panel completes its own copy of the records (a GPU panel reads its diagnostics back here); the
    /// quantities are the first panel's, the clamps those of all.
    fn complete_records(&mut self, records: &mut [StepRecord]) -> Result<(), SimError> {
        let mut clamps = vec![Vec::new(); records.len()];
        for (k, sim) in self.sims.iter_mut().enumerate() {
            let mut own: Vec<StepRecord> = records
                .iter()
                .map(|r| StepRecord {
                    quantities: Vec::new(),
                    clamps: Vec::new(),
                    ..r.clone()
                })
                .collect();
            sim.complete_records(&mut own)?;
            for (i, r) in own.into_iter().enumerate() {
                if k == 0 && !r.quantities.is_empty() {
                    records[i].quantities = r.quantities;
                }
                clamps[i].extend(r.clamps);
            }
        }
        for (r, c) in records.iter_mut().zip(clamps) {
            r.clamps.extend(c);
        }
        Ok(())
    }

    /// The first panel's description: all panels run one method.
    fn describe(&self) -> Description {
        self.sims[0].describe()
    }

    /// The first panel's field.
    fn field(&self, name: &str) -> Option<Field> {
        self.sims[0].field(name)
    }

    fn particle_positions(&self) -> Vec<f32> {
        self.shifted(|s| s.particle_positions())
    }

    fn tracer_positions(&self) -> Vec<f32> {
        self.shifted(|s| s.tracer_positions())
    }

    fn particle_values(&self, name: &str) -> Option<Vec<f32>> {
        let mut out = Vec::new();
        for sim in &self.sims {
            out.extend(sim.particle_values(name)?);
        }
        Some(out)
    }

    fn memory_bytes(&self) -> usize {
        self.sims.iter().map(|s| s.memory_bytes()).sum()
    }

    /// Each panel's arrays, their names prefixed with `panelK.`.
    fn save_state(&self) -> Result<SavedState, SimError> {
        let mut all = SavedState::default();
        for (k, sim) in self.sims.iter().enumerate() {
            for (name, array) in sim.save_state()?.arrays {
                all.arrays.push((format!("panel{k}.{name}"), array));
            }
        }
        Ok(all)
    }

    /// Checks every panel's part before any panel takes its own, so that a misfit changes nothing.
    fn restore_state(&mut self, state: &SavedState) -> Result<(), SimError> {
        let parts: Vec<SavedState> = (0..self.sims.len())
            .map(|k| {
                let prefix = format!("panel{k}.");
                SavedState {
                    arrays: state
                        .arrays
                        .iter()
                        .filter_map(|(n, a)| {
                            n.strip_prefix(&prefix).map(|n| (n.to_string(), a.clone()))
                        })
                        .collect(),
                }
            })
            .collect();
        if let Some(k) = parts.iter().position(|p| p.arrays.is_empty()) {
            return Err(SimError::InvalidInput(format!(
                "the checkpoint has no state for panel {k}: it was written for another scene"
            )));
        }
        let before: Vec<SavedState> = self
            .sims
            .iter()
            .map(|s| s.save_state())
            .collect::<Result<_, _>>()?;
        for (k, part) in parts.iter().enumerate() {
            if let Err(e) = self.sims[k].restore_state(part) {
                // Put back the panels that had taken theirs.
                for (sim, b) in self.sims.iter_mut().zip(&before).take(k) {
                    let _ = sim.restore_state(b);
                }
                return Err(e);
            }
        }
        Ok(())
    }
}
