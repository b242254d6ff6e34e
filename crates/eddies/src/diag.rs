//! Per-step diagnostics: the record every method returns from `step`, and the per-stage timer that feeds both
//! the record and the benchmarks.

use std::time::Instant;

/// A method quantity in a [`StepRecord`].
#[derive(Clone, Debug, PartialEq)]
pub enum Quantity {
    /// A real number (SI units, stated where the quantity is named).
    Scalar(f64),
    /// A vector, e.g. momentum or a centroid.
    Vector(Vec<f64>),
    /// A count, e.g. particles.
    Count(u64),
}

/// What one simulation step did: the record the README's "Outputs" section lists (time, dt, substeps, stage wall times, and the
/// method's conserved and monitored quantities).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepRecord {
    /// Steps completed, counting this one (the first step has `step = 1`).
    pub step: u64,
    /// Simulated time after the step (s).
    pub time: f64,
    /// Time step (s).
    pub dt: f64,
    /// Substeps taken inside this step (1 where the method does not substep).
    pub substeps: u32,
    /// Wall time of the whole step (ms).
    pub wall_ms: f64,
    /// Wall time of each stage (ms), in the order the stages ran.
    pub stage_ms: Vec<(&'static str, f64)>,
    /// Method quantities by name: every method gives `kinetic_energy` (J) and `max_speed` (m/s).
    pub quantities: Vec<(&'static str, Quantity)>,
    /// Values that this step held at a limit instead of the value its physics asked for; empty when none
    /// was. A driver should tell the user: the run goes on, but its physics is not the scene's.
    pub clamps: Vec<Clamp>,
}

/// A limit that a step enforced, e.g. reintegration tracking's speed limit of a box's reach per step.
#[derive(Clone, Debug, PartialEq)]
pub struct Clamp {
    /// Short name of the limited quantity, e.g. `speed`.
    pub name: &'static str,
    /// How many values were held at the limit in this step (e.g. velocity components).
    pub count: u64,
    /// The limit (in `unit`).
    pub limit: f64,
    /// Unit of `limit`.
    pub unit: &'static str,
    /// What the user can do about it, e.g. `take smaller steps (time.cfl, --steps-per-frame)`.
    pub remedy: &'static str,
}

impl StepRecord {
    /// Looks up a quantity by name.
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.quantities
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, q)| q)
    }

    /// Looks up a scalar quantity by name.
    pub fn scalar(&self, name: &str) -> Option<f64> {
        match self.get(name)? {
            Quantity::Scalar(x) => Some(*x),
            Quantity::Count(c) => Some(*c as f64),
            Quantity::Vector(_) => None,
        }
    }
}

/// Accumulates wall time per named stage, in first-seen order (the stage times of every [`StepRecord`] and of `eddies bench`).
#[derive(Clone, Debug, Default)]
pub struct StageTimer {
    stages: Vec<(&'static str, f64)>,
}

impl StageTimer {
    /// An empty timer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` and adds its wall time to stage `name`.
    pub fn time<R>(&mut self, name: &'static str, f: impl FnOnce() -> R) -> R {
        let start = Instant::now();
        let r = f();
        self.add(name, start.elapsed().as_secs_f64() * 1e3);
        r
    }

    /// Adds `ms` milliseconds to stage `name`.
    pub fn add(&mut self, name: &'static str, ms: f64) {
        match self.stages.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += ms,
            None => self.stages.push((name, ms)),
        }
    }

    /// Stage times so far (ms).
    pub fn stages(&self) -> &[(&'static str, f64)] {
        &self.stages
    }

    /// The stage times, the timer spent.
    pub fn into_stages(self) -> Vec<(&'static str, f64)> {
        self.stages
    }

    /// Sum of all stage times (ms).
    pub fn total_ms(&self) -> f64 {
        self.stages.iter().map(|(_, t)| t).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_accumulates_in_first_seen_order() {
        let mut t = StageTimer::new();
        t.add("forces", 1.0);
        t.add("reintegrate", 2.0);
        t.add("forces", 0.5);
        assert_eq!(t.stages(), &[("forces", 1.5), ("reintegrate", 2.0)]);
        assert_eq!(t.total_ms(), 3.5);
    }
}
