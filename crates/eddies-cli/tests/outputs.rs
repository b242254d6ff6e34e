//! The files for other tools, read back with independent readers and checked against the simulation's own
//! arrays (the NPY output), and checkpoints: a resumed run is the uninterrupted run, bit for bit, for every
//! method; a damaged checkpoint is refused; one run per output folder; animations of a run's frames.

use std::fs;
use std::path::Path;

use eddies::mesh::TriMesh;
use eddies_cli::output::npy;

mod common;
#[cfg(unix)]
use common::signal_after_first_frame;
use common::{eddies, error_line, physics_of, stderr};

fn npy_of(path: &Path) -> (Vec<usize>, Vec<f32>) {
    npy::decode_f32(&fs::read(path).unwrap()).unwrap()
}

/// A PLY mesh as a [`TriMesh`].
fn ply_mesh(bytes: &[u8]) -> TriMesh {
    let ply = eddies_io::ply::read(bytes).unwrap();
    let column = |element: &str, name: &str| -> Vec<f64> {
        let e = ply.elements.iter().find(|e| e.name == element).unwrap();
        match &e.properties.iter().find(|p| p.name == name).unwrap().data {
            eddies_io::ply::PropertyData::Scalar { values, .. } => values.clone(),
            other => panic!("{name} is not a scalar: {other:?}"),
        }
    };
    let (x, y, z) = (
        column("vertex", "x"),
        column("vertex", "y"),
        column("vertex", "z"),
    );
    let faces = ply.elements.iter().find(|e| e.name == "face").unwrap();
    let triangles = match &faces.properties[0].data {
        eddies_io::ply::PropertyData::List { values, .. } => values
            .iter()
            .map(|f| {
                assert_eq!(f.len(), 3, "triangles only");
                [f[0] as u32, f[1] as u32, f[2] as u32]
            })
            .collect(),
        other => panic!("faces are lists: {other:?}"),
    };
    TriMesh {
        positions: (0..x.len())
            .map(|i| [x[i] as f32, y[i] as f32, z[i] as f32])
            .collect(),
        normals: Vec::new(),
        triangles,
    }
}

/// An OBJ mesh (`v`, `vn`, `f a//a b//b c//c`) as a [`TriMesh`], strictly.
fn obj_mesh(text: &str) -> TriMesh {
    let mut m = TriMesh::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let numbers = |w: std::str::SplitWhitespace| -> [f32; 3] {
            let v: Vec<f32> = w.map(|x| x.parse().unwrap()).collect();
            [v[0], v[1], v[2]]
        };
        match words.next() {
            Some("v") => m.positions.push(numbers(words)),
            Some("vn") => m.normals.push(numbers(words)),
            Some("f") => {
                let idx: Vec<u32> = words
                    .map(|w| {
                        let (v, n) = w.split_once("//").unwrap();
                        assert_eq!(v, n, "each vertex has its own normal");
                        v.parse::<u32>().unwrap() - 1
                    })
                    .collect();
                m.triangles.push([idx[0], idx[1], idx[2]]);
            }
            Some("#") | None => {}
            Some(other) => panic!("unexpected OBJ line {other}"),
        }
    }
    assert_eq!(m.positions.len(), m.normals.len());
    m
}

/// A 3D FLIP frame's VTK grid and particles, PLY particles and surface mesh, and OpenVDB volume: values
/// as the simulation's own NPY arrays, the mesh a closed oriented manifold enclosing the liquid's volume.
#[test]
fn files_of_a_3d_flip_frame_read_back_as_the_simulation_wrote_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break-3d",
            "--frames",
            "2",
            "--set",
            "domain.resolution=[32,16,16]",
            "--set",
            "output.npy=true",
            "--set",
            "output.vtk=true",
            "--set",
            "output.ply=true",
            "--set",
            "output.mesh=\"ply\"",
            "--set",
            "output.vdb=true",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let o = dir.path().join("o");
    let (shape, pressure) = npy_of(&o.join("field_pressure_00001.npy"));
    let grid = eddies_io::vtk::read(&fs::read(o.join("grid_00001.vti")).unwrap()).unwrap();
    let image = grid.element("ImageData").unwrap();
    assert_eq!(
        image.attr("WholeExtent").unwrap(),
        format!("0 {} 0 {} 0 {}", shape[2], shape[1], shape[0])
    );
    assert_eq!(image.attr("Spacing").unwrap(), "0.0625 0.0625 0.0625");
    let (c, p) = grid.array("pressure").unwrap();
    assert_eq!(c, 1);
    assert!(p.iter().zip(&pressure).all(|(a, &b)| *a == b as f64));
    assert_eq!(grid.array("velocity").unwrap().0, 3);
    assert!(grid.array("surface").is_some() && grid.array("cell_type").is_some());

    let (_, positions) = npy_of(&o.join("particles_00001.npy"));
    let vtp = eddies_io::vtk::read(&fs::read(o.join("particles_00001.vtp")).unwrap()).unwrap();
    let points = vtp.array("Points").unwrap().1;
    assert_eq!(points.len(), positions.len());
    assert!(points.iter().zip(&positions).all(|(a, &b)| *a == b as f64));
    assert_eq!(vtp.array("velocity").unwrap().0, 3);
    let ply = eddies_io::ply::read(&fs::read(o.join("particles_00001.ply")).unwrap()).unwrap();
    let vertex = &ply.elements[0];
    assert_eq!(vertex.count * 3, positions.len());
    let names: Vec<&str> = vertex.properties.iter().map(|p| p.name.as_str()).collect();
    assert!(
        names.starts_with(&["x", "y", "z"]) && names.contains(&"velocity_x"),
        "{names:?}"
    );
    let pvd = fs::read_to_string(o.join("series.pvd")).unwrap();
    assert_eq!(
        pvd.matches("<DataSet").count(),
        4,
        "two parts per frame: {pvd}"
    );

    let surface = ply_mesh(&fs::read(o.join("surface_00001.ply")).unwrap());
    assert!(
        surface.topology().is_closed_manifold(),
        "{:?}",
        surface.topology()
    );
    // The liquid's volume as FLIP measures it (the particles' share of the cells they fill).
    let stats = fs::read_to_string(o.join("stats.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(stats.lines().last().unwrap()).unwrap();
    let volume = last["fluid_volume"].as_f64().unwrap();
    let meshed = surface.enclosed_volume();
    assert!(
        (meshed / volume - 1.0).abs() < 0.02,
        "the surface encloses {meshed} m³, the liquid is {volume} m³"
    );

    let vdb = fs::read(o.join("volume_00001.vdb")).unwrap();
    assert_eq!(
        &vdb[..8],
        &[0x20, 0x42, 0x44, 0x56, 0, 0, 0, 0],
        "OpenVDB's magic"
    );
    for name in [&b"density"[..], b"velocity", b"fog volume"] {
        assert!(vdb.windows(name.len()).any(|w| w == name));
    }
}

/// Reint's surface (an OBJ) is closed and encloses the liquid's mass at its rest density, within 2 %: the
/// half-cell bevels along the walls and the first steps' compression take a few tenths of a percent.
#[test]
fn a_reint_surface_encloses_the_liquid() {
    let dir = tempfile::tempdir().unwrap();
    let out = eddies(
        &[
            "run",
            "dam-break-reint-3d",
            "--frames",
            "1",
            // A few adaptive steps: the column, filled at rest density, has barely begun to fall.
            "--set",
            "time.fps=300",
            "--set",
            "domain.resolution=[40,40,40]",
            "--set",
            "output.mesh=\"obj\"",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let o = dir.path().join("o");
    let mesh = obj_mesh(&fs::read_to_string(o.join("surface_00000.obj")).unwrap());
    assert!(
        mesh.topology().is_closed_manifold(),
        "{:?}",
        mesh.topology()
    );
    let stats = fs::read_to_string(o.join("stats.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(stats.lines().last().unwrap()).unwrap();
    let volume = last["mass"].as_f64().unwrap() / 1000.0;
    let meshed = mesh.enclosed_volume();
    assert!(
        (meshed / volume - 1.0).abs() < 0.02,
        "the surface encloses {meshed} m³, the liquid is {volume} m³"
    );
}

/// Runs `scene` for `frames` frames into `dir/name` with `extra` arguments; panics on failure.
fn run(dir: &Path, name: &str, scene: &str, frames: u32, extra: &[&str]) {
    let frames = frames.to_string();
    let mut args = vec![
        "run",
        scene,
        "--frames",
        &frames,
        "--set",
        "output.npy=true",
        "--out",
        name,
    ];
    args.extend_from_slice(extra);
    let out = eddies(&args, dir);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// What two runs must share: every NPY array of every frame, and every step's record but its timings.
fn assert_same_run(a: &Path, b: &Path) {
    let stats = |d: &Path| physics_of(&fs::read_to_string(d.join("stats.jsonl")).unwrap());
    assert_eq!(stats(a), stats(b), "stats.jsonl");
    let mut arrays: Vec<_> = fs::read_dir(a)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".npy"))
        .collect();
    arrays.sort();
    assert!(!arrays.is_empty());
    for n in arrays {
        assert_eq!(
            fs::read(a.join(&n)).unwrap(),
            fs::read(b.join(&n)).unwrap(),
            "{n}"
        );
    }
}

/// For every method: a run that writes checkpoints, stops, and is resumed to the full count of frames
/// matches the run that never stopped, bit for bit.
#[test]
fn resumed_runs_match_uninterrupted_ones_for_every_method() {
    let cases: [(&str, &[&str]); 3] = [
        ("droplet-splash", &["--set", "domain.resolution=[64,64]"]),
        ("dam-break", &["--set", "domain.resolution=[48,24]"]),
        (
            "dye-drop",
            &[
                "--set",
                "domain.resolution=[16,16,16]",
                "--set",
                "vpm.ball[0].vortons=300",
                "--set",
                "vpm.ball[0].tracers=500",
            ],
        ),
    ];
    for (scene, extra) in cases {
        let dir = tempfile::tempdir().unwrap();
        run(dir.path(), "whole", scene, 4, extra);
        let mut first = extra.to_vec();
        first.extend_from_slice(&["--set", "output.checkpoint_every=1"]);
        run(dir.path(), "parts", scene, 2, &first);
        let parts = dir.path().join("parts");
        assert!(parts.join("checkpoint_00002.ckpt").exists());
        let out = eddies(&["run", "--resume", "parts", "--frames", "4"], dir.path());
        assert!(out.status.success(), "{scene}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("resuming at frame 2"),
            "{}",
            stderr(&out)
        );
        assert_same_run(&dir.path().join("whole"), &parts);
        // Two checkpoints are kept by default: those of frames 3 and 4.
        let mut kept: Vec<String> = fs::read_dir(&parts)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("checkpoint_"))
            .collect();
        kept.sort();
        assert_eq!(
            kept,
            ["checkpoint_00003.ckpt", "checkpoint_00004.ckpt"],
            "{scene}"
        );
    }
}

/// Ctrl-C (SIGINT) mid-run: exit 130, a checkpoint of the state in the middle of a frame, and a resume that
/// ends where the uninterrupted run does.
#[cfg(unix)]
#[test]
fn an_interrupted_run_resumes_to_the_uninterrupted_result() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [
        "--set",
        "domain.resolution=[96,96]",
        "--steps-per-frame",
        "40",
    ];
    run(dir.path(), "whole", "droplet-splash", 3, &extra);
    let mut args = vec![
        "run",
        "droplet-splash",
        "--frames",
        "3",
        "--set",
        "output.npy=true",
        "--out",
        "cut",
    ];
    args.extend_from_slice(&extra);
    // Interrupted once the first frame is out, in the second frame's steps.
    let result = signal_after_first_frame(&args, dir.path(), "cut", "-INT");
    let cut = dir.path().join("cut");
    let said = String::from_utf8_lossy(&result.stderr);
    if result.status.success() {
        // The run ended before the signal arrived (a very fast machine): nothing to resume.
        eprintln!("notice: the run finished before the interrupt; skipped");
        return;
    }
    assert_eq!(result.status.code(), Some(130), "{said}");
    assert!(
        said.contains("interrupted by SIGINT") && said.contains("--resume"),
        "{said}"
    );
    let out = eddies(&["run", "--resume", "cut"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_same_run(&dir.path().join("whole"), &cut);
}

/// A damaged checkpoint is refused with exit 2 and one line naming the file, and nothing is overwritten.
#[test]
fn a_damaged_checkpoint_is_refused_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [
        "--set",
        "domain.resolution=[32,32]",
        "--set",
        "output.checkpoint_every=1",
    ];
    run(dir.path(), "o", "droplet-splash", 2, &extra);
    let o = dir.path().join("o");
    let before: Vec<(String, Vec<u8>)> = {
        let mut v: Vec<_> = fs::read_dir(&o)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .filter(|(n, _)| !n.starts_with('.'))
            .collect();
        v.sort();
        v
    };
    let ckpt = o.join("checkpoint_00002.ckpt");
    let mut bytes = fs::read(&ckpt).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs::write(&ckpt, &bytes).unwrap();
    let out = eddies(&["run", "--resume", "o", "--frames", "4"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let line = error_line(&out);
    assert!(
        line.contains("checkpoint_00002.ckpt") && line.contains("corrupt"),
        "{line}"
    );
    for (name, content) in &before {
        let now = fs::read(o.join(name)).unwrap();
        assert!(
            name == "checkpoint_00002.ckpt" || &now == content,
            "{name} changed"
        );
    }
    // A folder without a checkpoint says so.
    fs::remove_file(&ckpt).unwrap();
    fs::remove_file(o.join("checkpoint_00001.ckpt")).unwrap();
    let out = eddies(&["run", "--resume", "o"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(error_line(&out).contains("holds no checkpoint"));
}

/// A second run into a folder that a run is writing is refused, naming the process.
#[test]
fn a_second_run_into_a_folder_in_use_is_refused() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let mut first = Command::new(env!("CARGO_BIN_EXE_eddies"))
        .args([
            "run",
            "droplet-splash",
            "--frames",
            "200",
            "--set",
            "domain.resolution=[64,64]",
            "--out",
            "o",
        ])
        .current_dir(dir.path())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !dir.path().join("o/stats.jsonl").exists() {
        assert!(
            start.elapsed().as_secs() < 60,
            "the first run did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let second = eddies(
        &["run", "droplet-splash", "--frames", "1", "--out", "o"],
        dir.path(),
    );
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(second.status.code(), Some(2));
    let line = error_line(&second);
    assert!(
        line.contains("in use by another eddies run")
            && line.contains(&format!("process {}", first.id())),
        "{line}"
    );
}

/// `eddies plot DIR` draws a run's stats as SVG and PNG.
#[test]
fn plots_are_drawn_from_a_run() {
    let dir = tempfile::tempdir().unwrap();
    run(
        dir.path(),
        "o",
        "dam-break",
        2,
        &["--set", "domain.resolution=[32,16]"],
    );
    let out = eddies(&["plot", "o"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let plots = dir.path().join("o/plots");
    let names: Vec<String> = fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.ends_with(".svg")) && names.iter().any(|n| n.ends_with(".png")));
    for n in names.iter().filter(|n| n.ends_with(".png")) {
        assert_eq!(&fs::read(plots.join(n)).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    }
    let missing = eddies(&["plot", "nowhere"], dir.path());
    assert_eq!(missing.status.code(), Some(2));
    assert!(error_line(&missing).contains("stats.jsonl"));
}

/// Vortex particles in ParaView: the vortons with their vorticity vectors, the dye tracers, and the grid
/// fitted to the vortons, each frame listed in the series.
#[test]
fn vortex_particles_write_vortons_tracers_and_their_grid() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [
        "--set",
        "domain.resolution=[16,16,16]",
        "--set",
        "vpm.ball[0].vortons=300",
        "--set",
        "vpm.ball[0].tracers=500",
        "--set",
        "output.vtk=true",
        "--set",
        "output.vdb=true",
    ];
    run(dir.path(), "o", "dye-drop", 2, &extra);
    let o = dir.path().join("o");
    let (_, positions) = npy_of(&o.join("particles_00001.npy"));
    let vortons = eddies_io::vtk::read(&fs::read(o.join("particles_00001.vtp")).unwrap()).unwrap();
    assert_eq!(vortons.array("Points").unwrap().1.len(), positions.len());
    assert_eq!(vortons.array("vorticity").unwrap().0, 3);
    assert!(vortons.array("temperature").is_some() && vortons.array("radius").is_some());
    let tracers = eddies_io::vtk::read(&fs::read(o.join("tracers_00001.vtp")).unwrap()).unwrap();
    assert_eq!(tracers.array("Points").unwrap().1.len(), 3 * 500);
    let grid = eddies_io::vtk::read(&fs::read(o.join("grid_00001.vti")).unwrap()).unwrap();
    assert!(grid.array("vorticity_magnitude").is_some() && grid.array("velocity").is_some());
    let pvd = fs::read_to_string(o.join("series.pvd")).unwrap();
    assert_eq!(
        pvd.matches("<DataSet").count(),
        6,
        "three parts per frame: {pvd}"
    );
    assert!(o.join("volume_00001.vdb").exists());
}

/// The frames of a run in `dir`: their count and the size of the first.
fn frames_of(dir: &Path) -> (usize, (u32, u32)) {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("frame_") && n.ends_with(".png"))
        .collect();
    names.sort();
    let first = image::open(dir.join(&names[0])).unwrap();
    (names.len(), (first.width(), first.height()))
}

/// A GIF decoded with the `gif` crate: its frames' count, its size, and the sum of the frame delays
/// (hundredths of a second).
fn gif_of(path: &Path) -> (usize, (u32, u32), u32) {
    let (frames, size, delay, _) = decode_gif(path);
    (frames, size, delay)
}

/// [`gif_of`], and the last frame's RGBA pixels.
fn decode_gif(path: &Path) -> (usize, (u32, u32), u32, Vec<u8>) {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    let mut decoder = options.read_info(fs::File::open(path).unwrap()).unwrap();
    let size = (decoder.width() as u32, decoder.height() as u32);
    let (mut frames, mut delay, mut last) = (0, 0, Vec::new());
    while let Some(frame) = decoder.read_next_frame().unwrap() {
        assert_eq!(
            (frame.width as u32, frame.height as u32),
            size,
            "every frame covers the whole picture"
        );
        frames += 1;
        delay += frame.delay as u32;
        last = frame.buffer.to_vec();
    }
    (frames, size, delay, last)
}

/// `output.animation = "gif"`: a run writes `animation.gif` with its frames at `time.fps`, a resumed run one
/// with all of them, and `eddies animate` makes one from any run's folder.
#[test]
fn a_gif_animation_holds_the_runs_frames() {
    let dir = tempfile::tempdir().unwrap();
    let sets = [
        "--set",
        "domain.resolution=[32,16]",
        "--set",
        "output.animation=\"gif\"",
        "--set",
        "time.fps=20",
        "--set",
        "output.checkpoint_every=1",
        "--set",
        "output.field=\"speed\"",
    ];
    run(dir.path(), "g", "dam-break", 3, &sets);
    let g = dir.path().join("g");
    let (frames, size) = frames_of(&g);
    assert_eq!(frames, 3);
    let (count, gif_size, delay, last) = decode_gif(&g.join("animation.gif"));
    assert_eq!(
        (count, gif_size, delay),
        (3, size, 3 * 5),
        "5/100 s a frame at 20 fps"
    );
    // 256 colours a frame show the picture faithfully: a small mean error, and few values far off.
    let png = image::open(g.join("frame_00002.png")).unwrap().into_rgba8();
    let errors: Vec<u32> = png
        .as_raw()
        .iter()
        .zip(&last)
        .map(|(&a, &b)| (a as i32 - b as i32).unsigned_abs())
        .collect();
    let mean = errors.iter().sum::<u32>() as f64 / errors.len() as f64;
    assert!(mean < 2.0, "mean error {mean} of 255");
    // Rare colours (anti-aliased text edges) may be merged into their neighbours.
    let far = errors.iter().filter(|&&e| e > 16).count() as f64 / errors.len() as f64;
    assert!(
        far < 0.005,
        "{:.2} % of values off by more than 16",
        100.0 * far
    );

    // Resumed to five frames: the animation is remade with all of them.
    let out = eddies(
        &["run", "--resume", "g", "--frames", "5", "--quiet"],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(gif_of(&g.join("animation.gif")).0, 5);

    // From the folder, at the rate the run recorded, or at the rate asked for.
    let out = eddies(&["animate", "g", "--output", "again.gif"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(gif_of(&dir.path().join("again.gif")), (5, size, 5 * 5));
    let out = eddies(&["animate", "g", "--fps", "50"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(gif_of(&g.join("animation.gif")), (5, size, 5 * 2));

    // A folder without frames, and one that does not exist.
    fs::create_dir(dir.path().join("empty")).unwrap();
    let out = eddies(&["animate", "empty"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        error_line(&out).contains("holds no frames"),
        "{}",
        stderr(&out)
    );
    let out = eddies(&["animate", "nowhere"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(error_line(&out).contains("nowhere"), "{}", stderr(&out));
}

/// `eddies` with PATH holding nothing but an empty folder: no ffmpeg.
fn eddies_without_ffmpeg(args: &[&str], cwd: &Path) -> std::process::Output {
    let empty = tempfile::tempdir().unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_eddies"))
        .args(args)
        .current_dir(cwd)
        .env("PATH", empty.path())
        .output()
        .unwrap()
}

/// Without ffmpeg, an MP4 is refused before anything runs or is written, naming the program.
#[test]
fn mp4_without_ffmpeg_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "dam-break",
        "--frames",
        "2",
        "--set",
        "domain.resolution=[32,16]",
        "--set",
        "output.animation=\"mp4\"",
        "--out",
        "m",
    ];
    let out = eddies_without_ffmpeg(&args, dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let line = error_line(&out);
    assert!(
        line.contains("ffmpeg") && line.contains("output.animation"),
        "{line}"
    );
    assert!(!dir.path().join("m").exists(), "nothing is written");

    // `eddies animate --format mp4` likewise writes nothing.
    run(
        dir.path(),
        "f",
        "dam-break",
        1,
        &["--set", "domain.resolution=[32,16]"],
    );
    let out = eddies_without_ffmpeg(&["animate", "f", "--format", "mp4"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(error_line(&out).contains("ffmpeg"), "{}", stderr(&out));
    assert!(!dir.path().join("f/animation.mp4").exists());
}

/// With ffmpeg on PATH, a run writes an MP4 (skipped, with a notice, where there is no ffmpeg).
#[test]
fn mp4_animation_through_ffmpeg() {
    if eddies_cli::animation::find_program("ffmpeg").is_none() {
        eprintln!("skipped: ffmpeg is not on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // An odd height (34 × 17 cells, frames of 510 × 255 pixels) that yuv420p needs padded.
    let sets = [
        "--set",
        "domain.resolution=[34,17]",
        "--set",
        "output.animation=\"mp4\"",
    ];
    run(dir.path(), "m", "dam-break", 3, &sets);
    let path = dir.path().join("m/animation.mp4");
    let mp4 = fs::read(&path).unwrap();
    assert_eq!(&mp4[4..8], b"ftyp", "an MP4 file");
    // ffprobe comes with ffmpeg: the stream holds every frame, padded to an even size.
    let Some(ffprobe) = eddies_cli::animation::find_program("ffprobe") else {
        return;
    };
    let probe = std::process::Command::new(ffprobe)
        .args(["-v", "error", "-select_streams", "v:0", "-count_frames"])
        .args([
            "-show_entries",
            "stream=width,height,nb_read_frames,pix_fmt",
        ])
        .args(["-of", "default=noprint_wrappers=1"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&probe.stdout);
    for line in [
        "width=510",
        "height=256",
        "nb_read_frames=3",
        "pix_fmt=yuv420p",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}
