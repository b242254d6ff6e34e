//! Viscous diffusion by particle strength exchange (PSE; Degond & Mas-Gallic 1989, as in Gourlay parts 3
//! and 12).
//!
//! The Laplacian is replaced by an integral operator that vortons evaluate among their neighbours:
//!
//! `dαᵢ/dt = (ν/ε²) Σⱼ (Vᵢ αⱼ − Vⱼ αᵢ) η_ε(|xᵢ − xⱼ|)`,  `η_ε(r) = 4/(π^{3/2} ε³) · exp(−r²/ε²)`,
//!
//! with `ε² = (σᵢ² + σⱼ²)/2`. The Gaussian η has second moment 2 per axis, so the sum tends to `ν V ∇²ω`; it
//! falls off with distance, so sparse vortons exchange little (part 12's fix for vortons spread over many grid
//! cells), and it is cut off at r = 3ε (η below 10⁻⁴ of its peak). Each pair term is antisymmetric, so the
//! total strength Σ αᵢ is conserved up to rounding.
//!
//! Part 12 makes its scatter loop race-free with odd/even slab passes; here each vorton *gathers* from its
//! neighbours into a new array, which needs no passes at all and is deterministic by construction: the
//! neighbours are visited in a fixed order (27 bins in order, each bin in sorted order).

use super::state::Vortons;
use crate::par;
use glam::{DVec3, I64Vec3, U64Vec3};
use multiversion::multiversion;
use rayon::prelude::*;
use std::ops::{Add, Mul, Sub};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Vortons per parallel chunk.
const CHUNK: usize = 256;

/// Cut-off of the exchange kernel, in units of ε.
pub const CUTOFF: f64 = 3.0;

/// The bins of the neighbour search: cubes of edge [`CUTOFF`] times the largest core radius.
#[derive(Clone, Copy, Debug)]
struct NeighbourBins {
    lo: DVec3,
    size: f64,
    dims: U64Vec3,
}

impl NeighbourBins {
    fn cell(&self, p: DVec3) -> U64Vec3 {
        ((p - self.lo) / self.size)
            .floor()
            .as_u64vec3()
            .min(self.dims - U64Vec3::ONE)
    }

    fn key(&self, c: U64Vec3) -> u64 {
        (c.z * self.dims.y + c.y) * self.dims.x + c.x
    }
}

/// One exchange handed to an [`ExchangeDevice`]: the vortons with their bins, and the explicit substeps to
/// take.
#[derive(Clone, Copy, Debug)]
pub struct Exchange<'a> {
    /// Each vorton's bin: `(z · dims[1] + y) · dims[0] + x` of the cube that holds it.
    pub keys: &'a [u64],
    /// Bins along each axis: cubes of edge [`CUTOFF`] times the largest core radius, from the vortons' lower
    /// corner.
    pub dims: [u64; 3],
    /// The binning's identity: exchanges of one binning see the same vortons (positions, radii, volumes)
    /// and keys, so a device may keep what it made of them; no two binnings share one, in any simulation.
    pub binning: u64,
    /// The vortons' positions (m), core radii (m) and volumes (m³).
    pub position: &'a [DVec3],
    pub radius: &'a [f64],
    pub volume: &'a [f64],
    /// Numbers per vorton of the content: 3 (strength, ω V) or 1 (heat, T V).
    pub width: usize,
    /// Diffusivity times the substep (m²).
    pub coef: f64,
    /// Explicit substeps.
    pub steps: usize,
}

/// A device that takes the exchange's substeps in place of the CPU's loops (the GPU backend's
/// `eddies_gpu::vpm::GpuExchange`): the same pair terms, each vorton gathering from its 27 bins in a fixed
/// order (the bins in key order, each bin's vortons in index order, as on the CPU), so the pair terms stay
/// antisymmetric and the total is conserved to rounding.
pub trait ExchangeDevice: Send {
    /// `pass.steps` exchanges of `content` (`pass.width` numbers per vorton, `width · i + c`), in place.
    /// `Ok(false)` leaves the pass to the CPU (a device that cannot take it); the error says how the
    /// device failed.
    fn exchange(&mut self, pass: &Exchange<'_>, content: &mut [f64]) -> Result<bool, String>;
}

/// An [`ExchangeDevice`] shared by the simulation's copies.
#[derive(Clone)]
pub struct SharedExchangeDevice(pub Arc<Mutex<dyn ExchangeDevice>>);

impl std::fmt::Debug for SharedExchangeDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedExchangeDevice")
    }
}

/// Buffers of the PSE stage, reused across steps.
#[derive(Clone, Debug, Default)]
pub struct Pse {
    /// The bins of the last binning, if they are still the vortons'.
    binned: Option<Binning>,
    /// Each vorton's bin key.
    keys: Vec<u64>,
    /// (bin key, vorton) sorted: the CPU's neighbour lists, made from `keys` when the CPU exchanges.
    bins: Vec<(u64, u32)>,
    strength: Vec<DVec3>,
    next: Vec<DVec3>,
    content: Vec<f64>,
    next_content: Vec<f64>,
    /// Where the exchanges run: a device (the GPU), or the CPU without one.
    pub device: Option<SharedExchangeDevice>,
    /// How the device failed at the last exchange, if it did.
    pub device_error: Option<String>,
}

/// The bins of the vortons as [`Pse`] last binned them.
#[derive(Clone, Copy, Debug)]
struct Binning {
    bins: NeighbourBins,
    /// [`Exchange::binning`].
    id: u64,
    /// Whether `Pse::bins` holds the sorted list.
    sorted: bool,
}

/// The next [`Exchange::binning`]: one counter for every [`Pse`], so that simulations sharing a device
/// never pass it the same one for different vortons.
static NEXT_BINNING: AtomicU64 = AtomicU64::new(0);

impl Pse {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.keys.capacity() * 8
            + self.bins.capacity() * 16
            + (self.strength.capacity() + self.next.capacity()) * 24
            + (self.content.capacity() + self.next_content.capacity()) * 8
    }

    /// Number of explicit substeps that keep the exchange stable for diffusivity `nu` (m²/s) over `dt` (s).
    pub fn substeps(v: &Vortons, nu: f64, dt: f64) -> usize {
        let s_min = v.radius.iter().copied().fold(f64::INFINITY, f64::min);
        if !(s_min.is_finite() && s_min > 0.0) {
            return 1;
        }
        // Σⱼ Vⱼ η ≈ ∫η = 4 for well-spaced vortons: keep 4 ν dt/ε² ≤ 1/2.
        ((8.0 * nu * dt / (s_min * s_min)).ceil() as usize).max(1)
    }

    /// Forgets the bins of the last exchange: the vortons have moved or changed, and the next exchange of
    /// [`diffuse_kept`](Self::diffuse_kept) or [`diffuse_heat_kept`](Self::diffuse_heat_kept) bins them
    /// anew.
    pub fn forget_bins(&mut self) {
        self.binned = None;
    }

    /// Bins the vortons `v` anew, for the kept exchanges that follow, with the CPU exchange's sorted
    /// neighbour list when `sorted` (a device needs the keys alone): the stage's host work on its own, for
    /// timing it.
    pub fn bin_now(&mut self, v: &Vortons, sorted: bool) {
        self.forget_bins();
        self.bin(v);
        if sorted {
            self.sort();
        }
    }

    /// The bins of the vortons `v`: those kept from the last exchange, or new ones.
    fn bin(&mut self, v: &Vortons) -> Binning {
        if let Some(b) = self.binned {
            if self.keys.len() == v.len() {
                return b;
            }
        }
        // Extremes are one whatever the order in which the threads meet them.
        let s_max = v.radius.par_iter().copied().reduce(|| 0.0f64, f64::max);
        let (lo, hi) = v
            .position
            .par_iter()
            .fold(
                || (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
                |(lo, hi), &p| (lo.min(p), hi.max(p)),
            )
            .reduce(
                || (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
                |(a, b), (c, d)| (a.min(c), b.max(d)),
            );
        let size = CUTOFF * s_max;
        let dims = ((hi - lo) / size).floor().as_u64vec3() + U64Vec3::ONE;
        let bins = NeighbourBins { lo, size, dims };
        self.keys.clear();
        self.keys
            .par_extend(v.position.par_iter().map(|&p| bins.key(bins.cell(p))));
        let b = Binning {
            bins,
            id: NEXT_BINNING.fetch_add(1, Ordering::Relaxed),
            sorted: false,
        };
        self.binned = Some(b);
        b
    }

    /// The sorted (bin key, vorton) list of the CPU's exchange, made once per binning.
    fn sort(&mut self) -> NeighbourBins {
        let b = self.binned.as_mut().expect("binned before the exchange");
        if !b.sorted {
            self.bins.clear();
            self.bins.par_extend(
                self.keys
                    .par_iter()
                    .enumerate()
                    .map(|(i, &k)| (k, i as u32)),
            );
            // (key, vorton) pairs are distinct: the sorted order is one, whatever the threads.
            self.bins.par_sort_unstable();
            b.sorted = true;
        }
        b.bins
    }

    /// `steps` exchanges of `content` (`width` numbers per vorton) with coefficient `coef` on the device, if
    /// there is one and it takes them: whether it did. A device failure is kept in `device_error`.
    fn on_device(
        &mut self,
        v: &Vortons,
        binning: Binning,
        width: usize,
        coef: f64,
        steps: usize,
        content: &mut [f64],
    ) -> bool {
        let Some(device) = &self.device else {
            return false;
        };
        let pass = Exchange {
            keys: &self.keys,
            dims: binning.bins.dims.to_array(),
            binning: binning.id,
            position: &v.position,
            radius: &v.radius,
            volume: &v.volume,
            width,
            coef,
            steps,
        };
        let mut device = device.0.lock().unwrap_or_else(|p| p.into_inner());
        match device.exchange(&pass, content) {
            Ok(taken) => taken,
            Err(e) => {
                self.device_error = Some(e);
                true
            }
        }
    }

    /// Diffuses the vortons' vorticity over `dt` seconds with kinematic viscosity `nu` (m²/s): the exchange
    /// of strength α = ω V.
    pub fn diffuse(&mut self, v: &mut Vortons, nu: f64, dt: f64) {
        self.forget_bins();
        self.diffuse_kept(v, nu, dt);
    }

    /// As [`diffuse`](Self::diffuse), with the bins of the last exchange if it was of the same vortons (in
    /// the same places, with the same radii and volumes) and none was forgotten since
    /// ([`forget_bins`](Self::forget_bins)): a step's exchanges of heat and vorticity bin once.
    pub fn diffuse_kept(&mut self, v: &mut Vortons, nu: f64, dt: f64) {
        if v.is_empty() || nu <= 0.0 {
            return;
        }
        let binning = self.bin(v);
        let steps = Self::substeps(v, nu, dt);
        let h = dt / steps as f64;
        if self.device.is_some() {
            // On a device the substeps carry the strengths from one to the next (here they pass through
            // the vorticity, which rounds them once more each substep).
            let mut content = std::mem::take(&mut self.content);
            content.clear();
            content.extend((0..v.len()).flat_map(|i| v.strength(i).to_array()));
            let taken = self.on_device(v, binning, 3, nu * h, steps, &mut content);
            if taken && self.device_error.is_none() {
                for (i, a) in content.chunks_exact(3).enumerate() {
                    v.vorticity[i] = DVec3::from_slice(a) / v.volume[i];
                }
            }
            self.content = content;
            if taken {
                return;
            }
        }
        let bins = self.sort();
        let (mut strength, mut next) = (
            std::mem::take(&mut self.strength),
            std::mem::take(&mut self.next),
        );
        for _ in 0..steps {
            strength.clear();
            strength.extend((0..v.len()).map(|i| v.strength(i)));
            exchange(&self.bins, bins, v, &strength, nu * h, &mut next);
            for i in 0..v.len() {
                v.vorticity[i] = next[i] / v.volume[i];
            }
        }
        (self.strength, self.next) = (strength, next);
    }

    /// Diffuses the vortons' temperature over `dt` seconds with thermal diffusivity `kappa` (m²/s): the
    /// exchange of heat content T V (the same operator as vorticity; total heat is conserved).
    pub fn diffuse_heat(&mut self, v: &mut Vortons, kappa: f64, dt: f64) {
        self.forget_bins();
        self.diffuse_heat_kept(v, kappa, dt);
    }

    /// As [`diffuse_heat`](Self::diffuse_heat), with the bins kept as in [`diffuse_kept`](Self::diffuse_kept).
    pub fn diffuse_heat_kept(&mut self, v: &mut Vortons, kappa: f64, dt: f64) {
        if v.is_empty() || kappa <= 0.0 {
            return;
        }
        let binning = self.bin(v);
        let steps = Self::substeps(v, kappa, dt);
        let h = dt / steps as f64;
        if self.device.is_some() {
            let mut content = std::mem::take(&mut self.content);
            content.clear();
            content.extend((0..v.len()).map(|i| v.temperature[i] * v.volume[i]));
            let taken = self.on_device(v, binning, 1, kappa * h, steps, &mut content);
            if taken && self.device_error.is_none() {
                for (i, q) in content.iter().enumerate() {
                    v.temperature[i] = q / v.volume[i];
                }
            }
            self.content = content;
            if taken {
                return;
            }
        }
        let bins = self.sort();
        let (mut content, mut next) = (
            std::mem::take(&mut self.content),
            std::mem::take(&mut self.next_content),
        );
        for _ in 0..steps {
            content.clear();
            content.extend((0..v.len()).map(|i| v.temperature[i] * v.volume[i]));
            exchange(&self.bins, bins, v, &content, kappa * h, &mut next);
            for i in 0..v.len() {
                v.temperature[i] = next[i] / v.volume[i];
            }
        }
        (self.content, self.next_content) = (content, next);
    }
}

/// One explicit PSE update of the per-vorton contents `q` (a quantity times volume) with coefficient
/// `coef` = diffusivity × time step (m²), into `out`: `qᵢ + coef/ε² Σⱼ (Vᵢ qⱼ − Vⱼ qᵢ) η_ε(|xᵢ − xⱼ|)`.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn exchange<T>(
    sorted: &[(u64, u32)],
    bins: NeighbourBins,
    v: &Vortons,
    q: &[T],
    coef: f64,
    out: &mut Vec<T>,
) where
    T: Copy + Default + Send + Sync + Add<Output = T> + Sub<Output = T> + Mul<f64, Output = T>,
{
    let n = v.len();
    out.resize(n, T::default());
    let norm = 4.0 / std::f64::consts::PI.powf(1.5);
    let o = par::SharedSlice::new(out);
    par::for_each_chunk(n, CHUNK, |range| {
        // SAFETY: chunks are disjoint.
        let o = unsafe { o.slice_mut(range.clone()) };
        for (o, i) in o.iter_mut().zip(range) {
            let (xi, vi, si2) = (v.position[i], v.volume[i], v.radius[i] * v.radius[i]);
            let qi = q[i];
            let c = bins.cell(xi).as_i64vec3();
            let mut d = T::default();
            for dz in -1..=1i64 {
                for dy in -1..=1i64 {
                    for dx in -1..=1i64 {
                        let nc = c + I64Vec3::new(dx, dy, dz);
                        if nc.min_element() < 0 || nc.cmpge(bins.dims.as_i64vec3()).any() {
                            continue;
                        }
                        let k = bins.key(nc.as_u64vec3());
                        let s = sorted.partition_point(|&(b, _)| b < k);
                        for &(b, j) in &sorted[s..] {
                            if b != k {
                                break;
                            }
                            let j = j as usize;
                            if j == i {
                                continue;
                            }
                            let r2 = (v.position[j] - xi).length_squared();
                            let e2 = 0.5 * (si2 + v.radius[j] * v.radius[j]);
                            if r2 > CUTOFF * CUTOFF * e2 {
                                continue;
                            }
                            let eta = norm / (e2 * e2.sqrt()) * (-r2 / e2).exp();
                            d = d + (q[j] * vi - qi * v.volume[j]) * (eta / e2);
                        }
                    }
                }
            }
            *o = qi + d * coef;
        }
    });
}
