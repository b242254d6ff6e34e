//! The speed probe: each step's largest speed, copied from the device log into a small mappable buffer and
//! picked up whenever it has arrived, without waiting. The adaptive time step follows the flow a few steps
//! behind rather than a frame behind, and the device never idles for it.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::device::Gpu;

/// Probes in the ring: the steps the device may run ahead with a probe each.
const PROBES: usize = 4;

const FREE: u8 = 0;
const IN_FLIGHT: u8 = 1;
const READY: u8 = 2;

struct Probe {
    buffer: wgpu::Buffer,
    state: Arc<AtomicU8>,
    /// The step whose speed it carries.
    step: u64,
}

/// A ring of probes.
pub(super) struct SpeedProbe {
    probes: Vec<Probe>,
    /// The step of the latest speed picked up.
    latest: u64,
}

impl SpeedProbe {
    pub fn new(gpu: &Gpu) -> Self {
        let probes = (0..PROBES)
            .map(|_| Probe {
                buffer: gpu.device().create_buffer(&wgpu::BufferDescriptor {
                    label: Some("speed probe"),
                    size: 4,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }),
                state: Arc::new(AtomicU8::new(FREE)),
                step: 0,
            })
            .collect();
        Self { probes, latest: 0 }
    }

    /// Copies the speed of log slot `slot` (step `step`) into a free probe, if there is one; returns it.
    pub fn record(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        log: &wgpu::Buffer,
        slot: u32,
        step: u64,
    ) -> Option<usize> {
        let k = self
            .probes
            .iter()
            .position(|p| p.state.load(Ordering::Acquire) == FREE)?;
        let at = ((slot as usize * super::words::LOG + super::words::SPEED2) * 4) as u64;
        encoder.copy_buffer_to_buffer(log, at, &self.probes[k].buffer, 0, 4);
        self.probes[k].step = step;
        Some(k)
    }

    /// Asks for probe `k` to be mapped once its copy (submitted just before) has run.
    pub fn map(&mut self, k: usize) {
        let state = self.probes[k].state.clone();
        state.store(IN_FLIGHT, Ordering::Release);
        self.probes[k]
            .buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| {
                state.store(if r.is_ok() { READY } else { FREE }, Ordering::Release);
            });
    }

    /// Notes that the speed of `step` is known by other means (the log read back): older probes are stale.
    pub fn seen(&mut self, step: u64) {
        self.latest = self.latest.max(step);
    }

    /// The largest speed (cells/s) of the latest step whose probe has arrived since the last call, if any.
    pub fn latest(&mut self, gpu: &Gpu) -> Option<f32> {
        // Runs the callbacks of finished mappings; never waits.
        let _ = gpu.device().poll(wgpu::PollType::Poll);
        let mut found = None;
        for p in &mut self.probes {
            if p.state.load(Ordering::Acquire) != READY {
                continue;
            }
            let speed2 = match p.buffer.slice(..).get_mapped_range() {
                Ok(view) => f32::from_le_bytes([view[0], view[1], view[2], view[3]]),
                Err(_) => f32::NAN,
            };
            p.buffer.unmap();
            p.state.store(FREE, Ordering::Release);
            if p.step > self.latest && speed2.is_finite() {
                self.latest = p.step;
                found = Some(speed2.max(0.0).sqrt());
            }
        }
        found
    }
}
