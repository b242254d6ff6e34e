//! Stage "reintegrate": the gather of every cell's new particle (`gather.wgsl`).

use super::Buffers;
use crate::device::{Gpu, GpuError, Kernel};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("gather.wgsl");

/// The gather kernel over the grid: it reads the state's masses and writes the next step's.
pub(super) fn kernel(
    gpu: &Gpu,
    prelude: &str,
    variant: &str,
    b: &Buffers,
    grid: [u32; 3],
) -> Result<Kernel, GpuError> {
    Kernel::new(gpu, "gather", variant, prelude, SOURCE, grid, |cur| {
        vec![
            &b.params,
            &b.advanced,
            &b.mass[cur],
            &b.book,
            &b.fluid,
            &b.motion,
            &b.mass[1 - cur],
            &b.partials,
        ]
    })
}
