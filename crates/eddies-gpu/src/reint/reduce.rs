//! The step's diagnostics from the workgroups' partial sums, in a fixed order, into the device log
//! (`reduce.wgsl`).

use super::Buffers;
use crate::device::{Gpu, GpuError, Kernel};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("reduce.wgsl");

/// The reduction kernel: one workgroup, the same buffers for either state.
pub(super) fn kernel(
    gpu: &Gpu,
    prelude: &str,
    variant: &str,
    b: &Buffers,
) -> Result<Kernel, GpuError> {
    Kernel::new(gpu, "reduce", variant, prelude, SOURCE, [1, 1, 1], |_| {
        vec![&b.params, &b.partials, &b.log, &b.exchange]
    })
}
