//! Criterion benches of reintegration tracking: the reintegration pass alone and a full step, 2D and 3D.
//! `eddies bench` measures the same cases at the sizes (1024², 128³) for docs/PERFORMANCE.md; these
//! use smaller grids so that `cargo bench` finishes in a minute.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use eddies::reint::{ReintConfig, ReintSim};
use eddies::{Shape, Simulation};
use glam::DVec3;

/// A dam break filling 30% of the domain, moving, after a few steps of settling in.
fn scene<const D: usize>(n: usize) -> ReintSim<D> {
    let cfg = ReintConfig::<D> {
        resolution: [n; D],
        cell_size: 1.0 / n as f64,
        ..Default::default()
    };
    let mut sim = ReintSim::new(cfg).expect("valid config");
    let block = if D == 2 {
        Shape::box2([0.0, 0.0], [0.5, 0.6])
    } else {
        Shape::Box {
            min: DVec3::ZERO,
            max: DVec3::new(0.5, 0.6, 1.0),
        }
    };
    sim.fill(&block, 0, 1.0, [0.5; D]);
    for _ in 0..5 {
        let dt = sim.max_dt(0.5);
        sim.step(dt).expect("stable");
    }
    sim
}

fn bench_dim<const D: usize>(c: &mut Criterion, n: usize) {
    let mut group = c.benchmark_group(format!("reint-{D}d"));
    group.throughput(Throughput::Elements(n.pow(D as u32) as u64));
    group.sample_size(20);
    let mut sim = scene::<D>(n);
    group.bench_with_input(BenchmarkId::new("reintegrate", n), &n, |b, _| {
        b.iter(|| sim.advect(1e-4))
    });
    let mut sim = scene::<D>(n);
    group.bench_with_input(BenchmarkId::new("step", n), &n, |b, _| {
        b.iter(|| {
            let dt = sim.max_dt(0.5);
            sim.step(dt).expect("stable")
        })
    });
    group.finish();
}

fn reint(c: &mut Criterion) {
    bench_dim::<2>(c, 256);
    bench_dim::<3>(c, 48);
}

criterion_group!(benches, reint);
criterion_main!(benches);
