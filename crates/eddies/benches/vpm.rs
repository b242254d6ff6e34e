//! Criterion benches of the vortex particle method: the direct Biot–Savart sum and the treecode (mirroring
//! `src/vpm/biot_savart.rs` and `src/vpm/tree.rs`), and a full step. `eddies bench vpm` measures the issue's
//! sizes (up to 10⁶ vortons) for docs/PERFORMANCE.md; these use smaller sets so that `cargo bench` is quick.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use eddies::vpm::biot_savart::{self, Sources};
use eddies::vpm::init::random_vortons;
use eddies::vpm::tree::Tree;
use eddies::vpm::{Ring, TreeParams, VpmParams, VpmSim};
use eddies::Simulation;
use glam::DVec3;

fn direct(c: &mut Criterion) {
    let mut g = c.benchmark_group("vpm-direct");
    for n in [2_000usize, 8_000] {
        let (p, a, s) = random_vortons(n, 7);
        let mut src = Sources::default();
        src.fill(DVec3::splat(0.5), &p, &a, &s);
        let mut u = vec![DVec3::ZERO; n];
        g.throughput(Throughput::Elements((n * n) as u64));
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| biot_savart::direct(&src, &p, &mut u, None))
        });
    }
    g.finish();
}

fn treecode(c: &mut Criterion) {
    let mut g = c.benchmark_group("vpm-tree");
    let params = TreeParams::default();
    for n in [10_000usize, 50_000] {
        let (p, a, s) = random_vortons(n, 7);
        let mut t = Tree::default();
        let mut u = vec![DVec3::ZERO; n];
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                t.build(&params, &p, &a, &s);
                t.evaluate(&params, &p, &mut u, None);
            })
        });
    }
    g.finish();
}

fn step(c: &mut Criterion) {
    let mut sim = VpmSim::new(VpmParams {
        viscosity: 1e-4,
        ..Default::default()
    })
    .expect("valid parameters");
    sim.add_ring(&Ring {
        radius: 1.0,
        core_radius: 0.1,
        vortons: 4000,
        tracers: 4000,
        ..Default::default()
    });
    c.bench_function("vpm-step-ring-4000", |b| {
        b.iter(|| sim.step(0.005).expect("stable"))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = direct, treecode, step
}
criterion_main!(benches);
