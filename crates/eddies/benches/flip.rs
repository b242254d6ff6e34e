//! Criterion benches of the FLIP liquid: a full dam-break step in 2D and 3D, with FLIP and APIC transfers.
//! `eddies bench flip` measures the sizes (128×64×128 with ~4M particles, and 64³) with per-stage
//! times for docs/PERFORMANCE.md; these use small grids so that `cargo bench` finishes in a minute.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use eddies::flip::{FlipConfig, FlipParams, FlipSim, Transfer};
use eddies::{Shape, Simulation};
use glam::DVec3;

/// A dam break over a third of the domain, after a few steps of collapse.
fn scene<const D: usize>(n: usize, transfer: Transfer) -> FlipSim<D> {
    let cfg = FlipConfig::<D> {
        resolution: [n; D],
        cell_size: 1.0 / n as f64,
        params: FlipParams {
            transfer,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut sim = FlipSim::new(cfg).expect("valid config");
    let block = if D == 2 {
        Shape::box2([0.0, 0.0], [0.4, 0.8])
    } else {
        Shape::Box {
            min: DVec3::ZERO,
            max: DVec3::new(0.4, 0.8, 1.0),
        }
    };
    sim.fill(&block, [0.0; D]);
    for _ in 0..5 {
        let dt = sim.max_dt(1.0);
        sim.step(dt).expect("stable");
    }
    sim
}

fn bench_dim<const D: usize>(c: &mut Criterion, n: usize) {
    let mut group = c.benchmark_group(format!("flip-{D}d"));
    group.throughput(Throughput::Elements(n.pow(D as u32) as u64));
    group.sample_size(10);
    for transfer in [Transfer::Flip, Transfer::Apic] {
        let mut sim = scene::<D>(n, transfer);
        group.bench_with_input(BenchmarkId::new(transfer.name(), n), &n, |b, _| {
            b.iter(|| {
                let dt = sim.max_dt(1.0);
                sim.step(dt).expect("stable")
            })
        });
    }
    group.finish();
}

fn flip(c: &mut Criterion) {
    bench_dim::<2>(c, 128);
    bench_dim::<3>(c, 32);
}

criterion_group!(benches, flip);
criterion_main!(benches);
