//! What a new user meets first: scenes that would run without result, values held at a limit, output
//! folders that cannot be used, and runs stopped by Ctrl-C or SIGTERM. Each case checks the exit code and
//! message that the README promises, and that nothing is lost or written where it should not be.

use std::fs;
use std::path::Path;
use std::process::Output;

mod common;
#[cfg(unix)]
use common::signal_after_first_frame;
use common::{eddies, stderr};

/// The lines of stderr that start with `prefix`.
fn lines_with(out: &Output, prefix: &str) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// A 2D reint scene of 32² cells over 1 m², two frames, with `extra` appended.
fn small_scene(dir: &Path, extra: &str) {
    let text =
        format!("[domain]\nsize = [1.0, 1.0]\nresolution = [32, 32]\n[time]\nframes = 2\n{extra}");
    fs::write(dir.join("s.toml"), text).unwrap();
}

#[test]
fn an_empty_scene_file_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("empty.toml"), "").unwrap();
    let out = eddies(&["run", "empty.toml", "--out", "o"], dir.path());
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    let errors = lines_with(&out, "error:");
    assert_eq!(errors.len(), 1, "{}", stderr(&out));
    assert!(errors[0].contains("nothing to simulate"), "{}", errors[0]);
    assert!(errors[0].contains("[[region]]"), "{}", errors[0]);
    assert!(!dir.path().join("o").exists(), "nothing is written");
}

#[test]
fn fluid_entirely_outside_the_domain_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    small_scene(
        dir.path(),
        "[[region]]\nshape = { box = { min = [2.0, 2.0], max = [3.0, 3.0] } }\n",
    );
    let out = eddies(&["run", "s.toml", "--out", "o"], dir.path());
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    assert!(lines_with(&out, "error:")[0].contains("nothing to simulate"));
    assert!(!dir.path().join("o").exists());
}

#[test]
fn a_region_outside_the_domain_beside_a_real_one_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    small_scene(
        dir.path(),
        "[[region]]\nshape = { box = { min = [2.0, 2.0], max = [3.0, 3.0] } }\n\
         [[region]]\nshape = { box = { min = [0.0, 0.0], max = [0.3, 0.3] } }\n",
    );
    let out = eddies(&["run", "s.toml", "--out", "o"], dir.path());
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let warnings = lines_with(&out, "warning:");
    assert_eq!(warnings.len(), 1, "{}", stderr(&out));
    assert!(
        warnings[0].starts_with("warning: region.0: its shape covers no fluid cell"),
        "{}",
        warnings[0]
    );
}

#[test]
fn an_initial_speed_no_step_can_follow_is_bad_input() {
    // 1e30 m/s used to be capped silently to the speed limit while scene.toml said 1e30.
    let dir = tempfile::tempdir().unwrap();
    small_scene(
        dir.path(),
        "[[region]]\nshape = { box = { min = [0.0, 0.0], max = [0.3, 0.3] } }\nvelocity = [1e30, 0.0]\n",
    );
    let out = eddies(&["run", "s.toml", "--out", "o"], dir.path());
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    assert!(lines_with(&out, "error:")[0].contains("the initial motion needs time steps"));
    assert!(!dir.path().join("o").exists());
}

#[test]
fn speeds_held_at_the_reint_limit_are_warned_about_and_recorded() {
    // 100 m/s with one step per frame (1/30 s) is 3200 cells per step; a box can move at most 2 − r.
    let dir = tempfile::tempdir().unwrap();
    small_scene(
        dir.path(),
        "[[region]]\nshape = { box = { min = [0.0, 0.0], max = [0.3, 0.3] } }\nvelocity = [100.0, 0.0]\n",
    );
    let out = eddies(
        &["run", "s.toml", "--out", "o", "--steps-per-frame", "1"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let warnings = lines_with(&out, "warning:");
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("warning: step 1: the speed limit")),
        "{}",
        stderr(&out)
    );
    assert!(
        warnings.iter().any(|w| w.contains("in 2 of 2 steps")),
        "the run ends with a summary:\n{}",
        stderr(&out)
    );
    let stats = fs::read_to_string(dir.path().join("o/stats.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(stats.lines().next().unwrap()).unwrap();
    let speed = &first["clamps"]["speed"];
    // The region's 9 × 9 cells all move at 100 m/s along x: every one of their x components is held.
    assert!(speed["count"].as_u64().unwrap() >= 81, "{first}");
    let limit = speed["limit"].as_f64().unwrap();
    // (2 − r) cells per step with r = 0.55 (the default), h = 1/32 m, dt = 1/30 s.
    let expected = (2.0 - 0.55) / 32.0 * 30.0;
    assert!(
        (limit - expected).abs() < 1e-5 * expected,
        "limit {limit} against {expected}"
    );
}

#[test]
fn a_file_in_place_of_the_output_folder_is_bad_input_before_any_header() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("taken"), "a file").unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break-reint",
            "--frames",
            "1",
            "--out",
            "taken/sub",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: cannot use the output folder taken/sub"),
        "the error comes first, with no header before it:\n{err}"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("taken")).unwrap(),
        "a file"
    );
}

/// A folder that exists but that not even root can write into.
#[cfg(target_os = "linux")]
#[test]
fn an_existing_folder_that_cannot_be_written_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break-reint",
            "--frames",
            "1",
            "--out",
            "/proc/self",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: cannot use the output folder /proc/self"),
        "{}",
        stderr(&out)
    );
}

/// Starts a long run, interrupts it with `signal` once its first frame is out, checks that every line of
/// its stats is whole, and returns what the process did.
#[cfg(unix)]
fn interrupted_run(dir: &Path, signal: &str) -> Output {
    let args = [
        "run",
        "dam-break-reint",
        "--set",
        "domain.resolution=[96,96]",
        "--frames",
        "100000",
        "--out",
        "o",
    ];
    let out = signal_after_first_frame(&args, dir, "o", signal);
    let stats = dir.join("o/stats.jsonl");
    let lines = fs::read_to_string(&stats).unwrap();
    assert!(lines.lines().count() > 0);
    for line in lines.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("every stats line is whole");
    }
    out
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_between_steps_exits_130_and_says_what_was_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = interrupted_run(dir.path(), "-INT");
    assert_eq!(out.status.code(), Some(130), "stderr:\n{}", stderr(&out));
    let errors = lines_with(&out, "error:");
    assert_eq!(errors.len(), 1, "{}", stderr(&out));
    assert!(
        errors[0].starts_with("error: interrupted by SIGINT (Ctrl-C) at step "),
        "{}",
        errors[0]
    );
    assert!(
        stderr(&out).contains("frame_00000.png to frame_"),
        "the kept frames are named:\n{}",
        stderr(&out)
    );
}

#[cfg(unix)]
#[test]
fn sigterm_stops_between_steps_and_exits_143() {
    let dir = tempfile::tempdir().unwrap();
    let out = interrupted_run(dir.path(), "-TERM");
    assert_eq!(out.status.code(), Some(143), "stderr:\n{}", stderr(&out));
    assert!(lines_with(&out, "error:")[0].starts_with("error: interrupted by SIGTERM"));
}
