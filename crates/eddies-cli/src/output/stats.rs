//! The `stats.jsonl` line of a step (README, "Outputs"): the step's time, wall and stage times, then the
//! method's quantities and the limits it enforced.

use eddies::{Quantity, StepRecord};

/// Keys of every `stats.jsonl` line, before the method's quantities.
pub const STATS_KEYS: &[&str] = &["step", "time", "dt", "substeps", "wall_ms", "stage_ms"];

/// `x` as a JSON number, or `null` when it is not finite (JSON has no NaN).
fn number(x: f64) -> String {
    serde_json::Number::from_f64(x).map_or_else(|| "null".to_string(), |n| n.to_string())
}

/// `s` as a JSON string, quoted and escaped.
fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// One `stats.jsonl` line (without the newline): `step`, `time`, `dt`, `substeps`, `wall_ms`, `stage_ms`
/// (stage name → ms), then every quantity of the record by name (scalars as numbers, vectors as arrays,
/// counts as integers). Non-finite numbers are written as `null`, since JSON has no NaN.
pub fn stats_line(rec: &StepRecord) -> String {
    let stages: Vec<String> = rec
        .stage_ms
        .iter()
        .map(|(n, ms)| format!("{}:{}", json_string(n), number(*ms)))
        .collect();
    let mut line = format!(
        "{{\"step\":{},\"time\":{},\"dt\":{},\"substeps\":{},\"wall_ms\":{},\"stage_ms\":{{{}}}",
        rec.step,
        number(rec.time),
        number(rec.dt),
        rec.substeps,
        number(rec.wall_ms),
        stages.join(",")
    );
    for (name, q) in &rec.quantities {
        if STATS_KEYS.contains(name) {
            continue;
        }
        let value = match q {
            Quantity::Scalar(x) => number(*x),
            Quantity::Count(c) => c.to_string(),
            Quantity::Vector(v) => format!(
                "[{}]",
                v.iter().map(|x| number(*x)).collect::<Vec<_>>().join(",")
            ),
        };
        line.push_str(&format!(",{}:{}", json_string(name), value));
    }
    if !rec.clamps.is_empty() {
        let clamps: Vec<String> = rec
            .clamps
            .iter()
            .map(|c| {
                format!(
                    "{}:{{\"count\":{},\"limit\":{},\"unit\":{}}}",
                    json_string(c.name),
                    c.count,
                    number(c.limit),
                    json_string(c.unit)
                )
            })
            .collect();
        line.push_str(&format!(",\"clamps\":{{{}}}", clamps.join(",")));
    }
    line.push('}');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_line_has_the_documented_keys_in_order() {
        let rec = StepRecord {
            step: 3,
            time: 0.25,
            dt: 0.01,
            substeps: 1,
            wall_ms: 2.5,
            stage_ms: vec![("forces", 1.0), ("reintegrate", 1.5)],
            quantities: vec![
                ("mass", Quantity::Scalar(12.0)),
                ("momentum", Quantity::Vector(vec![1.0, f64::NAN])),
                ("particle_count", Quantity::Count(7)),
            ],
            clamps: Vec::new(),
        };
        let line = stats_line(&rec);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["step"], 3);
        assert_eq!(v["stage_ms"]["reintegrate"], 1.5);
        assert_eq!(v["mass"], 12.0);
        assert_eq!(v["momentum"], serde_json::json!([1.0, null]));
        assert_eq!(v["particle_count"], 7);
        assert!(line.starts_with("{\"step\":3,\"time\":0.25,\"dt\":0.01,"));
    }
}
