//! Obstacles after the advance: particles next to an obstacle kept out of it (`obstacles.wgsl`).

use super::{Buffers, LIST_WORKGROUP};
use crate::device::{Gpu, GpuError, Kernel};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("obstacles.wgsl");

/// The obstacle kernel over the `count` fluid cells next to an obstacle.
pub(super) fn kernel(
    gpu: &Gpu,
    prelude: &str,
    variant: &str,
    b: &Buffers,
    count: u32,
) -> Result<Kernel, GpuError> {
    let groups = [count.div_ceil(LIST_WORKGROUP), 1, 1];
    Kernel::new(gpu, "obstacles", variant, prelude, SOURCE, groups, |cur| {
        vec![&b.params, &b.near, &b.mass[cur], &b.fluid, &b.advanced]
    })
}
