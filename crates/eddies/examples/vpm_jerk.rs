//! Gourlay part 12's comparison of velocity-from-vorticity techniques by their jerk: prints the table of
//! docs/vpm.md and writes the plot of mean |d³x/dt³| over time as an SVG.
//!
//! `cargo run --release -p eddies --example vpm_jerk -- docs/images/vpm-jerk.svg`

use eddies::validation::vpm::{jerk_run, mean_after_warmup};
use eddies::vpm::VelocityMethod;

const STEPS: usize = 80;

fn main() -> std::io::Result<()> {
    let runs = [
        (
            "tree @ grid points",
            VelocityMethod::TreeGrid,
            false,
            "#d62728",
        ),
        (
            "tree @ grid points + auto-mollify",
            VelocityMethod::TreeGrid,
            true,
            "#2ca02c",
        ),
        (
            "direct @ vortons (reference)",
            VelocityMethod::DirectVortons,
            false,
            "#1f77b4",
        ),
    ];
    let series: Vec<(&str, Vec<f64>, &str)> = runs
        .iter()
        .map(|&(name, method, mollify, colour)| (name, jerk_run(method, mollify, STEPS), colour))
        .collect();
    let reference = mean_after_warmup(&series[2].1);
    println!("| technique | mean jerk (m/s³) | relative to direct @ vortons |");
    println!("|---|---|---|");
    for (name, s, _) in &series {
        let m = mean_after_warmup(s);
        println!("| {name} | {m:.4} | {:.2} |", m / reference);
    }
    if let Some(path) = std::env::args().nth(1) {
        std::fs::write(&path, svg(&series))?;
        println!("wrote {path}");
    }
    Ok(())
}

/// A log-scale line plot of each series against the step (steps 3.. have jerk history).
fn svg(series: &[(&str, Vec<f64>, &str)]) -> String {
    let (w, h, left, bottom, top, right) = (720.0, 420.0, 70.0, 50.0, 20.0, 20.0);
    let values = series.iter().flat_map(|(_, s, _)| s[2..].iter().copied());
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let (l0, l1) = (lo.log10().floor(), hi.log10().ceil());
    let x = |i: usize| left + (i as f64 - 2.0) / (STEPS as f64 - 3.0) * (w - left - right);
    let y = |v: f64| top + (l1 - v.max(lo).log10()) / (l1 - l0) * (h - top - bottom);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" \
         font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for d in (l0 as i32)..=(l1 as i32) {
        let yy = y(10f64.powi(d));
        out += &format!(
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">1e{d}</text>\n",
            w - right,
            left - 6.0,
            yy + 4.0
        );
    }
    out += &format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">step</text>\n\
         <text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">mean |jerk| (m/s³)</text>\n",
        (left + w - right) / 2.0,
        h - 12.0,
        h / 2.0,
        h / 2.0
    );
    for (k, (name, s, colour)) in series.iter().enumerate() {
        let points: Vec<String> = (2..s.len())
            .map(|i| format!("{:.1},{:.1}", x(i), y(s[i])))
            .collect();
        out += &format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{name}</text>\n",
            points.join(" "),
            left + 10.0,
            top + 16.0 + 16.0 * k as f64
        );
    }
    out + "</svg>\n"
}
