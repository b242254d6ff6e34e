//! Vortex particles on the GPU: the velocity evaluation, the method's cost (Gourlay part 8).
//!
//! [`DirectSum`] is Biot–Savart by direct summation (`direct.wgsl`): the velocity, and for stretching its
//! gradient, at any targets from every vorton, with the mollified kernel of the CPU's
//! [`eddies::vpm::biot_savart`]; or the vector potential whose curl that velocity is (the Poisson
//! technique's boundary values). A tiled N-body kernel: each workgroup streams the vortons through shared
//! memory and each target adds them in index order, so the sums have one fixed order and a run repeats bit
//! for bit on one device. The CPU sums the same terms in sixteen lanes, so the two agree to f32 rounding,
//! not bit for bit. The vortons' sums and the tracers' of a step's stage take one round trip
//! ([`DirectSum::evaluate_both`]).
//!
//! [`GpuSplat`] shares the vortons' vorticity out to the Poisson technique's grid, by cloud-in-cell or by
//! each vorton's Gaussian, a gather over the device's counting sort; [`GpuSampling`] takes the curl of its vector potential and samples the
//! grid's velocity at the vortons and tracers; [`GpuBaroclinic`] takes the baroclinic stage's density splat
//! and gradient; [`GpuExchange`] takes the particle strength exchange's substeps.

use std::sync::{Arc, Mutex};

mod baroclinic;
mod pse;
mod rhs;
mod sampling;
mod splat;
pub use baroclinic::GpuBaroclinic;
pub use pse::{max_exchange_bins, GpuExchange};
pub use sampling::GpuSampling;
pub use splat::GpuSplat;

use eddies::vpm::biot_savart::{DirectDevice, Sources, Targets, FOUR_PI_INV};
use eddies::vpm::mollify::FittedGrid;
use eddies::vpm::velocity::SharedDevice;
use glam::DVec3;

use crate::device::{dispatch, Gpu, GpuError, Scratch};
use crate::pressure::GpuPoisson;

/// The Poisson technique's splat, vector solve, and curl with the sampling, on `gpu`. With `shared` (as
/// `--backend gpu` runs them) they share one field, so that the technique's grids stay on the device
/// between the stages: the splat forms the solve's right-hand sides there from the vorticity it keeps
/// ([`GpuSplat::share_field`]), and the solver leaves its solutions there for the sampling's curl
/// ([`GpuSampling::share_field`]); without, each stage sends its grids across the bus.
///
/// # Errors
/// As [`GpuPoisson::new`].
pub fn poisson_stages(
    gpu: &Arc<Gpu>,
    shared: bool,
) -> Result<(GpuSplat, GpuPoisson, GpuSampling), GpuError> {
    let mut splat = GpuSplat::new(gpu.clone());
    let mut solve = GpuPoisson::new(gpu.clone())?;
    let mut sampling = GpuSampling::new(gpu.clone());
    if shared {
        let field = Scratch::new();
        splat.share_field(field.clone());
        sampling.share_field(field.clone());
        solve.share_faces(field);
    }
    Ok((splat, solve, sampling))
}

/// The kernel's WGSL, after the prelude.
pub(crate) const SOURCE: &str = include_str!("direct.wgsl");

/// Targets per workgroup, and sources per shared-memory tile.
pub const TILE: u32 = 256;

/// The kernel that adds the chunks' partial sums (`chunks.wgsl`), after the prelude.
pub(crate) const CHUNKS: &str = include_str!("chunks.wgsl");

/// Workgroups an evaluation aims for: with fewer targets than fill them, the vortons are split into chunks,
/// each summed by workgroups of its own, and the chunks' partial sums added in chunk order.
pub const FILL_GROUPS: usize = 1024;

/// The fewest vortons a chunk holds.
const MIN_CHUNK: usize = 4 * TILE as usize;

/// How `sources` vortons are split for `targets` targets: (vortons per chunk, a multiple of [`TILE`];
/// chunks).
pub(crate) fn chunks(sources: usize, targets: usize) -> (usize, usize) {
    let groups = targets.div_ceil(TILE as usize * per_invocation(targets) as usize);
    let wanted = (FILL_GROUPS / groups.max(1)).clamp(1, sources.div_ceil(MIN_CHUNK).max(1));
    let chunk = sources
        .div_ceil(wanted)
        .next_multiple_of(TILE as usize)
        .max(TILE as usize);
    (chunk, sources.div_ceil(chunk).max(1))
}

/// From this many targets on, each invocation sums for two: half the shared-memory reads a pair, with
/// still at least a thousand workgroups to spread over the device.
pub const TWO_PER_INVOCATION: usize = 1 << 19;

/// Targets per invocation for `targets` targets.
pub(crate) fn per_invocation(targets: usize) -> u32 {
    if targets >= TWO_PER_INVOCATION {
        2
    } else {
        1
    }
}

/// The kernels' parameters (`direct.wgsl`, `chunks.wgsl`): vortons and targets; vortons per chunk (a
/// multiple of TILE) and chunks. Workgroup row y of the sum takes chunk y into slots y·targets + i, and the
/// second kernel adds the chunks in order.
const PARAMS: &str =
    "struct Params {\n    sources: u32,\n    targets: u32,\n    chunk: u32,\n    chunks: u32,\n}\n";

/// What a direct sum computes at its targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Summed {
    /// The velocity.
    Velocity,
    /// The velocity and its gradient.
    Gradient,
    /// The vector potential whose curl is the velocity (the Poisson technique's boundary values).
    Potential,
}

impl Summed {
    /// The velocity, with `gradient` its gradient too.
    fn of(gradient: bool) -> Self {
        if gradient {
            Summed::Gradient
        } else {
            Summed::Velocity
        }
    }

    fn name(self) -> &'static str {
        match self {
            Summed::Velocity => "velocity",
            Summed::Gradient => "gradient",
            Summed::Potential => "potential",
        }
    }
}

/// The prelude of the kernels for `what`, `per` targets an invocation.
pub(crate) fn prelude(what: Summed, per: u32) -> String {
    let gradient = what == Summed::Gradient;
    let potential = what == Summed::Potential;
    format!(
        "const TILE: u32 = {TILE}u;\nconst PER: u32 = {per}u;\nconst GRADIENT: bool = {gradient};\n\
         const POTENTIAL: bool = {potential};\n{PARAMS}"
    )
}

/// What one evaluation returns: velocity (m/s) at each target and, when asked for, its gradient (1/s,
/// row-major `∂uᵢ/∂x_k`), the factor 1/4π applied.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Induced {
    /// Velocity at each target.
    pub velocity: Vec<[f32; 3]>,
    /// Velocity gradient at each target; empty unless asked for.
    pub gradient: Vec<[f32; 9]>,
}

/// Biot–Savart by direct summation on the GPU; its buffers grow to the largest evaluation and are reused.
pub struct DirectSum {
    /// The vortons as uploaded, reused across evaluations.
    packed: Vec<[f32; 4]>,
    sources: Option<wgpu::Buffer>,
    /// The target sets of an evaluation: the vortons' (or the points'), and the tracers' that
    /// [`evaluate_both`](Self::evaluate_both) sums in the same submission.
    sets: [TargetSet; 2],
}

/// One set of targets of an evaluation: its parameters, its points as uploaded, and its buffers.
struct TargetSet {
    points: Vec<[f32; 4]>,
    params: wgpu::Buffer,
    targets: Option<wgpu::Buffer>,
    velocity: Option<wgpu::Buffer>,
    gradient: Option<wgpu::Buffer>,
}

impl TargetSet {
    fn new(gpu: &Gpu) -> Self {
        Self {
            points: Vec::new(),
            params: gpu.uniform::<[u32; 4]>("vpm direct params"),
            targets: None,
            velocity: None,
            gradient: None,
        }
    }

    fn bytes(&self) -> u64 {
        [&self.targets, &self.velocity, &self.gradient]
            .into_iter()
            .flatten()
            .map(wgpu::Buffer::size)
            .sum::<u64>()
            + self.params.size()
    }
}

/// Bytes of device memory of `buffers` and `params`.
fn held(buffers: &[Option<wgpu::Buffer>], params: &wgpu::Buffer) -> u64 {
    buffers
        .iter()
        .flatten()
        .map(wgpu::Buffer::size)
        .sum::<u64>()
        + params.size()
}

/// Points or bins per axis as a uniform's `vec4<u32>`, 1 beyond the three.
fn dims4(dims: impl IntoIterator<Item = u64>) -> [u32; 4] {
    let mut out = [1u32; 4];
    for (d, g) in out.iter_mut().zip(dims) {
        *d = g as u32;
    }
    out
}

/// What a device hook of the simulation returns for a stage the device ran (`Ok` of whether it took it):
/// `false` also where the stage is beyond the device ([`GpuError::Limit`]: the CPU takes it), or how the
/// device failed.
fn taken(result: Result<bool, GpuError>) -> Result<bool, String> {
    match result {
        Ok(t) => Ok(t),
        Err(GpuError::Limit(_)) => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// A point's cloud-in-cell stencil on `grid` as the device kernels read it: the fractions along each axis
/// (from the CPU's own [`FittedGrid::cic`] in f64, rounded to f32) and, in the fourth number, the bits of
/// the index of its lowest grid point.
fn stencil(grid: &FittedGrid, p: DVec3) -> [f32; 4] {
    let [nx, ny, _] = grid.dims;
    let (c, f) = grid.cic(p);
    let key = (c[0] + nx * (c[1] + ny * c[2])) as u32;
    [f[0] as f32, f[1] as f32, f[2] as f32, f32::from_bits(key)]
}

/// `buffer` if it holds `bytes`, else a new one of that size.
fn sized(gpu: &Gpu, slot: &mut Option<wgpu::Buffer>, label: &str, bytes: u64) -> wgpu::Buffer {
    let bytes = bytes.max(16);
    match slot {
        Some(b) if b.size() >= bytes => b.clone(),
        _ => {
            let b = gpu.buffer(label, bytes.next_power_of_two());
            *slot = Some(b.clone());
            b
        }
    }
}

/// The buffers of `slots`, each grown where it holds fewer than its entry of `sizes` (bytes; `labels` name
/// them), after checking every size against the adapter's binding limit; `what` names them all when the
/// device runs out of memory.
fn sized_all(
    gpu: &Gpu,
    what: &str,
    slots: &mut [Option<wgpu::Buffer>],
    labels: &[&str],
    sizes: &[u64],
) -> Result<Vec<wgpu::Buffer>, GpuError> {
    for (label, &bytes) in labels.iter().zip(sizes) {
        gpu.check_binding(label, bytes)?;
    }
    gpu.allocating(what, || {
        slots
            .iter_mut()
            .zip(labels.iter().zip(sizes))
            .map(|(slot, (label, &bytes))| sized(gpu, slot, label, bytes))
            .collect()
    })
}

impl DirectSum {
    /// The kernel's buffers on `gpu` (the pipelines are built at the first evaluation and cached by `gpu`).
    pub fn new(gpu: &Gpu) -> Self {
        Self {
            packed: Vec::new(),
            sources: None,
            sets: [TargetSet::new(gpu), TargetSet::new(gpu)],
        }
    }

    /// Device memory held (bytes).
    pub fn bytes(&self) -> u64 {
        self.sources.as_ref().map_or(0, wgpu::Buffer::size)
            + self.sets.iter().map(TargetSet::bytes).sum::<u64>()
    }

    /// The velocity induced by the first `sources.len` vortons of `sources` at `targets` (m, relative to the
    /// sources' origin), and with `gradient` its gradient.
    pub fn evaluate(
        &mut self,
        gpu: &Gpu,
        sources: &Sources,
        targets: &[[f32; 3]],
        gradient: bool,
    ) -> Result<Induced, GpuError> {
        let [out, _] = self.sum(
            gpu,
            sources,
            [(targets, Summed::of(gradient)), (&[], Summed::Velocity)],
        )?;
        Ok(out)
    }

    /// [`evaluate`](Self::evaluate) at two sets of targets, each `(targets, gradient)`, from one upload of
    /// the vortons, in one submission and one read-back: the vortons' and the tracers' velocities of a step's
    /// stage in one round trip. Each set gets the bits that `evaluate` gives it alone; a set without targets
    /// gets nothing.
    pub fn evaluate_both(
        &mut self,
        gpu: &Gpu,
        sources: &Sources,
        sets: [(&[[f32; 3]], bool); 2],
    ) -> Result<[Induced; 2], GpuError> {
        self.sum(gpu, sources, sets.map(|(t, g)| (t, Summed::of(g))))
    }

    /// The vector potential (m²/s) of the first `sources.len` vortons of `sources` at `targets` (m, relative
    /// to the sources' origin), `(1/4π) Σ αⱼ h(|x − xⱼ|²)` as the CPU's
    /// [`potential_direct`](eddies::vpm::biot_savart::potential_direct) sums it.
    pub fn potential(
        &mut self,
        gpu: &Gpu,
        sources: &Sources,
        targets: &[[f32; 3]],
    ) -> Result<Vec<[f32; 3]>, GpuError> {
        let [out, _] = self.sum(
            gpu,
            sources,
            [(targets, Summed::Potential), (&[], Summed::Velocity)],
        )?;
        Ok(out.velocity)
    }

    /// What each set asks of the first `sources.len` vortons of `sources` at its targets (the potential in
    /// `velocity`'s place), every set's launches in one submission; a set without targets gets nothing.
    fn sum(
        &mut self,
        gpu: &Gpu,
        sources: &Sources,
        asked: [(&[[f32; 3]], Summed); 2],
    ) -> Result<[Induced; 2], GpuError> {
        let n = sources.len;
        if asked.iter().all(|(t, _)| t.is_empty()) {
            return Ok(Default::default());
        }
        self.packed.clear();
        self.packed.extend((0..n).flat_map(|k| {
            [
                [sources.x[k], sources.y[k], sources.z[k], sources.s2[k]],
                [sources.ax[k], sources.ay[k], sources.az[k], 0.0],
            ]
        }));
        let source_bytes = 32 * n as u64;
        gpu.check_binding("vortons", source_bytes)?;
        let src_buf = gpu.allocating("vortons", || {
            sized(gpu, &mut self.sources, "vpm vortons", source_bytes)
        })?;
        gpu.write(&src_buf, &self.packed);
        let mut encoder = gpu
            .device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("vpm direct"),
            });
        // Per set with targets: its index, its velocity buffer and bytes, and its gradient's where asked for.
        let mut reads = Vec::new();
        for (k, (set, &(targets, what))) in self.sets.iter_mut().zip(&asked).enumerate() {
            if !targets.is_empty() {
                let (velocity, gradient) =
                    set.record(gpu, &src_buf, n, targets, what, &mut encoder)?;
                reads.push((k, velocity, gradient));
            }
        }
        gpu.queue().submit([encoder.finish()]);
        let mut ranges = Vec::new();
        for (_, velocity, gradient) in &reads {
            ranges.push((&velocity.0, 0, velocity.1));
            if let Some(g) = gradient {
                ranges.push((&g.0, 0, g.1));
            }
        }
        let mut bytes = gpu.read(&ranges)?.into_iter();
        let k = FOUR_PI_INV as f32;
        let words = |b: &[u8]| bytemuck::pod_collect_to_vec::<u8, f32>(b);
        let mut out: [Induced; 2] = Default::default();
        for (set, _, gradient) in &reads {
            let o = &mut out[*set];
            let v = bytes.next().expect("the velocity's bytes");
            o.velocity = words(&v)
                .chunks_exact(4)
                .map(|v| [v[0] * k, v[1] * k, v[2] * k])
                .collect();
            if gradient.is_some() {
                let g = bytes.next().expect("the gradient's bytes");
                o.gradient = words(&g)
                    .chunks_exact(9)
                    .map(|j| std::array::from_fn(|q| j[q] * k))
                    .collect();
            }
        }
        Ok(out)
    }
}

/// A buffer to read back and its bytes.
type Readback = (wgpu::Buffer, u64);

impl TargetSet {
    /// Uploads `targets` and this set's parameters for `n` vortons in `sources`, and records the sum of
    /// `what` (and its chunks' addition) into `encoder`; returns what to read back: the velocity (or
    /// potential) and, where asked, the gradient.
    fn record(
        &mut self,
        gpu: &Gpu,
        sources: &wgpu::Buffer,
        n: usize,
        targets: &[[f32; 3]],
        what: Summed,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<(Readback, Option<Readback>), GpuError> {
        let gradient = what == Summed::Gradient;
        let m = targets.len();
        self.points.clear();
        self.points
            .extend(targets.iter().map(|t| [t[0], t[1], t[2], 0.0]));
        let (chunk, split) = chunks(n, m);
        let target_bytes = 16 * m as u64;
        let gradient_bytes = if gradient { 36 * m as u64 } else { 4 };
        // Each chunk's partial sums, the first chunk's slots receiving the totals.
        let partial_bytes = target_bytes * split as u64;
        let partial_gradient_bytes = if gradient {
            gradient_bytes * split as u64
        } else {
            4
        };
        for (what, bytes) in [
            ("targets", partial_bytes),
            ("gradient", partial_gradient_bytes),
        ] {
            gpu.check_binding(what, bytes)?;
        }
        let (tgt_buf, vel_buf, grad_buf) = gpu.allocating("vortons", || {
            (
                sized(gpu, &mut self.targets, "vpm targets", target_bytes),
                sized(gpu, &mut self.velocity, "vpm velocity", partial_bytes),
                sized(
                    gpu,
                    &mut self.gradient,
                    "vpm gradient",
                    partial_gradient_bytes,
                ),
            )
        })?;
        gpu.write(
            &self.params,
            &[[n as u32, m as u32, chunk as u32, split as u32]],
        );
        gpu.write(&tgt_buf, &self.points);
        let per = per_invocation(m);
        let key = &format!("vpm direct {} {per}", what.name());
        let pipeline = gpu.pipeline(key, &prelude(what, per), SOURCE)?;
        let bind = gpu.validating(key, || {
            Ok(gpu.bind(
                &pipeline,
                &[&self.params, sources, &tgt_buf, &vel_buf, &grad_buf],
            ))
        })?;
        dispatch(
            encoder,
            key,
            &pipeline,
            &bind,
            [(m as u32).div_ceil(TILE * per), split as u32, 1],
            None,
        );
        if split > 1 {
            let key = &format!("vpm direct chunks {}", what.name());
            let pipeline = gpu.pipeline(key, &prelude(what, 1), CHUNKS)?;
            let bind = gpu.validating(key, || {
                Ok(gpu.bind(&pipeline, &[&self.params, &vel_buf, &grad_buf]))
            })?;
            dispatch(
                encoder,
                key,
                &pipeline,
                &bind,
                [(m as u32).div_ceil(TILE), 1, 1],
                None,
            );
        }
        Ok((
            (vel_buf, target_bytes),
            gradient.then_some((grad_buf, gradient_bytes)),
        ))
    }
}

/// [`DirectSum`] as the vortex particle simulation's direct-sum device
/// (`eddies::vpm::VpmSim::set_direct_device`): the velocity stage's direct sums on the GPU.
pub struct GpuDirect {
    gpu: Arc<Gpu>,
    sum: DirectSum,
    /// The targets relative to the vortons' origin, reused across evaluations: the vortons' (or the
    /// points'), and the tracers'.
    relative: [Vec<[f32; 3]>; 2],
}

impl GpuDirect {
    /// The device for a simulation, on `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let sum = DirectSum::new(&gpu);
        Self {
            gpu,
            sum,
            relative: Default::default(),
        }
    }

    /// As the simulation holds it.
    pub fn shared(gpu: Arc<Gpu>) -> SharedDevice {
        SharedDevice(Arc::new(Mutex::new(Self::new(gpu))))
    }

    /// `targets` relative to the origin of `src`, in f32, into `relative[set]`.
    fn relative_to(&mut self, set: usize, src: &Sources, targets: &[DVec3]) {
        let out = &mut self.relative[set];
        out.clear();
        out.extend(
            targets
                .iter()
                .map(|p| (*p - src.origin).as_vec3().to_array()),
        );
    }
}

/// `induced` into the simulation's f64 velocities `u` and, where asked, gradients `jac`.
fn widen(induced: &Induced, u: &mut [DVec3], jac: Option<&mut [[f64; 9]]>) {
    for (o, v) in u.iter_mut().zip(&induced.velocity) {
        *o = DVec3::new(v[0] as f64, v[1] as f64, v[2] as f64);
    }
    if let Some(jac) = jac {
        for (o, g) in jac.iter_mut().zip(&induced.gradient) {
            *o = g.map(f64::from);
        }
    }
}

impl DirectDevice for GpuDirect {
    fn direct(
        &mut self,
        src: &Sources,
        targets: &[DVec3],
        u: &mut [DVec3],
        jac: Option<&mut [[f64; 9]]>,
    ) -> Result<(), String> {
        self.relative_to(0, src, targets);
        let out = self
            .sum
            .evaluate(&self.gpu, src, &self.relative[0], jac.is_some())
            .map_err(|e| e.to_string())?;
        widen(&out, u, jac);
        Ok(())
    }

    /// Both sets in one submission and one read-back ([`DirectSum::evaluate_both`]).
    fn direct_both(&mut self, src: &Sources, sets: [Targets<'_>; 2]) -> Result<(), String> {
        for (k, set) in sets.iter().enumerate() {
            self.relative_to(k, src, set.at);
        }
        let [first, second] = &self.relative;
        let out = self
            .sum
            .evaluate_both(
                &self.gpu,
                src,
                [
                    (first, sets[0].jac.is_some()),
                    (second, sets[1].jac.is_some()),
                ],
            )
            .map_err(|e| e.to_string())?;
        for (set, induced) in sets.into_iter().zip(&out) {
            widen(induced, set.u, set.jac);
        }
        Ok(())
    }

    fn potential(
        &mut self,
        src: &Sources,
        targets: &[DVec3],
        out: &mut [DVec3],
    ) -> Result<(), String> {
        self.relative_to(0, src, targets);
        let a = self
            .sum
            .potential(&self.gpu, src, &self.relative[0])
            .map_err(|e| e.to_string())?;
        for (o, a) in out.iter_mut().zip(&a) {
            *o = DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::validate_wgsl;

    /// Few targets split the vortons into whole tiles, at least `MIN_CHUNK` each, that cover them all; many
    /// targets leave them whole.
    #[test]
    fn chunks_cover_the_vortons() {
        for (n, m) in [
            (16_000, 36_000),
            (3000, 1000),
            (40, 600_000),
            (10, 5),
            (0, 7),
            (1_000_000, 1_000_000),
        ] {
            let (chunk, split) = chunks(n, m);
            assert!(
                chunk % TILE as usize == 0 && chunk >= TILE as usize,
                "{n} at {m}: {chunk}"
            );
            assert!(
                split * chunk >= n && (split - 1) * chunk < n.max(1),
                "{n} at {m}: {split} x {chunk}"
            );
            assert!(
                split == 1 || chunk >= MIN_CHUNK,
                "{n} at {m}: chunks of {chunk}"
            );
        }
        // dye-drop's sums: 141 workgroups of targets, split until they are near FILL_GROUPS.
        let (_, split) = chunks(16_000, 36_000);
        assert!(
            141 * split > FILL_GROUPS / 2 && 141 * split <= FILL_GROUPS,
            "{split}"
        );
        assert_eq!(chunks(1_000_000, 1_000_000).1, 1);
    }

    /// Every variant parses and validates without a GPU.
    #[test]
    fn the_kernel_compiles_without_a_gpu() {
        for what in [Summed::Velocity, Summed::Gradient, Summed::Potential] {
            for per in [1, 2] {
                let code = format!("{}\n{SOURCE}", prelude(what, per));
                validate_wgsl(&code)
                    .unwrap_or_else(|e| panic!("{what:?}, {per} per invocation: {e}"));
            }
            let code = format!("{}\n{CHUNKS}", prelude(what, 1));
            validate_wgsl(&code).unwrap_or_else(|e| panic!("chunks, {what:?}: {e}"));
        }
    }
}
