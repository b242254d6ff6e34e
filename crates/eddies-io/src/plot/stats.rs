//! A run's `stats.jsonl` read into columns: one value per step for every numeric key, and the per-stage
//! times in the order the solver runs its stages.

use std::collections::HashMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::PlotError;

/// The key of the per-stage wall times (an object: stage name → milliseconds).
const STAGE_KEY: &str = "stage_ms";

/// The steps of one run as columns. Every column holds one entry per step; `None` where the step lacks the
/// key or wrote `null` (a non-finite number), so that a plot leaves a gap there rather than a zero.
#[derive(Debug, Default)]
pub(crate) struct StepColumns {
    steps: usize,
    columns: HashMap<String, Vec<Option<f64>>>,
    stages: Vec<(String, Vec<Option<f64>>)>,
}

impl StepColumns {
    /// Reads `stats.jsonl`: one JSON object per line, blank lines skipped. A number is kept as is, a vector
    /// (an array of numbers, such as `circulation`) as its Euclidean length, and other values (the `clamps`
    /// object, strings) are left out.
    ///
    /// # Errors
    /// [`PlotError::MalformedLine`] with the 1-based line number for a line that is not a JSON object, and
    /// [`PlotError::NoSteps`] when no line holds a step.
    pub fn parse(jsonl: &str) -> Result<Self, PlotError> {
        let mut columns = Self::default();
        for (index, text) in jsonl.lines().enumerate() {
            if text.trim().is_empty() {
                continue;
            }
            let line: StepLine =
                serde_json::from_str(text).map_err(|source| PlotError::MalformedLine {
                    line: index + 1,
                    message: source.to_string(),
                })?;
            columns.push(line);
        }
        if columns.steps == 0 {
            return Err(PlotError::NoSteps);
        }
        Ok(columns)
    }

    /// The number of steps read.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The values of `key`, one per step, or `None` when no step holds a finite value of it (a plot of it
    /// would be empty).
    pub fn column(&self, key: &str) -> Option<&[Option<f64>]> {
        self.columns
            .get(key)
            .filter(|values| values.iter().any(Option::is_some))
            .map(Vec::as_slice)
    }

    /// The per-stage times in milliseconds, in the order the stages first appear (the solver's order).
    pub fn stages(&self) -> &[(String, Vec<Option<f64>>)] {
        &self.stages
    }

    fn push(&mut self, line: StepLine) {
        let step = self.steps;
        for (key, value) in line.values {
            let column = self.columns.entry(key).or_default();
            column.resize(step, None);
            column.push(value);
        }
        for (name, ms) in line.stages {
            let index = match self.stages.iter().position(|(known, _)| *known == name) {
                Some(index) => index,
                None => {
                    self.stages.push((name, Vec::new()));
                    self.stages.len() - 1
                }
            };
            let column = &mut self.stages[index].1;
            column.resize(step, None);
            column.push(ms);
        }
        self.steps += 1;
        let columns = self.columns.values_mut();
        for column in columns.chain(self.stages.iter_mut().map(|(_, column)| column)) {
            column.resize(self.steps, None);
        }
    }
}

/// One line of `stats.jsonl`: its numeric values, and its stage times in the order written (a JSON object
/// read into a map would sort them by name).
struct StepLine {
    values: Vec<(String, Option<f64>)>,
    stages: Vec<(String, Option<f64>)>,
}

/// A step's stage times in the order written.
struct StageTimes(Vec<(String, Option<f64>)>);

/// A JSON value as a plottable number: a number, the length of a vector of numbers, `None` for `null` or a
/// vector with a `null` component, and no entry at all for anything else.
fn plottable(value: &Value) -> Option<Option<f64>> {
    match value {
        Value::Null => Some(None),
        Value::Number(number) => Some(number.as_f64()),
        Value::Array(items) => {
            let mut sum = 0.0;
            for item in items {
                match item {
                    Value::Number(number) => sum += number.as_f64()?.powi(2),
                    Value::Null => return Some(None),
                    _ => return None,
                }
            }
            Some(Some(sum.sqrt()))
        }
        _ => None,
    }
}

impl<'de> Deserialize<'de> for StepLine {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LineVisitor;
        impl<'de> Visitor<'de> for LineVisitor {
            type Value = StepLine;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of one step's statistics")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StepLine, A::Error> {
                let mut line = StepLine {
                    values: Vec::new(),
                    stages: Vec::new(),
                };
                while let Some(key) = map.next_key::<String>()? {
                    if key == STAGE_KEY {
                        line.stages = map.next_value::<StageTimes>()?.0;
                    } else if let Some(value) = plottable(&map.next_value::<Value>()?) {
                        line.values.push((key, value));
                    }
                }
                Ok(line)
            }
        }
        deserializer.deserialize_map(LineVisitor)
    }
}

impl<'de> Deserialize<'de> for StageTimes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StageVisitor;
        impl<'de> Visitor<'de> for StageVisitor {
            type Value = StageTimes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of stage name to milliseconds")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StageTimes, A::Error> {
                let mut stages = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    stages.push((name, map.next_value::<Option<f64>>()?));
                }
                Ok(StageTimes(stages))
            }
        }
        deserializer.deserialize_map(StageVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_keep_gaps_where_a_step_lacks_a_key_or_wrote_null() {
        let stats = StepColumns::parse(
            "{\"step\":0,\"time\":0.0,\"kinetic_energy\":1.5}\n\
             {\"step\":1,\"time\":0.1,\"kinetic_energy\":null}\n\n\
             {\"step\":2,\"time\":0.2,\"max_speed\":3.0}\n",
        )
        .expect("valid stats");
        assert_eq!(stats.steps(), 3);
        assert_eq!(
            stats.column("kinetic_energy"),
            Some(&[Some(1.5), None, None][..])
        );
        assert_eq!(
            stats.column("max_speed"),
            Some(&[None, None, Some(3.0)][..])
        );
        assert_eq!(stats.column("mass"), None);
    }

    #[test]
    fn stages_keep_the_order_written_and_vectors_become_lengths() {
        let stats = StepColumns::parse(
            "{\"stage_ms\":{\"forces\":1.0,\"advect\":2.0},\"circulation\":[3.0,0.0,4.0]}\n\
             {\"stage_ms\":{\"forces\":1.5,\"advect\":2.5,\"output\":0.5},\"circulation\":[0.0,null,1.0]}",
        )
        .expect("valid stats");
        let names: Vec<&str> = stats.stages().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["forces", "advect", "output"]);
        assert_eq!(stats.stages()[2].1, [None, Some(0.5)]);
        assert_eq!(stats.column("circulation"), Some(&[Some(5.0), None][..]));
    }

    #[test]
    fn a_column_of_only_nulls_is_absent() {
        let stats = StepColumns::parse("{\"enstrophy\":null}").expect("valid stats");
        assert_eq!(stats.column("enstrophy"), None);
    }
}
