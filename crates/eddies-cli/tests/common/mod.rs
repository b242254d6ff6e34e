//! Helpers shared by the CLI's test binaries: running the built `eddies` binary and reading what it said.
// Each test binary uses its own part of these.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `eddies` with `args` in `cwd` and waits for it.
pub fn eddies(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_eddies"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("failed to start the eddies binary")
}

/// The process's stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The process's stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The single `error:` line of a failed run.
pub fn error_line(out: &Output) -> String {
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one error line, got:\n{err}"
    );
    lines[0].to_string()
}

/// `stats.jsonl` without the wall-clock times, which differ from run to run.
pub fn physics_of(stats: &str) -> Vec<serde_json::Value> {
    stats
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("wall_ms");
            o.remove("stage_ms");
            v
        })
        .collect()
}

/// Starts `eddies` with `args` in `cwd`, waits until the run has written `out/frame_00000.png` (it must not
/// end before), sends `signal` (`-INT`, `-TERM`) and returns what the process did.
#[cfg(unix)]
pub fn signal_after_first_frame(args: &[&str], cwd: &Path, out: &str, signal: &str) -> Output {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_eddies"))
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("failed to start the eddies binary");
    let started = Instant::now();
    while !cwd.join(out).join("frame_00000.png").exists() {
        if let Some(status) = child.try_wait().expect("child status") {
            let done = child.wait_with_output().unwrap();
            panic!(
                "the run ended before its first frame ({status}):\n{}",
                stderr(&done)
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the run did not write a frame in two minutes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    child.wait_with_output().unwrap()
}
