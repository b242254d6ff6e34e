//! The files `eddies run` writes, in the formats the README's "Outputs" section documents: `stats.jsonl` lines,
//! `scene.toml`, and the per-frame file names. Every whole file is written to a temporary name in the same
//! folder and renamed, so a reader never sees half a file and an interrupted run loses at most the file in
//! flight.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use eddies::{Quantity, StepRecord};
use toml_edit::{DocumentMut, Item};

use crate::scene::{Method, Scene};

/// Keys of every `stats.jsonl` line, before the method's quantities.
pub const STATS_KEYS: &[&str] = &["step", "time", "dt", "substeps", "wall_ms", "stage_ms"];

/// `frame_NNNNN.png`.
pub fn frame_name(frame: usize) -> String {
    format!("frame_{frame:05}.png")
}

/// `particles_NNNNN.npy`.
pub fn particles_name(frame: usize) -> String {
    format!("particles_{frame:05}.npy")
}

/// `field_NAME_NNNNN.npy`.
pub fn field_name(name: &str, frame: usize) -> String {
    format!("field_{name}_{frame:05}.npy")
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("output");
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

pub(crate) fn number(x: f64) -> String {
    serde_json::Number::from_f64(x).map_or_else(|| "null".to_string(), |n| n.to_string())
}

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

/// The resolved scene as TOML that parses back to the same [`Scene`] as far as its method reads it: the
/// parameter section of its method only (the others' are left at their defaults), shapes as inline tables,
/// and a comment header.
pub fn scene_toml(scene: &Scene, header: &str) -> Result<String, String> {
    let text =
        toml::to_string(scene).map_err(|e| format!("cannot write the resolved scene: {e}"))?;
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| format!("cannot re-read the resolved scene: {e}"))?;
    for section in [Method::Reint, Method::Flip, Method::Vpm] {
        if section != scene.method {
            doc.remove(section.name());
        }
    }
    for list in ["region", "obstacle", "emitter", "sink"] {
        if let Some(Item::ArrayOfTables(tables)) = doc.get_mut(list) {
            for t in tables.iter_mut() {
                if let Some(item) = t.get_mut("shape") {
                    item.make_value();
                }
            }
        }
    }
    let comments: String = header.lines().map(|l| format!("# {l}\n")).collect();
    Ok(format!("{comments}\n{doc}"))
}

/// Whether `name` is a per-frame output of ours (`frame_NNNNN.png`, `particles_NNNNN.npy`,
/// `field_*_NNNNN.npy`).
fn is_frame_output(name: &str) -> bool {
    let numbered =
        |stem: &str| stem.len() >= 5 && stem[stem.len() - 5..].bytes().all(|b| b.is_ascii_digit());
    if let Some(stem) = name
        .strip_prefix("frame_")
        .and_then(|s| s.strip_suffix(".png"))
    {
        return stem.len() == 5 && numbered(stem);
    }
    if let Some(stem) = name
        .strip_prefix("particles_")
        .and_then(|s| s.strip_suffix(".npy"))
    {
        return stem.len() == 5 && numbered(stem);
    }
    if let Some(stem) = name
        .strip_prefix("field_")
        .and_then(|s| s.strip_suffix(".npy"))
    {
        return stem.len() > 6 && numbered(stem) && stem.as_bytes()[stem.len() - 6] == b'_';
    }
    false
}

/// Whether `name` is a temporary file [`write_atomic`] left behind when a run was interrupted.
fn is_our_temporary(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|n| n.rsplit_once(".tmp-"))
        .is_some_and(|(file, pid)| {
            pid.bytes().all(|b| b.is_ascii_digit())
                && (is_frame_output(file) || file == "scene.toml")
        })
}

/// Checks, creating nothing that stays, that `dir` can be the output folder: a folder this process can
/// write into, or a path that does not exist yet under a folder it can write into. Writing is tried (a
/// probe file, removed at once), since permission bits do not tell the whole story (a read-only mount; a
/// root user who ignores them). Returns the reason when it cannot.
pub fn check_output_folder(dir: &Path) -> Result<(), String> {
    let mut probe_in = dir;
    while !probe_in.exists() {
        match probe_in.parent() {
            Some(p) if !p.as_os_str().is_empty() => probe_in = p,
            _ => {
                probe_in = Path::new(".");
                break;
            }
        }
    }
    if !probe_in.is_dir() {
        return Err(format!("{} is not a folder", probe_in.display()));
    }
    let probe = probe_in.join(format!(".eddies-probe-{}", std::process::id()));
    match fs::File::create(&probe) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot write into {}: {e}", probe_in.display())),
    }
}

/// Removes the per-frame files of an earlier run from `dir`, so that its frames do not mix with this run's,
/// and temporary files an interrupted run left. Other files are left alone. Returns the paths removed.
pub fn remove_stale_outputs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let ours = name
            .to_str()
            .is_some_and(|n| is_frame_output(n) || is_our_temporary(n));
        if ours && entry.file_type()?.is_file() {
            fs::remove_file(entry.path())?;
            removed.push(entry.path());
        }
    }
    Ok(removed)
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

    #[test]
    fn atomic_write_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn stale_outputs_are_ours_only() {
        for ok in [
            "frame_00000.png",
            "particles_00012.npy",
            "field_mass_00003.npy",
            "field_a_b_99999.npy",
        ] {
            assert!(is_frame_output(ok), "{ok}");
        }
        for keep in [
            "frame_0000.png",
            "frame_00000.jpg",
            "notes.txt",
            "stats.jsonl",
            "field_00001.npy",
            "frame_abcde.png",
        ] {
            assert!(!is_frame_output(keep), "{keep}");
        }
        assert!(is_our_temporary(".frame_00003.png.tmp-4242"));
        assert!(is_our_temporary(".scene.toml.tmp-1"));
        assert!(!is_our_temporary(".notes.txt.tmp-1"));
        assert!(!is_our_temporary("frame_00003.png.tmp-1"));
    }

    #[test]
    fn resolved_scene_parses_back() {
        let mut scene: Scene = toml::from_str(
            "[[region]]\nshape = { difference = { base = { box = { min = [0.0, 0.0], max = [1.0, 0.5] } }, \
             cut = { sphere = { center = [0.5, 0.5], radius = 0.1 } } } }\n[[emitter]]\n\
             shape = { sphere = { center = [0.5, 0.9], radius = 0.05 } }",
        )
        .unwrap();
        scene.resolve().unwrap();
        let text = scene_toml(&scene, "resolved\nsecond line").unwrap();
        // Only the method's own parameter section is written.
        assert!(text.contains("[reint]") && !text.contains("[flip]") && !text.contains("[vpm]"));
        assert!(text.starts_with("# resolved\n# second line\n"));
        assert!(text.contains("shape = { difference"), "{text}");
        let back: Scene = toml::from_str(&text).unwrap();
        assert_eq!(back, scene);
    }
}
