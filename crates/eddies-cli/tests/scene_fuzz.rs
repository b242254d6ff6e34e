//! The scene loader and `--set` against arbitrary input: they never panic, every rejection is bad input
//! (exit 2) with one `error:` line, and a scene they accept can be set up (and stepped, when small) without
//! a panic either. Property tests with a fixed number of cases, so that CI spends a bounded time here
//! (about ten seconds in the test profile); raise `PROPTEST_CASES` for a longer hunt.

use eddies_cli::error::{CliError, EXIT_BAD_INPUT};
use eddies_cli::load::{load, SceneSource};
use eddies_cli::runner::{overrides, RunOptions};
use eddies_cli::setup;
use proptest::prelude::*;

/// Keys of the scene format, by table, to build TOML that reaches past the first unknown-key check.
const TOP: &[&str] = &["method", "dim", "seed"];
const TABLES: &[(&str, &[&str])] = &[
    ("domain", &["size", "resolution", "boundary", "gravity"]),
    ("time", &["frames", "fps", "steps_per_frame", "cfl"]),
    (
        "reint",
        &[
            "diffusion_radius",
            "eos",
            "sound_speed",
            "viscosity",
            "tension",
            "kernel_radius",
            "gamma",
            "forces",
        ],
    ),
    (
        "flip",
        &[
            "transfer",
            "pic_ratio",
            "preconditioner",
            "seeds_per_axis",
            "tolerance",
            "jitter",
        ],
    ),
    (
        "vpm",
        &[
            "velocity",
            "theta",
            "viscosity",
            "ambient_density",
            "stretching",
            "length_scale",
            "boundary",
        ],
    ),
    ("output", &["field", "npy", "view", "panels"]),
];
const ARRAYS: &[(&str, &[&str])] = &[
    ("region", &["shape", "substance", "velocity", "density"]),
    ("obstacle", &["shape", "velocity"]),
    (
        "emitter",
        &["shape", "substance", "velocity", "start", "stop", "density"],
    ),
    ("sink", &["shape", "rate"]),
    ("substance", &["rest_density", "color"]),
    (
        "vpm.ring",
        &[
            "center",
            "axis",
            "radius",
            "core_radius",
            "circulation",
            "vortons",
        ],
    ),
    (
        "vpm.ball",
        &["center", "radius", "density_deviation", "vortons"],
    ),
];

/// A TOML value of any kind, odd ones included (huge, negative, non-finite, empty, nested, wrong type).
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        (-4i64..300).prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:?}")),
        (-2.0f64..2.0).prop_map(|v| format!("{v:?}")),
        Just("nan".to_string()),
        Just("-inf".to_string()),
        Just("1e308".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        "[a-z0-9_.-]{0,12}".prop_map(|s| format!("{s:?}")),
        Just("\"reint\"".to_string()),
        Just("\"flip\"".to_string()),
        Just("\"vpm\"".to_string()),
        Just("{ box = { min = [0.0, 0.0], max = [0.5, 0.5] } }".to_string()),
        Just("{ sphere = { center = [0.5, 0.5, 0.5], radius = 0.2 } }".to_string()),
        Just("{ box = { min = [2.0, 2.0], max = [3.0, 3.0] } }".to_string()),
        Just("{ nonsense = 1 }".to_string()),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec(("[a-z]{1,6}", inner), 0..3).prop_map(|kv| {
                let parts: Vec<String> =
                    kv.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", parts.join(", "))
            }),
        ]
    })
}

/// A key of the scene format (or, now and then, a misspelt one).
fn key(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        9 => prop::sample::select(keys).prop_map(str::to_string),
        1 => "[a-z_]{1,10}",
    ]
}

/// A scene file: top-level keys, tables and arrays of tables from the format, with arbitrary values. Two
/// cases in three start from a small valid domain, so that many scenes load and get built and stepped.
fn scene_text() -> impl Strategy<Value = String> {
    let top = prop::collection::vec((key(TOP), value()), 0..3);
    let table = (0..TABLES.len()).prop_flat_map(|t| {
        let (name, keys) = TABLES[t];
        prop::collection::btree_map(key(keys), value(), 0..4)
            .prop_map(move |kv| (name.to_string(), false, kv))
    });
    let array = (0..ARRAYS.len()).prop_flat_map(|t| {
        let (name, keys) = ARRAYS[t];
        prop::collection::btree_map(key(keys), value(), 0..4)
            .prop_map(move |kv| (name.to_string(), true, kv))
    });
    let section = prop_oneof![table, array];
    let small = prop::sample::select(vec![
        "",
        "[domain]\nsize = [1.0, 1.0]\nresolution = [16, 16]\n",
        "dim = 3\n[domain]\nsize = [1.0, 1.0, 1.0]\nresolution = [8, 8, 8]\n",
    ]);
    (small, top, prop::collection::vec(section, 0..5)).prop_map(|(small, top, sections)| {
        let mut text = String::new();
        let mut top_keys = std::collections::BTreeMap::new();
        for (k, v) in top {
            top_keys.insert(k, v);
        }
        if small.starts_with("dim") {
            top_keys.remove("dim");
        }
        for (k, v) in top_keys {
            text.push_str(&format!("{k} = {v}\n"));
        }
        // A small domain first; later sections may not name [domain] again (TOML forbids it).
        text.push_str(small);
        let mut seen = std::collections::BTreeSet::new();
        if !small.is_empty() {
            seen.insert("domain".to_string());
        }
        for (name, array, kv) in sections {
            if !array && !seen.insert(name.clone()) {
                continue;
            }
            text.push_str(&if array {
                format!("[[{name}]]\n")
            } else {
                format!("[{name}]\n")
            });
            for (k, v) in kv {
                text.push_str(&format!("{k} = {v}\n"));
            }
        }
        text
    })
}

fn source(text: String) -> SceneSource {
    SceneSource {
        label: "fuzz.toml".into(),
        name: "fuzz".into(),
        text,
    }
}

/// Loads `text` with `sets`; a rejection must be bad input with one error line. An accepted scene small
/// enough to build in a moment is built, and stepped once when it is tiny.
fn check(text: String, sets: Vec<String>) -> Result<(), TestCaseError> {
    let opts = RunOptions {
        sets,
        ..RunOptions::default()
    };
    let loaded = overrides(&opts).and_then(|ovs| Ok(load(&source(text), &ovs)?));
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            let e: CliError = e;
            prop_assert_eq!(e.exit_code(), EXIT_BAD_INPUT, "{}", e.report());
            prop_assert_eq!(
                e.report()
                    .lines()
                    .filter(|l| l.starts_with("error:"))
                    .count(),
                1,
                "{}",
                e.report()
            );
            return Ok(());
        }
    };
    let bytes = setup::estimate_bytes(&loaded.scene);
    if bytes < 8e6 {
        if let Ok(built) = setup::build(&loaded.scene) {
            let mut sim = built.sim;
            if bytes < 2e6 {
                let dt = sim.max_dt(loaded.scene.time.cfl).min(1e-3);
                if dt.is_finite() && dt > 0.0 {
                    // A step may fail (a scene may diverge); it must not panic.
                    let _ = sim.step(dt);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Bytes of any kind, read as the CLI reads a file (invalid UTF-8 is refused before the loader).
    #[test]
    fn arbitrary_text_never_panics_the_loader(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(text) = String::from_utf8(bytes) {
            check(text, Vec::new())?;
        }
    }

    /// Scene-shaped TOML with arbitrary values.
    #[test]
    fn scene_shaped_toml_never_panics(text in scene_text()) {
        check(text, Vec::new())?;
    }

    /// `--set` with arbitrary keys and values on a built-in scene and on fuzzed scenes.
    #[test]
    fn arbitrary_overrides_never_panic(
        text in scene_text(),
        sets in prop::collection::vec(
            prop_oneof![
                ".{0,30}",
                (key(&["domain.resolution", "time.frames", "reint.viscosity", "region.0.density",
                       "region.9.velocity", "flip.pic_ratio", "vpm.ring.0.vortons", "output.field",
                       "method", "dim", "domain", "region"]), value())
                    .prop_map(|(k, v)| format!("{k}={v}")),
            ],
            0..3,
        ),
    ) {
        check(text, sets.clone())?;
        let builtin = eddies_cli::scenes::find("dam-break-reint").expect("built-in scene");
        check(builtin.source.to_string(), sets)?;
    }
}
