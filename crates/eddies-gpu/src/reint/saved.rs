//! Checkpoints of the GPU backend: the same arrays as the CPU backend's ([`ReintSaved`]), so a checkpoint
//! written by either resumes on either. The state is read back with the emitters' and sinks' running totals
//! (64-bit quanta on the device, kilograms in the file: whole quanta times the quantum's mass, exact both
//! ways below 2⁵³ quanta), and written into the device's buffers on restore.

use eddies::reint::ReintSaved;
use eddies::SimError;

use super::{words, ReintGpu};
use crate::device::GpuError;

impl<const D: usize> ReintGpu<D> {
    /// The evolving state, read back from the device.
    pub(super) fn saved(&self) -> Result<ReintSaved<D>, GpuError> {
        let cells = self.with_host(|h| h.interior_state())?;
        let s = self.constants.unit.len();
        let bytes = self.gpu.read(&[(
            &self.buffers.exchange,
            0,
            (2 * words::EXCHANGE_REMOVED * 4) as u64,
        )])?;
        let words: &[u32] = bytemuck::cast_slice(&bytes[0]);
        let kg = |at: usize, k: usize| {
            (words[at + 2 * k] as u64 | (words[at + 2 * k + 1] as u64) << 32) as f64
                * self.constants.unit[k]
        };
        Ok(ReintSaved {
            cells,
            time: self.time,
            steps: self.steps,
            max_speed: self.max_speed,
            injected: (0..s).map(|k| kg(0, k)).collect(),
            removed: (0..s).map(|k| kg(words::EXCHANGE_REMOVED, k)).collect(),
        })
    }

    /// Writes a saved state (checked against this grid by [`ReintSaved::from_state`]) into the device's
    /// buffers and the host's copy, and sets the clock.
    pub(super) fn resume(&mut self, saved: &ReintSaved<D>) -> Result<(), SimError> {
        let motion: Vec<f32> = saved
            .cells
            .pos
            .iter()
            .chain(&saved.cells.vel)
            .flatten()
            .copied()
            .collect();
        let mass: Vec<f32> = saved.cells.mass.concat();
        let mut exchange = vec![0u32; 2 * words::EXCHANGE_REMOVED];
        for (k, unit) in self.constants.unit.iter().enumerate() {
            for (at, kg) in [
                (0, saved.injected[k]),
                (words::EXCHANGE_REMOVED, saved.removed[k]),
            ] {
                let quanta = (kg / unit).round() as u64;
                exchange[at + 2 * k] = quanta as u32;
                exchange[at + 2 * k + 1] = (quanta >> 32) as u32;
            }
        }
        self.gpu.write(&self.buffers.motion, &motion);
        self.gpu.write(&self.buffers.mass[self.current], &mass);
        self.gpu.write(&self.buffers.exchange, &exchange);
        self.gpu.finish().map_err(|e| SimError::Device {
            step: saved.steps,
            detail: e.to_string(),
        })?;
        self.host.lock().unwrap().resume_from(saved);
        self.time = saved.time;
        self.steps = saved.steps;
        self.max_speed = saved.max_speed;
        self.pending.clear();
        self.read.clear();
        self.probe.seen(saved.steps);
        *self.synced.lock().unwrap() = Some(saved.steps);
        Ok(())
    }
}
