//! Treecode sweep: time, RMS error against the direct sum and interactions per target for each opening
//! parameter θ and leaf size on `vpm::init::random_vortons` (docs/PERFORMANCE.md, leaf-size choice).
//!
//! ```sh
//! cargo run --release -p eddies --example vpm_tree_sweep -- 100000 0.35,0.5 32,64,128 3
//! ```
//! Arguments: vortons, θ list, leaf-size list, repetitions (median time is printed), and the far-field
//! method, `treecode` (default) or `fmm`.

use eddies::vpm::biot_savart::{self, Sources};
use eddies::vpm::init::random_vortons;
use eddies::vpm::tree::{self, Tree};
use eddies::vpm::{TreeMethod, TreeParams};
use glam::DVec3;
use std::time::Instant;

fn list<T: std::str::FromStr>(arg: Option<&String>, default: &str) -> Vec<T> {
    arg.map_or(default, |s| s.as_str())
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let thetas: Vec<f64> = list(args.get(2), "0.5");
    let leaves: Vec<usize> = list(args.get(3), "64");
    let reps: usize = args.get(4).and_then(|v| v.parse().ok()).unwrap_or(3).max(1);
    let method = match args.get(5).map(String::as_str) {
        None | Some("treecode") => TreeMethod::Treecode,
        Some("fmm") => TreeMethod::Fmm,
        Some(other) => panic!("unknown method {other:?}: treecode or fmm"),
    };
    let (p, a, s) = random_vortons(n, 7);
    // Accuracy on 2000 targets spread over the set, as in `eddies bench vpm-tree`.
    let stride = (n / 2000).max(1);
    let targets: Vec<DVec3> = p.iter().step_by(stride).copied().collect();
    let mut src = Sources::default();
    src.fill(DVec3::splat(0.5), &p, &a, &s);
    let mut exact = vec![DVec3::ZERO; targets.len()];
    biot_savart::direct(&src, &targets, &mut exact, None);
    println!("vortons theta leaf time_ms build_ms rms_error far_per_target near_per_target");
    for &theta in &thetas {
        for &leaf_size in &leaves {
            let params = TreeParams {
                theta,
                leaf_size,
                method,
                ..Default::default()
            };
            let mut t = Tree::default();
            let mut u = vec![DVec3::ZERO; n];
            let mut times = Vec::new();
            let mut build = 0.0;
            for _ in 0..reps {
                let t0 = Instant::now();
                t.build(&params, &p, &a, &s);
                build = t0.elapsed().as_secs_f64();
                t.evaluate(&params, &p, &mut u, None);
                times.push(t0.elapsed().as_secs_f64());
            }
            times.sort_by(f64::total_cmp);
            let approx: Vec<DVec3> = u.iter().step_by(stride).copied().collect();
            let info = t.info();
            println!(
                "{n} {theta} {leaf_size} {:.1} {:.1} {:.2e} {:.0} {:.0}",
                times[reps / 2] * 1e3,
                build * 1e3,
                tree::rms_relative_error(&approx, &exact),
                info.far_interactions as f64 / n as f64,
                info.near_interactions as f64 / n as f64
            );
        }
    }
}
