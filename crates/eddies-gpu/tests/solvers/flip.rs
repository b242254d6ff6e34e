//! PIC/FLIP/APIC with the pressure solve on the GPU (`FlipSim::set_pressure_device` with
//! `eddies_gpu::pressure::GpuPoisson`) and the particle-to-grid transfer (`FlipSim::set_transfer_device` with
//! `eddies_gpu::flip::GpuTransfer`): the method's invariants, and agreement with the CPU backend.

use eddies::flip::{Boundary, FlipConfig, FlipParams, FlipSim, Transfer};
use eddies::grid::{CellFlag, Grid};
use eddies::linsolve::{Guess, Info, PoissonDevice, PoissonSolver, SolveError};
use eddies::validation::flip as validation;
use eddies::{Shape, Simulation};
use eddies_gpu::flip::{GpuTransfer, SharedTransfer, TransferTimes};
use eddies_gpu::pressure::{GpuPoisson, SharedPoisson, SolveTimes};
use eddies_gpu::Gpu;
use glam::DVec3;
use std::sync::{Arc, Mutex};

/// The suite's device, as the simulations of every test share it.
fn shared() -> Option<SharedPoisson> {
    super::device().cloned().map(SharedPoisson)
}

fn device<const D: usize>() -> Option<Box<dyn PoissonDevice<D>>>
where
    SharedPoisson: PoissonDevice<D>,
{
    shared().map(|d| Box::new(d) as Box<dyn PoissonDevice<D>>)
}

/// A simulation's own particle passes on the suite's GPU (the device keeps its particles between the passes,
/// so it serves one simulation).
fn gpu_transfer() -> Box<GpuTransfer> {
    Box::new(GpuTransfer::new(super::gpu().unwrap().clone()))
}

/// A liquid block falling against a spinning ball (with `ball`; it cuts into the block, whose particles
/// there it pushes out) in a 16 × 12 × 12 tank, with `transfer`.
fn splash(transfer: Transfer, ball: bool) -> FlipSim<3> {
    splash_on(transfer, ball, [16, 12, 12], 1.0 / 16.0)
}

/// As [`splash`], on a tank of `dims` cells of size `h`.
fn splash_on(transfer: Transfer, ball: bool, dims: [usize; 3], h: f64) -> FlipSim<3> {
    let cfg = FlipConfig::<3> {
        resolution: dims,
        cell_size: h,
        params: FlipParams {
            transfer,
            ..FlipParams::default()
        },
        ..FlipConfig::default()
    };
    let mut sim = block(cfg, [0.5, 0.0, 0.0]);
    if ball {
        sim.add_obstacle(spinning_ball());
    }
    sim
}

/// The splash's liquid block, moving at `velocity`, in a simulation of `cfg`.
fn block(cfg: FlipConfig<3>, velocity: [f64; 3]) -> FlipSim<3> {
    let mut sim = FlipSim::new(cfg).unwrap();
    sim.fill(
        &Shape::Box {
            min: DVec3::ZERO,
            max: DVec3::new(0.35, 0.55, 0.75),
        },
        velocity,
    );
    sim
}

/// A 2D tank of 40 × 24 cells 1/32 across, a block of liquid at rest in its corner.
fn tank_2d() -> FlipSim<2> {
    let cfg = FlipConfig::<2> {
        resolution: [40, 24],
        cell_size: 1.0 / 32.0,
        ..Default::default()
    };
    let mut sim = FlipSim::new(cfg).unwrap();
    sim.fill(&Shape::box2([0.0, 0.0], [0.4, 0.5]), [0.0, 0.0]);
    sim
}

/// The splash's ball, spinning about z.
fn spinning_ball() -> eddies::flip::Obstacle<3> {
    eddies::flip::Obstacle {
        shape: Shape::Sphere {
            center: DVec3::new(0.5, 0.2, 0.4),
            radius: 0.12,
        },
        velocity: [0.0; 3],
        angular_velocity: [0.0, 0.0, 3.0],
        center: [0.5, 0.2, 0.4],
    }
}

/// A tank at rest stays at rest with the GPU's particle passes and pressure: the CPU test's bound, 1% of
/// √(gH) after 1 s.
#[test]
fn a_tank_at_rest_stays_at_rest() {
    let Some(d) = device::<2>() else {
        return;
    };
    let (ratio, _) = validation::hydrostatic_2d_on(32, 1.0, |sim| {
        sim.set_pressure_device(d);
        sim.set_transfer_device(gpu_transfer());
    });
    println!("max speed / sqrt(gH) = {ratio:.3e}");
    assert!(ratio < 0.01, "{ratio}");
}

/// The divergence left by the projection is the solver's residual: with `b = −(ρ/Δt) ∇·u*` and the
/// pressure's residual `r = b − A p`, the projected velocity's divergence is `−(Δt/ρ) r`, so the ratio of
/// the two divergences' norms over the liquid is the relative residual the record reports (to rounding).
#[test]
fn the_divergence_after_projection_is_the_solvers_residual() {
    let Some(d) = device::<2>() else {
        return;
    };
    let cfg = FlipConfig::<2> {
        resolution: [32, 24],
        cell_size: 1.0 / 32.0,
        ..Default::default()
    };
    let mut sim = FlipSim::new(cfg).unwrap();
    sim.fill(&Shape::box2([0.0, 0.0], [0.3, 0.5]), [0.0, 0.0]);
    sim.set_pressure_device(d);
    for _ in 0..8 {
        let dt = sim.max_dt(1.0);
        let rec = sim.step(dt).unwrap();
        let residual = rec.scalar("pressure_residual").unwrap();
        let (before, after) = sim.divergence();
        let norm = |g: &Grid<f64, 2>| {
            g.data
                .iter()
                .zip(&sim.flags().data)
                .filter(|(_, f)| **f == CellFlag::Fluid)
                .map(|(d, _)| d * d)
                .sum::<f64>()
                .sqrt()
        };
        let ratio = norm(after) / norm(before);
        println!("divergence ratio {ratio:.6e}, residual {residual:.6e}");
        assert!(residual <= 1e-6, "{residual}");
        assert!(
            (ratio / residual - 1.0).abs() <= 1e-3,
            "ratio {ratio:e} against the residual {residual:e}"
        );
    }
}

/// PIC, FLIP and APIC with the particle passes and the pressure on the GPU follow the CPU backend: after
/// five steps of a splash with a spinning ball (which the particle pass pushes particles out of), and
/// without it for FLIP, particle positions within 1e-6 of the tank's size and velocities within 1e-5 of the
/// largest speed. The transfers agree to single-precision rounding and both solves stop at a relative
/// residual of 1e-6 in different orders of summation, so the pressures differ by up to about N·1e-6 of the
/// pressure (N = 16 cells across); measured below.
#[test]
fn pic_flip_and_apic_follow_the_cpu() {
    if shared().is_none() {
        return;
    }
    for (transfer, ball) in [
        (Transfer::Pic, true),
        (Transfer::Flip, true),
        (Transfer::Apic, true),
        (Transfer::Flip, false),
    ] {
        let mut cpu = splash(transfer, ball);
        let mut gpu = splash(transfer, ball);
        gpu.set_pressure_device(device::<3>().unwrap());
        gpu.set_transfer_device(gpu_transfer());
        for _ in 0..5 {
            let dt = cpu.max_dt(1.0);
            let (a, b) = (cpu.step(dt).unwrap(), gpu.step(dt).unwrap());
            assert!(
                a.scalar("pressure_iterations")
                    .unwrap()
                    .max(b.scalar("pressure_iterations").unwrap())
                    > 0.0
            );
        }
        let (pc, pg) = (cpu.particles(), gpu.particles());
        assert_eq!(pc.len(), pg.len(), "{transfer:?}");
        let (mut dx, mut dv, mut vmax) = (0.0f64, 0.0f64, 0.0f64);
        for k in 0..3 {
            for i in 0..pc.len() {
                dx = dx.max((pc.pos[k][i] - pg.pos[k][i]).abs() as f64);
                dv = dv.max((pc.vel[k][i] - pg.vel[k][i]).abs() as f64);
                vmax = vmax.max(pc.vel[k][i].abs() as f64);
            }
        }
        println!(
            "{transfer:?}, ball {ball}: position {dx:.2e} m, velocity {:.2e} of the top speed",
            dv / vmax
        );
        assert!(dx <= 1e-6, "{transfer:?}: positions differ by {dx:e} m");
        assert!(
            dv <= 1e-5 * vmax,
            "{transfer:?}: velocities differ by {dv:e} m/s"
        );
    }
}

/// The 3D dam break keeps its volume within the CPU's 2% with the particle passes, the pressure and the
/// volume correction on the GPU (the CPU test's 32 × 16 × 32 cells, over the first 0.6 s, which hold the collapse and the surge's
/// arrival at the far wall), and drifts as the CPU backend does to 1e-3.
#[test]
fn the_3d_dam_break_keeps_its_volume() {
    let Some(d) = device::<3>() else {
        return;
    };
    let gpu = validation::dam_break_volume_drift_on([32, 16, 32], 0.6, 1.0, |sim| {
        sim.set_pressure_device(d);
        sim.set_transfer_device(gpu_transfer());
    });
    let cpu = validation::dam_break_volume_drift([32, 16, 32], 0.6, 1.0);
    println!("worst volume drift: GPU {gpu:.5?}, CPU {cpu:.5?}");
    assert!(gpu.fluid <= 0.02, "{gpu:?}");
    assert!(
        (gpu.fluid - cpu.fluid).abs() <= 1e-3,
        "GPU {gpu:?}, CPU {cpu:?}"
    );
}

/// Two runs with the transfer and the pressure on the GPU give the same bits: every reduction has a fixed order.
#[test]
fn runs_repeat_bit_for_bit() {
    if shared().is_none() {
        return;
    }
    let run = || {
        let mut sim = splash(Transfer::Apic, true);
        sim.set_pressure_device(device::<3>().unwrap());
        sim.set_transfer_device(gpu_transfer());
        let mut residuals = Vec::new();
        for _ in 0..4 {
            let dt = sim.max_dt(1.0);
            let rec = sim.step(dt).unwrap();
            residuals.push(rec.scalar("pressure_residual").unwrap().to_bits());
        }
        (sim.checksum(), residuals)
    };
    assert_eq!(run(), run());
}

/// The solves and the particle passes of one simulation may share their scratch memory, as `eddies run`
/// sets them up: they take turns, and each rewrites what it reads, so the run is bit for bit the one with
/// separate memory; and the shared buffer is the larger need, not the sum.
#[test]
fn sharing_scratch_memory_changes_no_bit() {
    let Some(gpu) = super::gpu() else { return };
    let run = |share: bool| {
        let pressure = GpuPoisson::new(gpu.clone()).unwrap();
        let mut transfer = GpuTransfer::new(gpu.clone());
        if share {
            transfer.share_scratch(pressure.scratch().clone());
        }
        let scratch = (pressure.scratch().clone(), transfer.scratch().clone());
        let mut sim = splash(Transfer::Flip, true);
        sim.set_pressure_device(Box::new(pressure));
        sim.set_transfer_device(Box::new(transfer));
        for _ in 0..4 {
            let dt = sim.max_dt(1.0);
            sim.step(dt).unwrap();
        }
        (sim.checksum(), scratch)
    };
    let (alone, (a, b)) = run(false);
    let (shared, (c, d)) = run(true);
    assert_eq!(alone, shared, "sharing the scratch memory changed the run");
    assert!(!a.same(&b) && c.same(&d));
    assert_eq!(c.bytes(), a.bytes().max(b.bytes()));
}

/// The volume correction's displacement may stay on the device, from the solve to the particle pass, and its
/// potential there from one substep to the next as the next solve's guess (`GpuPoisson::share_faces`): the
/// gradient is the CPU's double-precision arithmetic on the same solution, and the guess the bits that the
/// host would have read back and padded again, so the run is bit for bit the one that sends both across the
/// bus. With the particles left on the device between steps (as `eddies run` does), and brought back in the
/// middle (`complete_records`, after which the next solve takes the host's potential as its guess). PIC,
/// FLIP and APIC, a spinning ball in the liquid; and a 2D tank.
#[test]
fn the_displacement_left_on_the_device_changes_no_bit() {
    let Some(gpu) = super::gpu() else { return };
    let run = |transfer: Transfer, faces: bool| {
        let mut sim = splash(transfer, true);
        let solves = Arc::new(Mutex::new(GpuPoisson::new(gpu.clone()).unwrap()));
        let passes = GpuTransfer::new(gpu.clone());
        if faces {
            solves.lock().unwrap().share_faces(passes.faces().clone());
        }
        sim.set_pressure_device(Box::new(SharedPoisson(solves.clone())));
        sim.set_transfer_device(Box::new(passes));
        sim.read_particles_per_frame(true);
        let mut iterations = Vec::new();
        for step in 0..6 {
            let dt = 2.0 * sim.max_dt(1.0);
            let rec = sim.step(dt).unwrap();
            iterations.push(rec.scalar("pressure_iterations").unwrap());
            if step == 2 {
                sim.complete_records(&mut []).unwrap();
            }
        }
        sim.complete_records(&mut []).unwrap();
        let times = solves.lock().unwrap().take_times();
        (sim.checksum(), iterations, times.kept, times.solves)
    };
    for transfer in [Transfer::Pic, Transfer::Flip, Transfer::Apic] {
        let (kept, sent) = (run(transfer, true), run(transfer, false));
        assert_eq!(kept.1, sent.1, "{transfer:?}: pressure iterations");
        assert_eq!(kept.0, sent.0, "{transfer:?}: particle state");
        // The correction ran (most substeps solve it), and on the device path with the shared faces only.
        assert!(
            kept.2 >= 6 && sent.2 == 0,
            "{transfer:?}: {} and {} kept",
            kept.2,
            sent.2
        );
        assert!(
            kept.2 < kept.3,
            "{transfer:?}: {} of {} solves kept",
            kept.2,
            kept.3
        );
    }
    let tank = |faces: bool| {
        let mut sim = tank_2d();
        let mut solves = GpuPoisson::new(gpu.clone()).unwrap();
        let passes = GpuTransfer::new(gpu.clone());
        if faces {
            solves.share_faces(passes.faces().clone());
        }
        sim.set_pressure_device(Box::new(solves));
        sim.set_transfer_device(Box::new(passes));
        sim.read_particles_per_frame(true);
        for _ in 0..8 {
            let dt = 2.0 * sim.max_dt(1.0);
            sim.step(dt).unwrap();
        }
        sim.complete_records(&mut []).unwrap();
        sim.checksum()
    };
    assert_eq!(tank(true), tank(false), "2D tank: particle state");
}

/// Where the particle device and the pressure solve share a face field, the device that keeps the particles
/// forms the projection's right-hand side and the projected velocity from its own copy (`project.wgsl`)
/// instead of receiving the host's, with the same bits: the body force, the divergence and the pressure
/// difference in double precision as the host's, the velocity rounded once; and the volume correction's
/// right-hand side from the fill fraction it derived; and it tallies each step's fluid volume and largest
/// divergence on that copy, while the host's copy waits for its projection until the state is read (here
/// after the third step and at the end), with the same bits once read. Without obstacles (the device
/// extrapolates its copy), PIC, FLIP and APIC in a closed 3D tank, FLIP in an open one that particles
/// leave and in a 2D tank. The run without the shared face field does these on the host (and the volume
/// correction's displacement, with the same bits: `the_displacement_left_on_the_device_changes_no_bit`).
#[test]
fn the_projection_formed_on_the_device_changes_no_bit() {
    let Some(gpu) = super::gpu() else { return };
    // The particle state; every step's quantities (as their exact decimal forms); the host's grids once the
    // state is read (the velocity, the divergences before and after the projection, the volume excess,
    // and the pressure field, as bits); the device's counts.
    type Outcome = (u64, Vec<String>, Vec<u64>, TransferTimes, SolveTimes);
    // `sends`: the pressure device declines a solve whose right-hand side the host does not hold, so that
    // the host's copy catches up (the body force) and projects as without the device's tally.
    fn run<const D: usize>(
        gpu: &Arc<Gpu>,
        mut sim: FlipSim<D>,
        faces: bool,
        sends: bool,
        steps: usize,
    ) -> Outcome
    where
        FlipSim<D>: Simulation,
        SharedTransfer: eddies::flip::TransferDevice<D>,
        SharedPoisson: PoissonDevice<D>,
    {
        let solves = Arc::new(Mutex::new(GpuPoisson::new(gpu.clone()).unwrap()));
        let passes = SharedTransfer(Arc::new(Mutex::new(GpuTransfer::new(gpu.clone()))));
        if faces {
            let shared = passes.0.lock().unwrap().faces().clone();
            solves.lock().unwrap().share_faces(shared);
        }
        let shared = SharedPoisson(solves.clone());
        match sends {
            true => sim.set_pressure_device(Box::new(SendsRhs(shared))),
            false => sim.set_pressure_device(Box::new(shared)),
        }
        sim.set_transfer_device(Box::new(passes.clone()));
        sim.read_particles_per_frame(true);
        let mut quantities = Vec::new();
        for step in 0..steps {
            let dt = 2.0 * sim.max_dt(1.0);
            let rec = sim.step(dt).unwrap();
            quantities.push(format!("{:?}", rec.quantities));
            if step == 2 {
                sim.complete_records(&mut []).unwrap();
            }
        }
        sim.complete_records(&mut []).unwrap();
        let (before, after) = sim.divergence();
        let grids = sim
            .grid_velocity()
            .u
            .iter()
            .chain([before, after, sim.volume_excess()]);
        let mut bits: Vec<u64> = grids
            .flat_map(|g| g.data.iter().map(|v| v.to_bits()))
            .collect();
        let pressure = sim.field("pressure").unwrap().data;
        bits.extend(pressure.iter().map(|v| u64::from(v.to_bits())));
        let moved = passes.0.lock().unwrap().take_times();
        let solved = solves.lock().unwrap().take_times();
        (sim.checksum(), quantities, bits, moved, solved)
    }
    let compare = |what: &str, on: Outcome, sent: Outcome, off: Outcome| {
        // Where the solve declines the right-hand side the host does not hold, the host catches up and
        // solves with its own, and the device still forms the projection: the same bits, without the tally.
        assert_eq!(
            on.1, sent.1,
            "{what}: the steps' quantities, the right-hand side sent"
        );
        assert_eq!(
            on.0, sent.0,
            "{what}: particle state, the right-hand side sent"
        );
        assert!(
            on.2 == sent.2,
            "{what}: the host's grids, the right-hand side sent"
        );
        let (moved, solved) = (&sent.3, &sent.4);
        assert!(
            moved.grid_tallies == 0 && moved.projections > 0 && solved.rhs_bytes_up > 0,
            "{what}: {moved:?} {solved:?}"
        );
        assert_eq!(on.1, off.1, "{what}: the steps' quantities");
        assert_eq!(on.0, off.0, "{what}: particle state");
        assert!(on.2 == off.2, "{what}: the host's grids once read");
        // Every substep's right-hand sides (the volume correction's where it ran) and velocity formed on the
        // device: no grid field and no right-hand side sent (the displacement stays there too); the host's
        // sent every substep. The device tallied every step's cell quantities, its copy of the grid ahead
        // of the host's.
        let (moved, solved) = (&on.3, &on.4);
        assert!(
            moved.grid_tallies == on.1.len()
                && moved.projections > 0
                && moved.right_hand_sides == moved.projections
                && moved.volume_right_hand_sides > 0
                && solved.rhs_in_faces == moved.projections + moved.volume_right_hand_sides
                && solved.rhs_bytes_up == 0
                && moved.grid_bytes_up == 0,
            "{what}: {moved:?} {solved:?}"
        );
        let (moved, solved) = (&off.3, &off.4);
        assert!(
            moved.grid_tallies == 0
                && moved.projections == 0
                && moved.right_hand_sides == 0
                && moved.volume_right_hand_sides == 0
                && solved.rhs_in_faces == 0
                && solved.rhs_bytes_up > 0
                && moved.grid_bytes_up > 0,
            "{what}: {moved:?} {solved:?}"
        );
    };
    for transfer in [Transfer::Pic, Transfer::Flip, Transfer::Apic] {
        let sim = || splash(transfer, false);
        compare(
            &format!("{transfer:?} closed"),
            run(gpu, sim(), true, false, 6),
            run(gpu, sim(), true, true, 6),
            run(gpu, sim(), false, false, 6),
        );
    }
    let open = || {
        let mut cfg = splash(Transfer::Flip, false).config().clone();
        cfg.boundary = Boundary::Open;
        block(cfg, [-2.0, 0.0, 0.0])
    };
    compare(
        "FLIP open",
        run(gpu, open(), true, false, 4),
        run(gpu, open(), true, true, 4),
        run(gpu, open(), false, false, 4),
    );
    compare(
        "2D tank",
        run(gpu, tank_2d(), true, false, 8),
        run(gpu, tank_2d(), true, true, 8),
        run(gpu, tank_2d(), false, false, 8),
    );
}

/// The suite's pressure device, but a solve whose right-hand side lies in the face field is sent the host's
/// copy instead, and one without a copy on the host is declined (the trait's default).
struct SendsRhs(SharedPoisson);

impl<const D: usize> PoissonDevice<D> for SendsRhs
where
    SharedPoisson: PoissonDevice<D>,
{
    fn solve(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        x: &mut [f64],
    ) -> Result<Option<Info>, SolveError> {
        self.0.solve(solver, b, x)
    }

    fn face_field(&self) -> Option<u64> {
        PoissonDevice::<D>::face_field(&self.0)
    }

    fn solve_gradient(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        self.0.solve_gradient(solver, b, guess)
    }

    fn solve_gradient_rhs_in_faces(
        &mut self,
        solver: &PoissonSolver<D>,
        b: &[f64],
        guess: Guess<'_>,
    ) -> Result<Option<(Info, u64)>, SolveError> {
        self.0.solve_gradient_rhs_in_faces(solver, b, guess)
    }

    fn solution_to_faces(&mut self, solver: &PoissonSolver<D>) -> Result<bool, SolveError> {
        self.0.solution_to_faces(solver)
    }

    fn read_solution(&mut self, token: u64, x: &mut [f64]) -> Result<(), SolveError> {
        PoissonDevice::<D>::read_solution(&mut self.0, token, x)
    }
}

/// The device that keeps the particles between its passes (sorting them itself, the CPU reading them back
/// once a step) runs the simulation that sends and reads them every pass, bit for bit, where the CPU's sort
/// and the device's put every particle in the same half cell: the device sorts as the CPU does (by half
/// cell, each in index order) and counts per cell as it does. Here the cell size is a power of two, so the
/// device's single-precision key and the CPU's double-precision one agree. PIC, FLIP and APIC, in a closed
/// tank and in an open one that particles leave (the device drops them as the CPU's sort does), with two
/// substeps a step; both with the spinning ball, so that the host extrapolates the velocity in both runs
/// (without obstacles the device that keeps the particles extrapolates its copy in single precision:
/// `the_device_extrapolates_as_the_host_does`).
#[test]
fn keeping_the_particles_on_the_device_changes_no_bit() {
    let Some(gpu) = super::gpu() else { return };
    let run = |transfer: Transfer, boundary: Boundary, keep: bool| {
        let mut sim = splash(transfer, true);
        if boundary == Boundary::Open {
            let mut open = splash(transfer, true).config().clone();
            open.boundary = Boundary::Open;
            sim = block(open, [-2.0, 0.0, 0.0]);
            sim.add_obstacle(spinning_ball());
        }
        let mut passes = GpuTransfer::new(gpu.clone());
        passes.keep_particles(keep);
        sim.set_pressure_device(device::<3>().unwrap());
        sim.set_transfer_device(Box::new(passes));
        let mut counts = Vec::new();
        for _ in 0..4 {
            let dt = 2.0 * sim.max_dt(1.0);
            let rec = sim.step(dt).unwrap();
            counts.push(rec.scalar("particle_count").unwrap());
        }
        (sim.checksum(), counts, sim.field("density").unwrap().data)
    };
    for transfer in [Transfer::Pic, Transfer::Flip, Transfer::Apic] {
        for boundary in [Boundary::Closed, Boundary::Open] {
            let (kept, sent) = (
                run(transfer, boundary, true),
                run(transfer, boundary, false),
            );
            assert_eq!(kept.1, sent.1, "{transfer:?} {boundary:?}: particle counts");
            assert_eq!(kept.0, sent.0, "{transfer:?} {boundary:?}: particle state");
            assert!(kept.2 == sent.2, "{transfer:?} {boundary:?}: density");
        }
    }
    // The open tank lost particles, which the device dropped.
    let open = run(Transfer::Flip, Boundary::Open, true);
    assert!(open.1.last() < open.1.first(), "{:?}", open.1);
}

/// A run whose particles the device keeps resumes from a checkpoint bit for bit: the checkpoint holds the
/// particles in the device's order, the resumed simulation keeps that order, and the device's next sort starts
/// from it as the uninterrupted run's does; also when restored into a simulation that has run on. APIC, with
/// the spinning ball.
#[test]
fn a_run_kept_on_the_device_resumes_bit_for_bit() {
    if shared().is_none() {
        return;
    }
    let start = || {
        let mut sim = splash(Transfer::Apic, true);
        sim.set_pressure_device(device::<3>().unwrap());
        sim.set_transfer_device(gpu_transfer());
        sim
    };
    let steps = |sim: &mut FlipSim<3>, n: usize| {
        for _ in 0..n {
            let dt = 2.0 * sim.max_dt(1.0);
            sim.step(dt).unwrap();
        }
    };
    let mut whole = start();
    steps(&mut whole, 6);
    let mut first = start();
    steps(&mut first, 3);
    let state = first.save_state().unwrap();
    let mut resumed = start();
    resumed.restore_state(&state).unwrap();
    steps(&mut resumed, 3);
    assert_eq!(whole.checksum(), resumed.checksum());
    assert!(whole.field("density").unwrap().data == resumed.field("density").unwrap().data);
    // Restored into a simulation whose particles the device keeps, further on: the device takes the
    // restored ones.
    steps(&mut first, 2);
    first.restore_state(&state).unwrap();
    steps(&mut first, 3);
    assert_eq!(whole.checksum(), first.checksum());
}

/// Where the cell size is not a power of two, a particle within rounding of a half cell's side may sort into
/// the neighbouring half cell on the device (a single-precision key) and not on the CPU (double precision):
/// the two runs then sum some faces' terms in another order and part in the last bits. Either way they are the
/// same flow: the same particles, and the kinetic energy and momentum to 1e-5 of their scale after four steps
/// (rounding-level differences, which four steps of a splash amplify far less), on a 40 × 30 × 30 grid of
/// cells 1/40 across.
#[test]
fn keeping_the_particles_off_a_power_of_two_grid_keeps_the_flow() {
    let Some(gpu) = super::gpu() else { return };
    let run = |keep: bool| {
        let mut sim = splash_on(Transfer::Flip, false, [40, 30, 30], 1.0 / 40.0);
        let mut passes = GpuTransfer::new(gpu.clone());
        passes.keep_particles(keep);
        sim.set_pressure_device(device::<3>().unwrap());
        sim.set_transfer_device(Box::new(passes));
        let mut out = Vec::new();
        for _ in 0..4 {
            let dt = 2.0 * sim.max_dt(1.0);
            let rec = sim.step(dt).unwrap();
            out.push((
                rec.scalar("particle_count").unwrap(),
                rec.scalar("kinetic_energy").unwrap(),
                sim.momentum(),
                sim.particle_mass(),
            ));
        }
        out
    };
    let (kept, sent) = (run(true), run(false));
    for (step, (k, s)) in kept.iter().zip(&sent).enumerate() {
        assert_eq!(k.0, s.0, "step {step}: particles");
        let scale = s.1.max(1e-12);
        assert!(
            (k.1 - s.1).abs() <= 1e-5 * scale,
            "step {step}: energy {} and {}",
            k.1,
            s.1
        );
        // |Σ m v| ≤ √(2 E M) for the total mass M.
        let momentum = (2.0 * scale * s.3 * s.0).sqrt();
        for a in 0..3 {
            assert!(
                (k.2[a] - s.2[a]).abs() <= 1e-5 * momentum,
                "step {step}: momentum {:?} and {:?}",
                k.2,
                s.2
            );
        }
    }
}

/// With the particles left on the device between frames (`FlipSim::read_particles_per_frame`), the device
/// adds up the step's diagnostics in the CPU's order: every step reports what the run that reads the
/// particles back each step reports, bit for bit (the energy, the momentum, the largest speed and so the next
/// time step, the particle count of an open tank that particles leave), and once `complete_records` has
/// brought them back, the particles and the density are the same too. Before that the host holds the first
/// step's particles, which it did not read again. An impulse between steps brings them back first. PIC, FLIP
/// and APIC, closed and open tanks, two substeps a step (4 000–4 700 particles: five of the tally's chunks of
/// 1024, the last one short); FLIP also on a 32 × 24 × 24 tank of 35 000–38 000 particles.
#[test]
fn particles_left_on_the_device_between_frames_change_no_bit() {
    if shared().is_none() {
        return;
    }
    let run = |transfer: Transfer, boundary: Boundary, per_frame: bool, large: bool| {
        let (dims, h) = if large {
            ([32, 24, 24], 1.0 / 32.0)
        } else {
            ([16, 12, 12], 1.0 / 16.0)
        };
        let mut cfg = splash_on(transfer, true, dims, h).config().clone();
        cfg.boundary = boundary;
        let mut sim = FlipSim::new(cfg).unwrap();
        sim.fill(
            &Shape::Box {
                min: DVec3::ZERO,
                max: DVec3::new(0.35, 0.55, 0.75),
            },
            [-2.0, 0.0, 0.0],
        );
        sim.set_pressure_device(device::<3>().unwrap());
        sim.set_transfer_device(gpu_transfer());
        sim.read_particles_per_frame(per_frame);
        let mut records = Vec::new();
        let mut checksums = Vec::new();
        for step in 0..5 {
            if step == 3 {
                sim.apply_impulse(&[0.2, 0.3, 0.4], 0.2, &[0.0, 1.5, 0.0])
                    .unwrap();
            }
            let dt = 2.0 * sim.max_dt(1.0);
            let rec = sim.step(dt).unwrap();
            records.push(format!("{} {:?}", rec.dt, rec.quantities));
            checksums.push(sim.checksum());
        }
        let before = sim.checksum();
        assert_eq!(
            sim.save_state().is_ok(),
            !per_frame,
            "{transfer:?} {boundary:?}: a save with the particles on the device"
        );
        sim.complete_records(&mut []).unwrap();
        (
            records,
            checksums,
            before,
            sim.checksum(),
            sim.field("density").unwrap().data,
        )
    };
    let cases = [Transfer::Pic, Transfer::Flip, Transfer::Apic]
        .map(|t| (t, false))
        .into_iter()
        .chain([(Transfer::Flip, true)]);
    for (transfer, large) in cases {
        for boundary in [Boundary::Closed, Boundary::Open] {
            let (each, per_frame) = (
                run(transfer, boundary, false, large),
                run(transfer, boundary, true, large),
            );
            let what = format!("{transfer:?} {boundary:?} large {large}");
            for (step, (a, b)) in each.0.iter().zip(&per_frame.0).enumerate() {
                assert_eq!(a, b, "{what}: step {step}'s time step and quantities");
            }
            assert_eq!(each.3, per_frame.3, "{what}: particle state");
            assert!(each.4 == per_frame.4, "{what}: density");
            // Read back for the impulse before the fourth step, and after no step.
            let c = &per_frame.1;
            assert!(
                c[0] == c[1] && c[1] == c[2] && c[2] != c[3] && c[3] == c[4],
                "{what}: {c:?}"
            );
            assert_ne!(per_frame.2, per_frame.3, "{what}: read back before");
        }
    }
}

/// With the particles left on the device between frames, what the CPU changes between steps starts from the
/// particles the device moved: liquid poured in (`fill` replaces the particles inside its shape), an obstacle
/// added (it removes those inside it) and an emitter added (from then on the CPU seeds and sorts, so the
/// device's particles come back first). Each step reports what the run that reads the particles back after
/// every step reports, bit for bit, and the particles are the same at the end.
#[test]
fn changes_between_steps_start_from_the_particles_the_device_moved() {
    if shared().is_none() {
        return;
    }
    let run = |per_frame: bool| {
        let mut sim = splash(Transfer::Flip, false);
        sim.set_pressure_device(device::<3>().unwrap());
        sim.set_transfer_device(gpu_transfer());
        sim.read_particles_per_frame(per_frame);
        let mut records = Vec::new();
        let mut step = |sim: &mut FlipSim<3>| {
            let dt = 2.0 * sim.max_dt(1.0);
            let rec = sim.step(dt).unwrap();
            records.push(format!("{} {:?}", rec.dt, rec.quantities));
        };
        step(&mut sim);
        step(&mut sim);
        let pour = Shape::Box {
            min: DVec3::new(0.6, 0.5, 0.3),
            max: DVec3::new(0.8, 0.7, 0.6),
        };
        sim.fill(&pour, [0.0, -1.0, 0.0]);
        step(&mut sim);
        sim.add_obstacle(eddies::flip::Obstacle {
            shape: Shape::Sphere {
                center: DVec3::new(0.3, 0.1, 0.4),
                radius: 0.1,
            },
            velocity: [0.0; 3],
            angular_velocity: [0.0; 3],
            center: [0.3, 0.1, 0.4],
        });
        step(&mut sim);
        sim.add_inflow(eddies::flip::Inflow {
            shape: Shape::Sphere {
                center: DVec3::new(0.1, 0.6, 0.4),
                radius: 0.08,
            },
            velocity: [1.0, 0.0, 0.0],
            active: (0.0, 10.0),
        });
        step(&mut sim);
        step(&mut sim);
        sim.complete_records(&mut []).unwrap();
        (records, sim.checksum())
    };
    let (each, per_frame) = (run(false), run(true));
    for (step, (a, b)) in each.0.iter().zip(&per_frame.0).enumerate() {
        assert_eq!(a, b, "step {step}'s time step and quantities");
    }
    assert_eq!(each.1, per_frame.1, "particle state");
}

/// Two columns of liquid at the two ends of a closed tank: the volume correction, which treats the air as a
/// wall, solves for two closed bodies, each a group of its operator's null space. The device takes every
/// volume correction as well as every projection (it handed the corrections with two bodies or more back to
/// the CPU until it removed each group's mean).
#[test]
fn separate_bodies_are_corrected_on_the_device() {
    let Some(gpu) = super::gpu() else {
        return;
    };
    let dev = SharedPoisson(std::sync::Arc::new(std::sync::Mutex::new(
        GpuPoisson::new(gpu.clone()).unwrap(),
    )));
    let cfg = FlipConfig::<3> {
        resolution: [24, 12, 8],
        cell_size: 1.0 / 12.0,
        ..FlipConfig::default()
    };
    let mut sim = FlipSim::new(cfg).unwrap();
    for x in [0.0, 1.6] {
        sim.fill(
            &Shape::Box {
                min: DVec3::new(x, 0.0, 0.0),
                max: DVec3::new(x + 0.4, 0.7, 0.67),
            },
            [0.0; 3],
        );
    }
    sim.set_pressure_device(Box::new(dev.clone()));
    let mut substeps = 0;
    for _ in 0..4 {
        let dt = sim.max_dt(1.0);
        substeps += sim.step(dt).unwrap().substeps as usize;
    }
    // Each substep's projection and volume correction: these columns have some excess to correct at every
    // substep (a correction without any solves nothing).
    let solves = dev.0.lock().unwrap().take_times().solves;
    assert_eq!(
        solves,
        2 * substeps,
        "solves on the device in {substeps} substeps"
    );
}

/// Without obstacles the device that keeps the particles extrapolates the projected velocity into the air
/// itself, from the cells that hold its particles, and the host extrapolates its own copy only when the state
/// is read (`complete_records`). The two agree on every face to single-precision rounding: 1e-6 of the
/// largest speed (a mean of at most six f32 values, each rounded from the host's f64, differs by a few ulp),
/// the closed walls' faces exactly 0. The extrapolation reached many faces (the host's copy changed there).
/// FLIP and APIC, closed and open tanks in 3D; a closed 2D tank.
#[test]
fn the_device_extrapolates_as_the_host_does() {
    let Some(gpu) = super::gpu() else { return };
    for transfer in [Transfer::Flip, Transfer::Apic] {
        for boundary in [Boundary::Closed, Boundary::Open] {
            let mut cfg = splash(transfer, false).config().clone();
            cfg.boundary = boundary;
            let mut sim = block(cfg, [0.5, 0.0, 0.0]);
            sim.set_pressure_device(device::<3>().unwrap());
            compare_extrapolations(sim, 3, &format!("{transfer:?} {boundary:?}"));
        }
    }
    let mut tank = tank_2d();
    tank.set_pressure_device(Box::new(GpuPoisson::new(gpu.clone()).unwrap()));
    compare_extrapolations(tank, 8, "2D closed tank");
}

/// Runs `sim` (its pressure device set, no obstacles) `steps` steps with its particles kept on the suite's
/// GPU between frames, then checks the device's extrapolated face velocities against the host's
/// ([`the_device_extrapolates_as_the_host_does`]).
fn compare_extrapolations<const D: usize>(mut sim: FlipSim<D>, steps: usize, what: &str)
where
    FlipSim<D>: Simulation,
    SharedTransfer: eddies::flip::TransferDevice<D>,
{
    let passes = SharedTransfer(Arc::new(Mutex::new(GpuTransfer::new(
        super::gpu().unwrap().clone(),
    ))));
    sim.set_transfer_device(Box::new(passes.clone()));
    sim.read_particles_per_frame(true);
    for _ in 0..steps {
        let dt = 2.0 * sim.max_dt(1.0);
        sim.step(dt).unwrap();
    }
    let faces = |sim: &FlipSim<D>| -> Vec<f64> {
        sim.grid_velocity()
            .u
            .iter()
            .flat_map(|g| g.data.iter().copied())
            .collect()
    };
    let before = faces(&sim);
    sim.complete_records(&mut []).unwrap();
    let after = faces(&sim);
    let device = passes.0.lock().unwrap().face_velocities().unwrap();
    assert_eq!(after.len(), device.len(), "{what}: faces");
    let closed = sim.config().boundary == Boundary::Closed;
    let wall = sim.grid_velocity().u.iter().enumerate().flat_map(|(k, g)| {
        (0..g.data.len()).map(move |i| {
            let c = g.coords(i)[k];
            closed && (c == 0 || c + 1 == g.dims[k])
        })
    });
    let top = after.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let reached = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    let mut worst = 0.0f64;
    for (f, ((&h, &d), wall)) in after.iter().zip(&device).zip(wall).enumerate() {
        worst = worst.max((h - d as f64).abs());
        if wall {
            assert_eq!(d, 0.0, "{what}: wall face {f}");
        }
    }
    println!(
        "{what}: {reached} faces extrapolated, largest difference {:.2e} of {top:.3} m/s",
        worst / top
    );
    assert!(reached > 100, "{what}: only {reached} faces extrapolated");
    assert!(
        worst <= 1e-6 * top,
        "{what}: the device differs by {worst:e} m/s (top {top})"
    );
}
