//! Stages "density", "forces" and "advance", fused into one kernel (`forces.wgsl`), with the
//! bookkeeping away from obstacles.

use super::Buffers;
use crate::device::{Gpu, GpuError, Kernel};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("forces.wgsl");

/// The fused force-and-advance kernel over the grid. Away from obstacles it also writes the bookkeeping
/// (next to them the binding is there, unused).
pub(super) fn kernel(
    gpu: &Gpu,
    prelude: &str,
    variant: &str,
    b: &Buffers,
    grid: [u32; 3],
) -> Result<Kernel, GpuError> {
    Kernel::new(gpu, "forces", variant, prelude, SOURCE, grid, |cur| {
        vec![
            &b.params,
            &b.motion,
            &b.mass[cur],
            &b.advanced,
            &b.partials,
            &b.book,
        ]
    })
}
