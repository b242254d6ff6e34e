//! The bookkeeping pass that makes mass exact, next to obstacles (`normalise.wgsl`).

use super::Buffers;
use crate::device::{Gpu, GpuError, Kernel};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("normalise.wgsl");

/// The bookkeeping kernel over the grid.
pub(super) fn kernel(
    gpu: &Gpu,
    prelude: &str,
    variant: &str,
    b: &Buffers,
    grid: [u32; 3],
) -> Result<Kernel, GpuError> {
    Kernel::new(gpu, "normalise", variant, prelude, SOURCE, grid, |cur| {
        vec![&b.params, &b.advanced, &b.mass[cur], &b.book, &b.fluid]
    })
}
