//! The GPU backend through the command line: `--backend gpu` writes what the CPU backend writes, a machine
//! without an adapter gets one line saying so, and `eddies info` lists the adapters.
//!
//! Tests that need an adapter print a notice and pass without one, unless `EDDIES_REQUIRE_GPU=1` (CI).

use std::fs;
use std::process::Command;

mod common;
use common::{eddies, error_line, physics_of, stderr, stdout};

/// Whether a GPU adapter is there; without one (and without EDDIES_REQUIRE_GPU=1) a notice is printed.
fn have_gpu() -> bool {
    if !eddies_gpu::adapters().is_empty() {
        return true;
    }
    if std::env::var("EDDIES_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("EDDIES_REQUIRE_GPU=1 but no GPU adapter was found");
    }
    eprintln!("notice: GPU test skipped: no GPU adapter on this machine");
    false
}

/// The files of an output folder, sorted.
fn listing(d: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The keys of each line of a stats.jsonl.
fn keys(stats: &str) -> Vec<Vec<String>> {
    stats
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        })
        .collect()
}

#[test]
fn the_gpu_backend_writes_what_the_cpu_backend_writes() {
    if !have_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |backend: &str| {
        let out = eddies(
            &[
                "run",
                "droplet-splash",
                "--set",
                "domain.resolution=[48,48]",
                "--set",
                "output.npy=true",
                "--frames",
                "2",
                "--steps-per-frame",
                "8",
                "--backend",
                backend,
                "--out",
                backend,
            ],
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
        dir.path().join(backend)
    };
    let (cpu, gpu) = (run("cpu"), run("gpu"));
    assert_eq!(listing(&cpu), listing(&gpu), "the same files");
    let (a, b) = (
        fs::read_to_string(cpu.join("stats.jsonl")).unwrap(),
        fs::read_to_string(gpu.join("stats.jsonl")).unwrap(),
    );
    assert_eq!(a.lines().count(), 16, "one line per step");
    // The same keys on every line (stage_ms is an object on both; the GPU's is empty).
    assert_eq!(keys(&a), keys(&b));
    // Both conserve the mass exactly, so their totals agree at every step.
    let mass = |s: &str| -> Vec<f64> {
        s.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["mass"]
                    .as_f64()
                    .unwrap()
            })
            .collect()
    };
    assert_eq!(mass(&a), mass(&b));
    let scene = fs::read_to_string(gpu.join("scene.toml")).unwrap();
    assert!(scene.contains("backend = \"gpu\""), "{scene}");
}

#[test]
fn no_adapter_is_bad_input_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_eddies"))
        .args(["run", "droplet-splash", "--backend", "gpu", "--out", "out"])
        .env("EDDIES_GPU_ADAPTER", "no-such-adapter-anywhere")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    let line = error_line(&out);
    assert!(line.contains("no GPU adapter found"), "{line}");
    assert!(
        line.contains("no-such-adapter-anywhere"),
        "says what it looked for: {line}"
    );
    assert!(
        line.contains("--backend cpu"),
        "says how to run on the CPU: {line}"
    );
    assert!(!dir.path().join("out").exists(), "nothing is written");
}

#[test]
fn the_gpu_backend_refuses_what_it_does_not_run_at_the_key() {
    let dir = tempfile::tempdir().unwrap();
    // Incomplete Cholesky is a sequential triangular solve: the key to change is named.
    let out = eddies(
        &[
            "run",
            "dam-break",
            "--set",
            "flip.preconditioner=\"mic0\"",
            "--backend",
            "gpu",
            "--out",
            "out",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    let line = error_line(&out);
    assert!(
        line.contains("flip.preconditioner") && line.contains("multigrid"),
        "{line}"
    );
    // vortex-ring takes its velocity by treecode: on the GPU, the key to change is named.
    let out = eddies(
        &["run", "vortex-ring", "--backend", "gpu", "--out", "out"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    let line = error_line(&out);
    assert!(
        line.contains("vpm.velocity") && line.contains("direct-vortons"),
        "{line}"
    );
    assert!(!dir.path().join("out").exists(), "nothing is written");
}

/// Every built-in FLIP scene runs with its particle passes and pressure solves on the GPU and writes what the
/// CPU backend writes: the same files, the same `stats.jsonl` keys, and the same particle count, iterations
/// to within one per solve and a liquid volume to 1e-6 after a frame (both solves stop at a relative
/// residual of 1e-6; the library's tests bound the difference in velocities at 1e-5 of the top speed).
#[test]
fn every_flip_scene_runs_with_its_particle_passes_and_pressure_on_the_gpu() {
    if !have_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for scene in [
        "dam-break",
        "sloshing-2d",
        "dam-break-3d",
        "double-dam-break-3d",
        "drop-into-pool-3d",
        "obstacle-stream-3d",
        "paddle-3d",
    ] {
        let run = |backend: &str| {
            let out_dir = format!("{scene}-{backend}");
            let out = eddies(
                &[
                    "run",
                    scene,
                    "--frames",
                    "1",
                    "--backend",
                    backend,
                    "--out",
                    &out_dir,
                ],
                dir.path(),
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "{scene}: stderr:\n{}",
                stderr(&out)
            );
            dir.path().join(out_dir)
        };
        let (cpu, gpu) = (run("cpu"), run("gpu"));
        assert_eq!(listing(&cpu), listing(&gpu), "{scene}: the same files");
        let (a, b) = (
            fs::read_to_string(cpu.join("stats.jsonl")).unwrap(),
            fs::read_to_string(gpu.join("stats.jsonl")).unwrap(),
        );
        assert_eq!(keys(&a), keys(&b), "{scene}");
        for (la, lb) in a.lines().zip(b.lines()) {
            let (ra, rb): (serde_json::Value, serde_json::Value) = (
                serde_json::from_str(la).unwrap(),
                serde_json::from_str(lb).unwrap(),
            );
            assert_eq!(ra["particle_count"], rb["particle_count"], "{scene}");
            let it = |r: &serde_json::Value| r["pressure_iterations"].as_f64().unwrap();
            assert!((it(&ra) - it(&rb)).abs() <= 1.0, "{scene}: {la}\n{lb}");
            assert!(
                rb["pressure_residual"].as_f64().unwrap() <= 1e-6,
                "{scene}: {lb}"
            );
            let v = |r: &serde_json::Value| r["fluid_volume"].as_f64().unwrap();
            assert!(
                (v(&ra) - v(&rb)).abs() <= 1e-6 * v(&ra),
                "{scene}: volume {} on the CPU, {} on the GPU",
                v(&ra),
                v(&rb)
            );
        }
    }
}

/// The last `stats.jsonl` record of `vortex-ring` run three frames with `vpm.velocity` set to `velocity`
/// and the `--set` assignments `sets`, on `backend`, in `dir` (in a folder named after `name`).
fn ring_after_three_frames(
    dir: &std::path::Path,
    (name, velocity, sets): (&str, &str, &[&str]),
    backend: &str,
) -> serde_json::Value {
    let out_dir = format!("{name}-{backend}");
    let velocity = format!("vpm.velocity=\"{velocity}\"");
    let mut args = vec!["run", "vortex-ring", "--set", &velocity];
    for set in sets {
        args.extend(["--set", set]);
    }
    args.extend(["--frames", "3", "--backend", backend, "--out", &out_dir]);
    let out = eddies(&args, dir);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let stats = fs::read_to_string(dir.join(out_dir).join("stats.jsonl")).unwrap();
    serde_json::from_str(stats.lines().last().unwrap()).unwrap()
}

/// Vortex particles with their direct sums on the GPU travel as on the CPU: the ring of `vortex-ring` over
/// three frames (nine steps) has the CPU's centroid, impulse and energy. Both sum the same f32 terms in
/// other orders (the GPU in index order, the CPU in sixteen lanes), so velocities differ by f32 rounding,
/// about 1e-7 of their size: the centroid's travel is bounded at 1e-6 (measured: 6e-8), the integrals of
/// the velocity field at 1e-5 relative, the bound for velocities (measured: 1.1e-6 for the energy).
#[test]
fn vortex_particles_with_gpu_direct_sums_travel_as_on_the_cpu() {
    if !have_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |backend: &str| {
        ring_after_three_frames(dir.path(), ("direct", "direct-vortons", &[]), backend)
    };
    let (cpu, gpu) = (run("cpu"), run("gpu"));
    assert_eq!(cpu["step"], gpu["step"]);
    let num = |v: &serde_json::Value| v.as_f64().unwrap();
    let close = |key: &str, a: f64, b: f64, bound: f64| {
        assert!(
            (a - b).abs() <= bound,
            "{key}: CPU {a}, GPU {b} (bound {bound:e})"
        );
    };
    // The centroid moves 0.02 m in the run; compare its x (the axis of travel) on that scale.
    let (cx, gx) = (num(&cpu["centroid"][0]), num(&gpu["centroid"][0]));
    close("centroid x", cx, gx, 1e-6 * 0.02);
    let impulse = num(&cpu["impulse"][0]);
    close(
        "impulse x",
        impulse,
        num(&gpu["impulse"][0]),
        1e-5 * impulse,
    );
    for key in ["kinetic_energy", "enstrophy", "max_speed"] {
        close(key, num(&cpu[key]), num(&gpu[key]), 1e-5 * num(&cpu[key]));
    }
}

/// Vortex particles with the Poisson technique on the GPU (splat, MGPCG per component, curl and sampling)
/// travel as with the CPU's: `vortex-ring` with `velocity = "poisson"` over three frames.
/// - With the scene's cloud-in-cell splat and tolerance (1e-3 of the boundary values' residual) both solves
///   stop there from different iterations, so the velocities differ at that level: the centroid's travel
///   (0.02 m) is bounded at 1e-3 of it (measured: 1.1e-4) and the kinetic energy at 1e-2 relative
///   (measured: 1.6e-3).
/// - With the Gaussian splat, the boundary values by direct sums (on the GPU there) and a tolerance of 1e-6
///   both solves converge (at 1e-3 the CPU's box multigrid stops 8e-3 off the converged energy, MGPCG
///   1.3e-4), so what is left is f32 rounding in the splats and the sums, and the solves' 1e-6: the
///   centroid's travel within 1e-5 (measured: 3.6e-7), the energy within 1e-4 relative (measured: 3.6e-6).
#[test]
fn vortex_particles_with_the_poisson_solve_on_the_gpu_travel_as_on_the_cpu() {
    if !have_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], f64, f64); 2] = [
        ("cic", &[], 1e-3, 1e-2),
        (
            "gaussian",
            &[
                "vpm.splat=\"gaussian\"",
                "vpm.boundary=\"direct\"",
                "vpm.poisson_tolerance=1e-6",
            ],
            1e-5,
            1e-4,
        ),
    ];
    for (name, sets, travel, energy) in cases {
        let run =
            |backend: &str| ring_after_three_frames(dir.path(), (name, "poisson", sets), backend);
        let (cpu, gpu) = (run("cpu"), run("gpu"));
        assert_eq!(cpu["step"], gpu["step"]);
        let num = |v: &serde_json::Value| v.as_f64().unwrap();
        let (cx, gx) = (num(&cpu["centroid"][0]), num(&gpu["centroid"][0]));
        let (ce, ge) = (num(&cpu["kinetic_energy"]), num(&gpu["kinetic_energy"]));
        println!(
            "{name}: centroid x off by {:.2e} of its travel, kinetic energy by {:.2e}",
            (cx - gx).abs() / 0.02,
            (ce - ge).abs() / ce
        );
        assert!(
            (cx - gx).abs() <= travel * 0.02,
            "{name}: centroid x: CPU {cx}, GPU {gx}"
        );
        assert!(
            (ce - ge).abs() <= energy * ce,
            "{name}: kinetic energy: CPU {ce}, GPU {ge}"
        );
    }
}

/// A vortex particle run on the GPU repeats bit for bit: `dye-drop` with the Gaussian splat (the splat,
/// the vector solve, the curl and sampling and the baroclinic stage on the device) run twice for three
/// frames writes the same frames and the same `stats.jsonl`, its timings aside. Every kernel sums in a
/// fixed order without float atomics, so any difference is a bug.
#[test]
fn vortex_particles_on_the_gpu_repeat_bit_for_bit() {
    if !have_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &str| {
        let o = eddies(
            &[
                "run",
                "dye-drop",
                "--set",
                "vpm.splat=\"gaussian\"",
                "--frames",
                "3",
                "--backend",
                "gpu",
                "--out",
                out,
            ],
            dir.path(),
        );
        assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));
        dir.path().join(out)
    };
    let (a, b) = (run("first"), run("second"));
    let records =
        |d: &std::path::Path| physics_of(&fs::read_to_string(d.join("stats.jsonl")).unwrap());
    let first = records(&a);
    assert_eq!(first.len(), 3, "a record per step");
    assert_eq!(first, records(&b));
    assert_eq!(listing(&a), listing(&b));
    for name in listing(&a).iter().filter(|n| n.ends_with(".png")) {
        assert_eq!(
            fs::read(a.join(name)).unwrap(),
            fs::read(b.join(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn info_lists_the_adapters() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(&["info"], dir.path());
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("eddies "), "{text}");
    assert!(text.contains("\ncpu: "), "{text}");
    if have_gpu() {
        assert!(
            text.contains("gpu 0: ") && text.contains("(used by --backend gpu)"),
            "{text}"
        );
    } else {
        assert!(text.contains("gpu: no adapter found"), "{text}");
    }
}

/// Runs `scene` on the GPU with `sets` and `steps_per_frame`, writing NPY arrays: three frames into `whole`,
/// and two into `parts` with a checkpoint after the second, then resumed there to the third.
fn whole_and_resumed(dir: &std::path::Path, scene: &str, sets: &[&str], steps_per_frame: &str) {
    let run = |out: &str, frames: &str, extra: &[&str]| {
        let mut args = vec!["run", scene, "--backend", "gpu", "--set", "output.npy=true"];
        for set in sets {
            args.extend(["--set", set]);
        }
        args.extend([
            "--steps-per-frame",
            steps_per_frame,
            "--frames",
            frames,
            "--out",
            out,
        ]);
        args.extend_from_slice(extra);
        let o = eddies(&args, dir);
        assert_eq!(o.status.code(), Some(0), "{scene}: stderr:\n{}", stderr(&o));
    };
    run("whole", "3", &[]);
    run("parts", "2", &["--set", "output.checkpoint_every=2"]);
    let o = eddies(&["run", "--resume", "parts", "--frames", "3"], dir);
    assert_eq!(o.status.code(), Some(0), "{scene}: stderr:\n{}", stderr(&o));
}

/// A GPU run resumed from its checkpoint (with fixed steps per frame: the adaptive step of the GPU follows a
/// speed read back without waiting, so it is not repeatable) writes what the run that never stopped writes.
#[test]
fn a_gpu_run_resumes_bit_for_bit() {
    if !have_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    whole_and_resumed(
        dir.path(),
        "droplet-splash",
        &["domain.resolution=[48,48]"],
        "6",
    );
    for name in ["field_mass_00002.npy", "particles_00002.npy"] {
        assert_eq!(
            fs::read(dir.path().join("whole").join(name)).unwrap(),
            fs::read(dir.path().join("parts").join(name)).unwrap(),
            "{name}"
        );
    }
}

/// A FLIP run on the GPU leaves its particles on the device between steps (the device tallies each step's
/// diagnostics) and reads them back for each frame's outputs and checkpoints: resumed from its checkpoint, it
/// writes the particles and the statistics (wall times apart) of the run that never stopped, bit for bit.
/// Three steps a frame.
#[test]
fn a_flip_run_on_the_gpu_resumes_bit_for_bit() {
    if !have_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    whole_and_resumed(
        dir.path(),
        "dam-break-3d",
        &["domain.resolution=[24,12,12]"],
        "3",
    );
    for frame in 0..3 {
        let name = format!("particles_{frame:05}.npy");
        assert_eq!(
            fs::read(dir.path().join("whole").join(&name)).unwrap(),
            fs::read(dir.path().join("parts").join(&name)).unwrap(),
            "{name}"
        );
    }
    let stats = |run: &str| -> Vec<serde_json::Value> {
        fs::read_to_string(dir.path().join(run).join("stats.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
                r.as_object_mut().unwrap().retain(|k, _| !k.contains("ms"));
                r
            })
            .collect()
    };
    let (whole, parts) = (stats("whole"), stats("parts"));
    assert_eq!(whole.len(), 9);
    assert_eq!(whole, parts);
}
