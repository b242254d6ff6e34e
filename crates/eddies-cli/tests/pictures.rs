//! Rendered pictures of the built-in 3D scenes (`output.view = "render"`), through the program: each scene's
//! first frame shows something, at the size the camera asks for, and a different camera or view shows
//! something else.

mod common;

use std::path::Path;

use common::{eddies, stderr};
use eddies_cli::scenes::BUILTIN;

/// The picture size of these tests: small, the pictures' content is what matters.
const PIXELS: &str = "output.camera.pixels=[160, 96]";

fn frame(dir: &Path) -> image::RgbImage {
    image::open(dir.join("frame_00000.png"))
        .expect("the frame is a PNG")
        .to_rgb8()
}

/// Runs the first frame of `scene` (a short one: 1/600 s) with `extra` overrides into `dir`.
fn first_frame(scene: &str, dir: &Path, extra: &[&str]) -> image::RgbImage {
    let out = dir.to_str().unwrap();
    let mut args = vec![
        "run",
        scene,
        "--out",
        out,
        "--frames",
        "1",
        "--set",
        "time.fps=600",
        "--set",
        PIXELS,
        "--set",
        "output.annotate=false",
    ];
    for e in extra {
        args.extend(["--set", e]);
    }
    let run = eddies(&args, dir.parent().unwrap());
    assert!(run.status.success(), "{scene}: {}", stderr(&run));
    frame(dir)
}

fn distinct_colours(img: &image::RgbImage) -> usize {
    let mut c: Vec<[u8; 3]> = img.pixels().map(|p| p.0).collect();
    c.sort_unstable();
    c.dedup();
    c.len()
}

fn differing_pixels(a: &image::RgbImage, b: &image::RgbImage) -> usize {
    a.pixels().zip(b.pixels()).filter(|(p, q)| p != q).count()
}

#[test]
fn every_builtin_3d_scene_renders_a_picture_that_shows_its_fluid() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rendered = 0;
    for scene in BUILTIN {
        if !scene.source.lines().any(|l| l.trim() == "dim = 3") || scene.source.contains("panels") {
            continue;
        }
        let name = scene.name;
        // Output folders named apart from the scenes: a folder named like a scene would be read as a path.
        let img = first_frame(name, &tmp.path().join(format!("{name}-out")), &[]);
        assert_eq!(
            (img.width(), img.height()),
            (160, 96),
            "{name}: the camera's size"
        );
        // A floor, a sky and a lit fluid take many colours; a blank or flat picture takes few.
        let colours = distinct_colours(&img);
        assert!(colours > 150, "{name}: only {colours} colours");
        // The fluid shows: without it (the simulated content cut away by a camera looking away from the
        // domain, at the sky) the picture is another one.
        let away = first_frame(
            name,
            &tmp.path().join(format!("{name}-away")),
            &[
                "output.camera.target=[0.0, 100.0, 0.0]",
                "output.camera.position=[0.0, 99.0, 0.1]",
            ],
        );
        assert!(
            differing_pixels(&img, &away) > 160 * 96 / 4,
            "{name}: looking away changes little"
        );
        rendered += 1;
    }
    assert!(rendered >= 10, "only {rendered} built-in 3D scenes found");
}

#[test]
fn a_camera_and_the_analysis_views_change_the_picture() {
    let tmp = tempfile::tempdir().unwrap();
    let front = first_frame("dam-break-3d", &tmp.path().join("front"), &[]);
    let side = first_frame(
        "dam-break-3d",
        &tmp.path().join("side"),
        &["output.camera.position=[5.0, 1.0, 0.5]"],
    );
    assert!(
        differing_pixels(&front, &side) > 160 * 96 / 4,
        "another camera, another picture"
    );
    let zoomed = first_frame(
        "dam-break-3d",
        &tmp.path().join("zoom"),
        &["output.camera.fov=15"],
    );
    assert!(
        differing_pixels(&front, &zoomed) > 160 * 96 / 4,
        "a narrower field of view"
    );
    // The analysis views keep their own size (the grid, enlarged to at least 512 pixels).
    for view in ["projection", "slice"] {
        let img = first_frame(
            "dam-break-3d",
            &tmp.path().join(view),
            &[&format!("output.view=\"{view}\"")],
        );
        assert_eq!(img.width(), 480, "{view}: 48 cells enlarged 10×");
    }
}

#[test]
fn a_camera_that_cannot_see_is_refused_at_its_key() {
    let tmp = tempfile::tempdir().unwrap();
    for (set, key) in [
        ("output.camera.fov=0", "output.camera.fov"),
        ("output.camera.pixels=[100]", "output.camera.pixels"),
        (
            "output.camera.pixels=[100, 9000]",
            "output.camera.pixels[1]",
        ),
        (
            "output.camera.position=[1.0, 2.0]",
            "output.camera.position",
        ),
    ] {
        let out = tmp.path().join("x");
        let run = eddies(
            &[
                "run",
                "dam-break-3d",
                "--out",
                out.to_str().unwrap(),
                "--set",
                set,
            ],
            tmp.path(),
        );
        assert_eq!(run.status.code(), Some(2), "{set}: {}", stderr(&run));
        assert!(stderr(&run).contains(key), "{set}: {}", stderr(&run));
        assert!(
            !out.join("frame_00000.png").exists(),
            "{set}: nothing written"
        );
    }
}
