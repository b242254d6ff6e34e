//! Plots of hand-written `stats.jsonl` of the three methods: the right plots are written, as PNGs that decode
//! to the figure size and SVGs that carry their axis labels; bad input fails with a message that locates it.

use std::path::{Path, PathBuf};

use eddies_io::plot::{plot_stats, PlotError, SIZE};

/// A reintegration tracking run: mass drifts from 2.0 to 2.02 kg, one step wrote a non-finite energy.
const REINT: &str = r#"{"step":0,"time":0.0,"dt":0.001,"substeps":1,"wall_ms":12.5,"stage_ms":{"emit":0.1,"density":3.0,"forces":4.0,"advance":2.0,"reintegrate":3.0,"diagnostics":0.4},"mass":2.0,"mass_injected":0.0,"mass_removed":0.0,"kinetic_energy":0.5,"max_speed":1.2}
{"step":1,"time":0.001,"dt":0.002,"substeps":2,"wall_ms":13.0,"stage_ms":{"emit":0.1,"density":3.1,"forces":4.2,"advance":2.0,"reintegrate":3.1,"diagnostics":0.5},"mass":2.005,"mass_injected":0.0,"mass_removed":0.0,"kinetic_energy":null,"max_speed":1.25}
{"step":2,"time":0.003,"dt":0.002,"substeps":2,"wall_ms":12.0,"stage_ms":{"emit":0.1,"density":2.9,"forces":3.9,"advance":2.0,"reintegrate":2.8,"diagnostics":0.3},"mass":2.01,"mass_injected":0.0,"mass_removed":0.0,"kinetic_energy":0.52,"max_speed":1.3}
{"step":3,"time":0.005,"dt":0.0015,"substeps":1,"wall_ms":12.2,"stage_ms":{"emit":0.1,"density":3.0,"forces":4.0,"advance":1.9,"reintegrate":2.8,"diagnostics":0.4},"mass":2.02,"mass_injected":0.0,"mass_removed":0.0,"kinetic_energy":0.53,"max_speed":1.28,"clamps":{"speed":{"count":3,"limit":12.5,"unit":"m/s"}}}
"#;

/// A FLIP run with a pressure solve.
const FLIP: &str = r#"{"step":0,"time":0.0,"dt":0.01,"substeps":1,"wall_ms":40.0,"stage_ms":{"sort":1.0,"particles_to_grid":10.0,"project":20.0,"grid_to_particles_advect":8.0,"diagnostics":1.5},"particle_count":8000,"fluid_volume":0.125,"pressure_iterations":42,"pressure_residual":1e-6,"kinetic_energy":0.0,"max_speed":0.0}
{"step":1,"time":0.01,"dt":0.01,"substeps":1,"wall_ms":45.0,"stage_ms":{"sort":1.0,"particles_to_grid":10.5,"project":24.0,"grid_to_particles_advect":8.5,"diagnostics":1.5},"particle_count":8000,"fluid_volume":0.1249,"pressure_iterations":57,"pressure_residual":3e-7,"kinetic_energy":0.61,"max_speed":0.98}
{"step":2,"time":0.02,"dt":0.008,"substeps":2,"wall_ms":47.0,"stage_ms":{"sort":1.0,"particles_to_grid":11.0,"project":25.0,"grid_to_particles_advect":9.0,"diagnostics":1.5},"particle_count":7998,"fluid_volume":0.1251,"pressure_iterations":61,"pressure_residual":null,"kinetic_energy":1.2,"max_speed":1.96}
"#;

/// A vortex particle run: vector circulation and impulse, the mean jerk.
const VPM: &str = r#"{"step":0,"time":0.0,"dt":0.005,"substeps":1,"wall_ms":30.0,"stage_ms":{"emit":0.2,"advect_stretch":5.0,"splat_vorticity":3.0,"vector_potential":1.0,"poisson":14.0,"curl":2.0,"diagnostics":3.0},"vorton_count":4096,"circulation":[0.0,0.0,1.0],"impulse":[0.0,0.0,0.3],"centroid":[0.5,0.5,0.2],"density_centroid":[0.5,0.5,0.2],"enstrophy":12.0,"mean_jerk":0.0,"kinetic_energy":0.8,"max_speed":2.1}
{"step":1,"time":0.005,"dt":0.005,"substeps":1,"wall_ms":31.0,"stage_ms":{"emit":0.2,"advect_stretch":5.0,"splat_vorticity":3.0,"vector_potential":1.0,"poisson":14.0,"curl":2.0,"diagnostics":3.0},"vorton_count":4096,"circulation":[0.0,0.0,1.001],"impulse":[0.0,0.0,0.3],"centroid":[0.5,0.5,0.21],"density_centroid":[0.5,0.5,0.21],"enstrophy":12.1,"mean_jerk":3.5,"kinetic_energy":0.79,"max_speed":2.05}
{"step":2,"time":0.01,"dt":0.005,"substeps":1,"wall_ms":31.5,"stage_ms":{"emit":0.2,"advect_stretch":5.0,"splat_vorticity":3.0,"vector_potential":1.0,"poisson":14.0,"curl":2.0,"diagnostics":3.0},"vorton_count":4100,"circulation":[0.0,0.0,0.998],"impulse":[0.0,0.0,0.301],"centroid":[0.5,0.5,0.22],"density_centroid":[0.5,0.5,0.22],"enstrophy":12.3,"mean_jerk":2.9,"kinetic_energy":0.785,"max_speed":2.0}
"#;

/// Plots `jsonl` into a fresh folder and returns the folder (kept alive) and the paths written.
fn plot(jsonl: &str, title: &str) -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let written = plot_stats(jsonl, dir.path(), title).expect("plots");
    (dir, written)
}

/// The file names written, sorted.
fn names(written: &[PathBuf]) -> Vec<String> {
    let mut names: Vec<String> = written
        .iter()
        .map(|p| {
            p.file_name()
                .expect("file name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// The SVG and PNG names of each plot stem, sorted.
fn expected(stems: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = stems
        .iter()
        .flat_map(|stem| [format!("{stem}.png"), format!("{stem}.svg")])
        .collect();
    names.sort();
    names
}

/// Checks that the PNG decodes, whole, to an RGB image of the figure size.
fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).expect("png written");
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .expect("png header");
    let mut pixels = vec![0; reader.output_buffer_size().expect("buffer size")];
    let frame = reader.next_frame(&mut pixels).expect("png decodes");
    assert_eq!((frame.width, frame.height), SIZE, "{}", path.display());
    assert_eq!(frame.color_type, png::ColorType::Rgb);
    assert!(
        pixels.iter().any(|&v| v != 255),
        "{} is not blank",
        path.display()
    );
}

/// Reads the SVG and checks that it is one closed `<svg>` element holding each of `texts`.
fn assert_svg(path: &Path, texts: &[&str]) {
    let svg = std::fs::read_to_string(path).expect("svg written");
    assert!(svg.trim_start().starts_with("<svg"), "{}", path.display());
    assert!(svg.trim_end().ends_with("</svg>"), "{}", path.display());
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    for text in texts {
        assert!(svg.contains(text), "{} lacks {text:?}", path.display());
    }
}

#[test]
fn reint_run_gets_the_plots_of_its_quantities() {
    let (dir, written) = plot(REINT, "dam break");
    assert_eq!(
        names(&written),
        expected(&["conservation", "dt", "energy", "max_speed", "stages"])
    );
    written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .for_each(|p| assert_png(p));
    let svg = |stem: &str| dir.path().join(format!("{stem}.svg"));
    assert_svg(
        &svg("conservation"),
        &["mass drift (%)", "time (s)", "dam break"],
    );
    assert_svg(&svg("energy"), &["kinetic energy (J)", "time (s)"]);
    assert_svg(&svg("max_speed"), &["max speed (m/s)"]);
    assert_svg(&svg("dt"), &["dt (s)"]);
    assert_svg(
        &svg("stages"),
        &[
            "wall time per step (ms)",
            "step",
            "density",
            "reintegrate",
            "diagnostics",
        ],
    );
    let leftovers = std::fs::read_dir(dir.path())
        .expect("folder")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "tmp"))
        })
        .count();
    assert_eq!(leftovers, 0, "temporary files renamed away");
}

#[test]
fn flip_run_gets_the_solver_plot_and_volume_drift() {
    let (dir, written) = plot(FLIP, "flip tank");
    assert_eq!(
        names(&written),
        expected(&[
            "conservation",
            "dt",
            "energy",
            "max_speed",
            "solver",
            "stages"
        ])
    );
    written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .for_each(|p| assert_png(p));
    let svg = |stem: &str| dir.path().join(format!("{stem}.svg"));
    assert_svg(&svg("conservation"), &["fluid volume drift (%)"]);
    assert_svg(
        &svg("solver"),
        &["pressure iterations", "pressure residual", "time (s)"],
    );
    assert_svg(
        &svg("stages"),
        &["particles_to_grid", "project", "grid_to_particles_advect"],
    );
}

#[test]
fn vpm_run_gets_circulation_drift_and_jerk() {
    let (dir, written) = plot(VPM, "vortex ring");
    assert_eq!(
        names(&written),
        expected(&[
            "conservation",
            "dt",
            "energy",
            "jerk",
            "max_speed",
            "stages"
        ])
    );
    written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .for_each(|p| assert_png(p));
    let svg = |stem: &str| dir.path().join(format!("{stem}.svg"));
    assert_svg(&svg("conservation"), &["|circulation| drift (%)"]);
    assert_svg(&svg("jerk"), &["mean jerk (m/s³)"]);
}

#[test]
fn a_zero_first_value_plots_the_change_in_its_unit() {
    let jsonl =
        "{\"time\":0.0,\"circulation\":[0,0,0]}\n{\"time\":1.0,\"circulation\":[0,0,1e-9]}\n";
    let (dir, written) = plot(jsonl, "ring");
    assert_eq!(names(&written), expected(&["conservation"]));
    assert_svg(
        &dir.path().join("conservation.svg"),
        &["|circulation| change (m²/s)"],
    );
}

#[test]
fn a_malformed_line_is_named_by_its_number() {
    let jsonl = format!("{}\n{{\"step\":4,\"time\":", REINT.trim_end());
    let dir = tempfile::tempdir().expect("temporary folder");
    match plot_stats(&jsonl, dir.path(), "broken") {
        Err(PlotError::MalformedLine { line, message }) => {
            assert_eq!(line, 5);
            assert!(!message.is_empty());
        }
        other => panic!("expected a malformed line, got {other:?}"),
    }
    let not_an_object =
        plot_stats("[1, 2]\n", dir.path(), "broken").expect_err("an array is no step");
    assert!(
        not_an_object.to_string().starts_with("stats line 1:"),
        "{not_an_object}"
    );
}

#[test]
fn empty_stats_are_an_error() {
    let dir = tempfile::tempdir().expect("temporary folder");
    for empty in ["", "\n\n  \n"] {
        assert!(matches!(
            plot_stats(empty, dir.path(), "empty"),
            Err(PlotError::NoSteps)
        ));
    }
}

#[test]
fn nulls_are_gaps_and_an_all_null_key_has_no_plot() {
    let jsonl = "{\"time\":0.0,\"dt\":null,\"kinetic_energy\":null,\"max_speed\":1.0}\n\
                 {\"time\":null,\"dt\":0.1,\"kinetic_energy\":null,\"max_speed\":null}\n\
                 {\"time\":0.2,\"dt\":0.1,\"kinetic_energy\":null,\"max_speed\":2.0}\n";
    let (_dir, written) = plot(jsonl, "gaps");
    assert_eq!(names(&written), expected(&["dt", "max_speed"]));
}

#[test]
fn values_at_the_ends_of_the_double_range_still_plot() {
    let jsonl = "{\"time\":0.0,\"dt\":1e-300,\"max_speed\":-1.7e308,\"kinetic_energy\":5e-324}\n\
                 {\"time\":1e308,\"dt\":1e300,\"max_speed\":1.7e308,\"kinetic_energy\":0.0}\n";
    let (_dir, written) = plot(jsonl, "diverged");
    assert_eq!(names(&written), expected(&["dt", "energy", "max_speed"]));
}

#[test]
fn an_unwritable_folder_is_named_in_the_error() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let file = dir.path().join("a file");
    std::fs::write(&file, b"").expect("file");
    let error = plot_stats(REINT, &file.join("plots"), "run").expect_err("a file is no folder");
    assert!(matches!(error, PlotError::Io { .. }));
    assert!(error.to_string().contains("a file"), "{error}");
}

/// A run of `steps` steps with a spike, gaps and four stages, as the program writes it.
fn long_run(steps: usize) -> String {
    let mut jsonl = String::with_capacity(steps * 260);
    for step in 0..steps {
        let time = step as f64 * 1e-3;
        let energy = if step % 9973 == 0 {
            "null".to_string()
        } else {
            format!("{}", 1.0 + (time * 3.0).sin())
        };
        let speed = if step == steps / 2 {
            40.0
        } else {
            2.0 + 0.1 * (time * 7.0).cos()
        };
        jsonl.push_str(&format!(
            "{{\"step\":{step},\"time\":{time},\"dt\":0.001,\"substeps\":1,\"wall_ms\":20.0,\
             \"stage_ms\":{{\"particles_to_grid\":5.0,\"project\":{},\"grid_to_particles\":4.0,\"advect\":1.0}},\
             \"particle_count\":100000,\"fluid_volume\":{},\"pressure_iterations\":{},\"pressure_residual\":1e-7,\
             \"kinetic_energy\":{energy},\"max_speed\":{speed}}}\n",
            8.0 + (step % 17) as f64,
            1.0 + 1e-6 * step as f64,
            40 + step % 23,
        ));
    }
    jsonl
}

#[test]
fn a_long_run_thins_its_lines() {
    let jsonl = long_run(20_000);
    let (dir, _written) = plot(&jsonl, "long run");
    let svg = std::fs::read_to_string(dir.path().join("max_speed.svg")).expect("svg");
    let points: usize = svg
        .split("<polyline")
        .skip(1)
        .map(|line| {
            line.split("points=\"").nth(1).map_or(0, |p| {
                p.split('"')
                    .next()
                    .map_or(0, |p| p.split_whitespace().count())
            })
        })
        .sum();
    assert!((100..=2100).contains(&points), "{points} points drawn");
}
