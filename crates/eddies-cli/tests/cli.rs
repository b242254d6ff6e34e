//! The command-line contracts the README documents (outputs, exit codes, messages),
//! checked by running the built `eddies` binary the way a user would.

use std::fs;
use std::path::{Path, PathBuf};

use eddies_cli::load::{load, SceneSource};

mod common;
use common::{eddies, error_line, physics_of, stderr, stdout};
use eddies_cli::scenes::BUILTIN;

/// Writes `text` as `name` in a fresh folder and runs `eddies run name --out out`; asserts the run is
/// refused as bad input with nothing written, and returns its error line.
fn refused(name: &str, text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(name), text).unwrap();
    let out = eddies(&["run", name, "--out", "out"], dir.path());
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    assert!(
        !dir.path().join("out").exists(),
        "the output folder must not be created for a refused scene"
    );
    error_line(&out)
}

#[test]
fn misspelled_key_names_file_line_column_and_key() {
    let line = refused(
        "scene.toml",
        "# a scene\nmethod = \"reint\"\n[domain]\nresolutoin = [64, 64]\n",
    );
    assert!(
        line.starts_with("error: scene.toml:4:1: domain.resolutoin: unknown key"),
        "{line}"
    );
    assert!(
        line.contains("allowed: size, resolution, boundary, gravity"),
        "{line}"
    );
}

#[test]
fn string_where_a_number_belongs() {
    let line = refused("scene.toml", "[time]\nframes = 10\nfps = \"thirty\"\n");
    assert!(
        line.starts_with("error: scene.toml:3:1: time.fps: expected a number"),
        "{line}"
    );
    assert!(line.contains("allowed: a number"), "{line}");
}

#[test]
fn negative_resolution() {
    let line = refused(
        "scene.toml",
        "[domain]\nsize = [1.0, 1.0]\nresolution = [-64, 64]\n",
    );
    assert!(
        line.starts_with("error: scene.toml:3:15: domain.resolution[0]: -64 cells is out of range"),
        "{line}"
    );
    assert!(line.contains("allowed: integers from 4"), "{line}");
}

#[test]
fn out_of_range_parameter_and_unknown_choice() {
    let line = refused("s.toml", "[reint]\ndiffusion_radius = 1.5\n");
    assert!(
        line.starts_with(
            "error: s.toml:2:1: reint.diffusion_radius: 1.5 is out of range; allowed: (0, 1]"
        ),
        "{line}"
    );
    let line = refused("s.toml", "[reint]\neos = \"water\"\n");
    assert!(
        line.starts_with("error: s.toml:2:1: reint.eos: unknown value \"water\""),
        "{line}"
    );
    assert!(line.contains("\"ideal-gas\""), "{line}");
}

#[test]
fn vpm_scene_errors_name_their_key() {
    let line = refused("s.toml", "method = \"vpm\"\ndim = 2\n");
    assert!(line.contains("dim: method \"vpm\" is 3D only"), "{line}");
    // The decimation takes a name or a boolean, and says so.
    let line = refused(
        "s.toml",
        "method = \"vpm\"\ndim = 3\n[vpm]\ndecimate = \"lattise\"\n",
    );
    assert!(
        line.contains("vpm.decimate: unknown value \"lattise\"") && line.contains("\"rows\""),
        "{line}"
    );
    let line = refused("s.toml", "method = \"vpm\"\ndim = 3\n[vpm]\ndecimate = 2\n");
    assert!(line.contains("true (lattice) or false (off)"), "{line}");
    let line = refused(
        "s.toml",
        "method = \"vpm\"\ndim = 3\n[[vpm.ring]]\nradius = 0.1\ncore_radius = 0.5\n",
    );
    assert!(
        line.contains("s.toml:5:1: vpm.ring[0].core_radius: 0.5 is out of range"),
        "{line}"
    );
    let line = refused(
        "s.toml",
        "method = \"vpm\"\ndim = 3\n[vpm]\nvelocity = \"poisson\"\nboundary = \"wall\"\n",
    );
    assert!(
        line.contains("s.toml:5:1: vpm.boundary: unknown value \"wall\""),
        "{line}"
    );
    assert!(line.contains("\"zero\""), "{line}");
    let line = refused(
        "s.toml",
        "method = \"vpm\"\ndim = 3\n[vpm]\ntree_method = \"fast\"\n",
    );
    assert!(
        line.contains("s.toml:4:1: vpm.tree_method: unknown value \"fast\"")
            && line.contains("\"treecode\", \"fmm\""),
        "{line}"
    );
    let line = refused(
        "s.toml",
        "method = \"vpm\"\ndim = 3\n[[vpm.heat_source]]\nradius = -1\n",
    );
    assert!(line.contains("vpm.heat_source[0].radius"), "{line}");
    let line = refused(
        "s.toml",
        "method = \"vpm\"\ndim = 3\n[output]\nfield = \"temperature\"\npanels = [\"vpm.boundary=zero\"]\n",
    );
    assert!(line.contains("output.panels"), "{line}");
}

/// A buoyant ball under the Poisson technique with a heat source, three boundary options side by side:
/// the frame is three panels wide, every grid field renders, and the Poisson keys are in the stats.
#[test]
fn vpm_poisson_buoyancy_and_panels_run() {
    let dir = tempfile::tempdir().unwrap();
    let scene = "method = \"vpm\"\ndim = 3\n[domain]\nresolution = [12, 12, 12]\n\
                 [vpm]\nvelocity = \"poisson\"\nambient_density = 1000.0\nheat_diffusivity = 1e-5\n\
                 [[vpm.ball]]\ndensity_deviation = 20.0\ntemperature_deviation = 5.0\nvortons = 800\n\
                 tracers = 200\n[[vpm.heat_source]]\ncenter = [0.5, 0.45, 0.5]\nsmoke = 300.0\n\
                 [output]\nfield = \"tracers\"\n\
                 panels = [\"vpm.boundary=tree\", \"vpm.boundary=direct\", \"vpm.boundary=zero; vpm.decimate=false\"]\n";
    fs::write(dir.path().join("b.toml"), scene).unwrap();
    let run = |extra: &[&str], out: &str| {
        let mut args = vec![
            "run",
            "b.toml",
            "--frames",
            "2",
            "--steps-per-frame",
            "2",
            "--out",
            out,
            "--quiet",
        ];
        args.extend_from_slice(extra);
        eddies(&args, dir.path())
    };
    let out = run(&[], "p");
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let img = image::open(dir.path().join("p").join("frame_00001.png")).unwrap();
    assert_eq!(
        img.width(),
        3 * img.height(),
        "three square panels side by side"
    );
    let stats = fs::read_to_string(dir.path().join("p").join("stats.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = stats
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The ball starts at rest (no vorticity, nothing to solve) and buoyancy gives it some: a solve must
    // then cycle, though a warm-started one may already meet the tolerance from the last step's solution.
    assert!(records
        .iter()
        .any(|r| r["poisson_cycles"].as_u64().unwrap() > 0));
    let last = records.last().unwrap();
    for stage in ["vector_potential", "poisson", "baroclinic", "heat"] {
        assert!(!last["stage_ms"][stage].is_null(), "no stage {stage}");
    }
    for field in [
        "density_deviation",
        "temperature",
        "speed",
        "velocity_y",
        "vector_potential",
        "vorticity_magnitude",
    ] {
        let set = format!("output.field={field}");
        let out = run(&["--set", "output.panels=[]", "--set", &set], field);
        assert_eq!(out.status.code(), Some(0), "{field}: {}", stderr(&out));
        assert!(dir.path().join(field).join("frame_00001.png").is_file());
    }
    // A panel whose override is wrong is refused before anything is written.
    let out = run(&["--set", "output.panels=[\"vpm.boundary=wall\"]"], "bad");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("vpm.boundary"), "{}", stderr(&out));
    assert!(!dir.path().join("bad").exists());
}

#[test]
fn vpm_run_writes_vorton_stats_and_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let scene = "method = \"vpm\"\ndim = 3\n[domain]\nresolution = [16, 16, 16]\n\
                 [[vpm.ring]]\nvortons = 300\ntracers = 100\n[output]\nnpy = true\n";
    fs::write(dir.path().join("ring.toml"), scene).unwrap();
    let out = eddies(
        &[
            "run",
            "ring.toml",
            "--frames",
            "2",
            "--steps-per-frame",
            "2",
            "--out",
            "o",
            "--quiet",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let o = dir.path().join("o");
    let stats = fs::read_to_string(o.join("stats.jsonl")).unwrap();
    assert_eq!(stats.lines().count(), 4);
    let last: serde_json::Value = serde_json::from_str(stats.lines().last().unwrap()).unwrap();
    for key in [
        "vorton_count",
        "circulation",
        "impulse",
        "centroid",
        "density_centroid",
        "enstrophy",
        "mean_jerk",
        "kinetic_energy",
        "max_speed",
    ] {
        assert!(!last[key].is_null(), "stats.jsonl lacks {key}");
    }
    assert_eq!(last["vorton_count"].as_u64(), Some(300));
    assert_eq!(last["impulse"].as_array().unwrap().len(), 3);
    assert!(o.join("frame_00001.png").is_file());
    let (shape, _) =
        eddies_cli::npy::decode_f32(&fs::read(o.join("particles_00001.npy")).unwrap()).unwrap();
    assert_eq!(shape, [300, 3]);
    let (shape, data) = eddies_cli::npy::decode_f32(
        &fs::read(o.join("field_vorticity_magnitude_00001.npy")).unwrap(),
    )
    .unwrap();
    assert_eq!(shape.len(), 3);
    assert!(data.iter().sum::<f32>() > 0.0);
}

#[test]
fn missing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(&["run", "no-such-scene.toml", "--out", "out"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let line = error_line(&out);
    assert!(line.contains("no-such-scene.toml"), "{line}");
    assert!(!dir.path().join("out").exists());
}

#[test]
fn scene_too_large_for_memory_is_refused_with_the_estimate() {
    if eddies_cli::setup::available_memory().is_none() {
        eprintln!("skipped: this system does not report available memory");
        return;
    }
    let line = refused(
        "huge.toml",
        "dim = 3\n[domain]\nsize = [1.0, 1.0, 1.0]\nresolution = [100000, 100000, 100000]\n",
    );
    assert!(
        line.starts_with("error: huge.toml:4:1: domain.resolution: the scene needs about"),
        "{line}"
    );
    assert!(line.contains("GiB"), "{line}");
}

#[test]
fn bad_flag_values_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break-reint",
            "--out",
            "out",
            "--set",
            "time.fsp=10",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let line = error_line(&out);
    assert!(
        line.starts_with("error: --set time.fsp=10: time.fsp: unknown key"),
        "{line}"
    );
    let out = eddies(
        &["run", "dam-break-reint", "--out", "out", "--frames", "0"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_line(&out).starts_with("error: --frames 0: time.frames"),
        "{}",
        stderr(&out)
    );
    let out = eddies(&["run", "--no-such-flag"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("out").exists());
}

#[test]
fn divergence_exits_3_naming_stage_and_step() {
    // An absurd stiffness with one step per frame overflows the pressure forces at once.
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break-reint",
            "--set",
            "domain.resolution=[32,32]",
            "--set",
            "region.0.density=10",
            "--set",
            "reint.sound_speed=1e19",
            "--steps-per-frame",
            "1",
            "--frames",
            "2",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(3), "stderr:\n{}", stderr(&out));
    let line = error_line(&out);
    assert!(
        line.contains("diverged in stage `") && line.contains("at step "),
        "{line}"
    );
    assert!(
        dir.path().join("o/stats.jsonl").is_file(),
        "what was written is kept"
    );
}

#[test]
fn absurd_initial_speeds_are_bad_input_not_a_stall() {
    // A ring of absurd circulation moves so fast that the CFL step is ~1e-15 s: the run must be refused at
    // once as bad input (the same bound stops a run whose flow blows up later, with exit 3), not take 10¹³
    // steps per frame.
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "vortex-ring",
            "--set",
            "vpm.ring.0.circulation=1e12",
            "--frames",
            "1",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    let line = error_line(&out);
    assert!(
        line.contains("the initial motion needs time steps of") && line.contains("1e7 steps"),
        "{line}"
    );
    assert!(!dir.path().join("o").exists(), "nothing is written");
}

fn frames_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("frame_")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn small_scene_runs_and_writes_the_documented_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break-reint",
            "--set",
            "domain.resolution=[64,64]",
            "--set",
            "reint.viscosity=0.001",
            "--frames",
            "3",
            "--out",
            "out",
            "--threads",
            "2",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let out_dir = dir.path().join("out");

    // Frames: frame_00000.png .. frame_00002.png, real PNGs.
    let frames = frames_in(&out_dir);
    let names: Vec<_> = frames
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        ["frame_00000.png", "frame_00001.png", "frame_00002.png"]
    );
    for f in &frames {
        assert_eq!(&fs::read(f).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    }
    assert!(
        stdout(&out).contains("out"),
        "the summary says where the frames went"
    );

    // scene.toml: the resolved scene, which loads back as a scene with the overrides applied.
    let text = fs::read_to_string(out_dir.join("scene.toml")).unwrap();
    let src = SceneSource {
        label: "scene.toml".into(),
        name: "scene".into(),
        text,
    };
    let scene = load(&src, &[])
        .unwrap_or_else(|e| panic!("scene.toml does not load: {e}"))
        .scene;
    assert_eq!(scene.domain.resolution, Some(vec![64, 64]));
    assert_eq!(scene.time.frames, 3);
    assert_eq!(scene.reint.viscosity, 0.001);
    assert_eq!(
        scene.domain.size,
        Some(vec![1.0, 1.0]),
        "defaults and file values are filled in"
    );

    // stats.jsonl: one object per step with the documented keys; time increases to frames/fps.
    let stats = fs::read_to_string(out_dir.join("stats.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = stats
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());
    for (i, v) in lines.iter().enumerate() {
        for key in [
            "step",
            "time",
            "dt",
            "wall_ms",
            "stage_ms",
            "mass",
            "kinetic_energy",
            "max_speed",
        ] {
            assert!(v.get(key).is_some(), "line {i} has no `{key}`: {v}");
        }
        assert!(v["stage_ms"].is_object());
        assert_eq!(v["step"].as_u64(), Some(i as u64 + 1));
    }
    let end = lines.last().unwrap()["time"].as_f64().unwrap();
    assert!(
        (end - 3.0 / 30.0).abs() < 1e-9,
        "the run ends at frames/fps: {end}"
    );
    // No temporary files are left behind.
    for e in fs::read_dir(&out_dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(!name.starts_with('.'), "left-over temporary {name}");
    }
}

#[test]
fn resolved_scene_toml_repeats_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let first = eddies(
        &[
            "run",
            "paint-stream",
            "--set",
            "domain.resolution=[48,48]",
            "--set",
            "emitter.1.start=0.0",
            "--frames",
            "2",
            "--out",
            "a",
            "-q",
        ],
        dir.path(),
    );
    assert_eq!(first.status.code(), Some(0), "stderr:\n{}", stderr(&first));
    let again = eddies(&["run", "a/scene.toml", "--out", "b", "-q"], dir.path());
    assert_eq!(again.status.code(), Some(0), "stderr:\n{}", stderr(&again));
    let a = fs::read_to_string(dir.path().join("a/stats.jsonl")).unwrap();
    let b = fs::read_to_string(dir.path().join("b/stats.jsonl")).unwrap();
    assert_eq!(physics_of(&a), physics_of(&b));
    assert_eq!(
        fs::read(dir.path().join("a/frame_00001.png")).unwrap(),
        fs::read(dir.path().join("b/frame_00001.png")).unwrap()
    );
}

#[test]
fn fixed_steps_per_frame_and_npy_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "droplet-splash",
            "--set",
            "domain.resolution=[48,48]",
            "--set",
            "output.npy=true",
            "--set",
            "output.field=speed",
            "--frames",
            "2",
            "--steps-per-frame",
            "3",
            "--out",
            "o",
            "--quiet",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).is_empty() && stdout(&out).is_empty(),
        "--quiet prints nothing"
    );
    let o = dir.path().join("o");
    let stats = fs::read_to_string(o.join("stats.jsonl")).unwrap();
    assert_eq!(stats.lines().count(), 6, "2 frames × 3 steps");
    let first: serde_json::Value = serde_json::from_str(stats.lines().next().unwrap()).unwrap();
    assert!((first["dt"].as_f64().unwrap() - 1.0 / 90.0).abs() < 1e-12);

    for frame in ["00000", "00001"] {
        let (shape, data) = eddies_cli::npy::decode_f32(
            &fs::read(o.join(format!("particles_{frame}.npy"))).unwrap(),
        )
        .unwrap();
        assert_eq!(shape.len(), 2);
        assert_eq!(shape[1], 2);
        assert!(shape[0] > 0);
        assert!(
            data.iter().all(|x| (0.0..=1.0).contains(x)),
            "positions lie in the domain"
        );
        let (shape, data) = eddies_cli::npy::decode_f32(
            &fs::read(o.join(format!("field_mass_{frame}.npy"))).unwrap(),
        )
        .unwrap();
        assert_eq!(shape, [48, 48]);
        assert!(data.iter().sum::<f32>() > 0.0);
    }
}

#[test]
fn default_output_folder_is_out_slash_scene_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "paint-stream",
            "--set",
            "domain.resolution=[32,32]",
            "--frames",
            "1",
            "--quiet",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert!(dir
        .path()
        .join("out/paint-stream/frame_00000.png")
        .is_file());
}

#[test]
fn a_3d_scene_runs_small() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break-reint-3d",
            "--set",
            "domain.resolution=[16,16,16]",
            "--frames",
            "1",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert!(dir.path().join("o/frame_00000.png").is_file());
}

#[test]
fn scenes_lists_every_builtin() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(&["scenes"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for s in BUILTIN {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(s.name));
        let line =
            line.unwrap_or_else(|| panic!("`eddies scenes` does not list {}:\n{text}", s.name));
        assert!(line.contains(s.description()), "{line}");
    }
}

#[test]
fn every_builtin_scene_parses_validates_and_fits_an_estimate() {
    for s in BUILTIN {
        let src = SceneSource {
            label: s.label(),
            name: s.name.into(),
            text: s.source.into(),
        };
        let loaded = load(&src, &[]).unwrap_or_else(|e| panic!("built-in scene {}: {e}", s.name));
        let bytes = eddies_cli::setup::check_memory(&loaded, None).unwrap();
        assert!(bytes > 0.0, "{}", s.name);
    }
}

#[test]
fn validate_and_bench_refuse_unknown_filters() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(&["validate", "no-such-case"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    error_line(&out);
    let out = eddies(&["bench", "no-such-bench"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    error_line(&out);
}

/// `--soak` is parsed and selects the soak runs (an unknown filter among them is refused before anything
/// runs, so the test takes no time); `--help` describes it.
#[test]
fn validate_soak_flag_selects_the_soak_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(&["validate", "--soak", "no-such-soak"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(error_line(&out).contains("soak run"), "{}", stderr(&out));
    assert!(stderr(&out).contains("soak/reint"), "{}", stderr(&out));
    let out = eddies(&["validate", "--help"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("--soak"), "{}", stdout(&out));
}

#[test]
fn bench_json_rows_have_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "bench",
            "reint-2d-reintegrate",
            "--quick",
            "--json",
            "--threads",
            "2",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().count() >= 1);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in ["bench", "size", "metric", "value", "unit", "threads"] {
            assert!(v.get(key).is_some(), "{line}");
        }
        assert_eq!(v["threads"], 2);
        assert!(v["value"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn flip_scene_writes_its_stats_keys_and_npy_fields() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break",
            "--set",
            "domain.resolution=[32,16]",
            "--set",
            "output.npy=true",
            "--set",
            "output.field=pressure",
            "--set",
            "flip.preconditioner=mic0",
            "--frames",
            "2",
            "--out",
            "o",
            "--quiet",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    let o = dir.path().join("o");
    let stats = fs::read_to_string(o.join("stats.jsonl")).unwrap();
    for line in stats.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in [
            "particle_count",
            "fluid_volume",
            "pressure_iterations",
            "pressure_residual",
            "kinetic_energy",
            "max_speed",
        ] {
            assert!(v.get(key).is_some(), "{key} missing: {line}");
        }
        assert!(v["pressure_residual"].as_f64().unwrap() <= 1e-6);
        assert!(v["stage_ms"].get("particles_to_grid").is_some());
    }
    for frame in ["00000", "00001"] {
        let (shape, _) = eddies_cli::npy::decode_f32(
            &fs::read(o.join(format!("particles_{frame}.npy"))).unwrap(),
        )
        .unwrap();
        assert_eq!(shape[1], 2);
        for field in ["pressure", "divergence"] {
            let (shape, _) = eddies_cli::npy::decode_f32(
                &fs::read(o.join(format!("field_{field}_{frame}.npy"))).unwrap(),
            )
            .unwrap();
            assert_eq!(shape, [16, 32]);
        }
        assert!(o.join(format!("frame_{frame}.png")).is_file());
    }
}

#[test]
fn flip_3d_moving_obstacle_scene_runs_small() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "paddle-3d",
            "--set",
            "domain.resolution=[16,8,16]",
            "--set",
            "output.field=cell_type",
            "--frames",
            "1",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert!(dir.path().join("o/frame_00000.png").is_file());
}

#[test]
fn flip_keys_are_checked_with_their_location() {
    let line = refused(
        "s.toml",
        "method = \"flip\"\n[flip]\ntransfer = \"apic\"\npic_ratio = 1.5\n",
    );
    assert!(
        line.contains("s.toml:4:") && line.contains("flip.pic_ratio"),
        "{line}"
    );
    let line = refused(
        "s.toml",
        "method = \"flip\"\n[flip]\npreconditioner = \"ilu\"\n",
    );
    assert!(
        line.contains("flip.preconditioner") && line.contains("\"mic0\""),
        "{line}"
    );
}

/// Built without the `viewer` feature (the default), `eddies view` exits 2 and says how to get the window,
/// before it looks for a display or the scene.
#[cfg(not(feature = "viewer"))]
#[test]
fn view_without_the_viewer_feature_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(&["view", "droplet-splash"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        error_line(&out).contains("cargo build --release --features viewer"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing is written"
    );
}
