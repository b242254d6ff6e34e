//! A counting sort on the device whose result depends on the keys alone: items (particles, vortons) by bin
//! (half cell, cell), each bin's items in index order. FLIP's particle-to-grid transfer and the vortex
//! particles' splat gather from it.
//!
//! The caller's own kernel comes first: it writes each item's key and its rank among its bin's items,
//! counted by an integer atomic into the first `bins` entries of the prefix-sum buffer (cleared before); or
//! the caller writes the keys alone and [`CountingSort::launches_for_keys`] counts them (`count.wgsl`).
//! [`CountingSort::launches`] then records the rest:
//! * exclusive prefix sums of the counts, block by block in levels of [`BLOCK`] (`scan.wgsl`): integer sums,
//!   so the result is one whatever the order;
//! * each item into its bin's range at its rank (`place.wgsl`);
//! * each item's rank by index among its bin's items, counted from that list (`order.wgsl`: a bin holds a
//!   few items), and each item placed again at it, so that the sorted list does not depend on the order in
//!   which threads took their ranks. (An insertion sort of each bin by one thread had left bins of a
//!   thousand items unsorted on lavapipe.)
//!
//! Afterwards entry `b` of the prefix sums is bin `b`'s first slot in the sorted list and entry `b + 1` one
//! past its last.

use bytemuck::{Pod, Zeroable};

use crate::device::{fold_groups, Bindable, Gpu, GpuError, Launch};

const SCAN: &str = include_str!("scan.wgsl");
const PLACE: &str = include_str!("place.wgsl");
const ORDER: &str = include_str!("order.wgsl");
const COUNT: &str = include_str!("count.wgsl");

/// Threads per workgroup.
pub(crate) const WG: u64 = 256;
/// Entries per workgroup of the prefix sums (`BLOCK` of `scan.wgsl`).
pub(crate) const BLOCK: u64 = 4 * WG;
/// `NONE` of `scan.wgsl`: the top level has no parent.
const NONE: u32 = u32::MAX;
/// The variants of `scan.wgsl`: each block's total into the next level, or each block's prefix sums.
const SCAN_REDUCE: &str = "const OP: u32 = 0u;";
const SCAN_BLOCKS: &str = "const OP: u32 = 1u;";

/// What the sort's kernels share: the header uniform the caller binds at binding 0 begins with `Sort` (items
/// and bins), `DEAD` marks an item the caller's kernel dropped, and the thread index over launches folded
/// into two dimensions.
const HEADER: &str = "
struct Sort {
    n: u32, bins: u32, pad0: u32, pad1: u32,
}
const DEAD: u32 = 0xffffffffu;
fn thread_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}
";

/// The prelude of the sort's kernels, with `consts`: also that of a caller's kernels that use the header.
pub(crate) fn prelude(consts: &str) -> String {
    format!("const WG: u32 = {WG}u;\n{consts}\n{HEADER}")
}

/// `Sort` of the header: the first 16 bytes of the caller's uniform.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(crate) struct SortHeader {
    pub n: u32,
    pub bins: u32,
    pub pad: [u32; 2],
}

impl SortHeader {
    /// The header of `n` items in `bins` bins (each below 2³², which the callers check).
    pub fn new(n: u64, bins: u64) -> Self {
        Self {
            n: n as u32,
            bins: bins as u32,
            pad: [0; 2],
        }
    }
}

/// `Level` of `scan.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct LevelUniform {
    n: u32,
    at: u32,
    parent: u32,
    pad: u32,
}

/// The levels of the prefix sums over `n` entries: each level's entries and first slot in the scan buffer,
/// the finest first, until a level fits one workgroup.
fn scan_levels(n: u64) -> Vec<(u64, u64)> {
    let mut levels = vec![(n, 0)];
    let mut at = n;
    while levels.last().expect("one level").0 > BLOCK {
        let next = levels.last().expect("one level").0.div_ceil(BLOCK);
        levels.push((next, at));
        at += next;
    }
    levels
}

/// The sort's uniforms, one per level of the prefix sums, kept across sorts.
#[derive(Default)]
pub(crate) struct CountingSort {
    levels: Vec<wgpu::Buffer>,
}

/// The buffers of one sort. `header` begins with [`SortHeader`]; `keys` and `rank` hold each item's bin
/// and rank (or `DEAD`); `scan` holds [`CountingSort::entries`] entries, the first `bins` of them the counts;
/// `sorted` receives the items.
pub(crate) struct SortBuffers<'a> {
    pub header: &'a wgpu::Buffer,
    pub keys: &'a dyn Bindable,
    pub rank: &'a dyn Bindable,
    pub scan: &'a dyn Bindable,
    pub sorted: &'a dyn Bindable,
}

impl CountingSort {
    /// Entries (u32) of the prefix-sum buffer for `bins` bins: the bins, one past them, and the upper
    /// levels.
    pub fn entries(bins: u64) -> u64 {
        scan_levels(bins + 1).iter().map(|l| l.0).sum()
    }

    /// The launches that count the keys already in `b.keys` (the first `bins` entries of `b.scan` cleared
    /// before), then sort the `n` items as [`launches`](Self::launches) does.
    pub fn launches_for_keys(
        &mut self,
        gpu: &Gpu,
        per_axis: u32,
        b: &SortBuffers,
        n: u64,
        bins: u64,
    ) -> Result<Vec<Launch>, GpuError> {
        let args: [&dyn Bindable; 4] = [b.header, b.keys, b.rank, b.scan];
        let count = launch(gpu, per_axis, ("count", COUNT, ""), &args, n.div_ceil(WG))?;
        let mut launches = vec![count];
        launches.extend(self.launches(gpu, per_axis, b, n, bins)?);
        Ok(launches)
    }

    /// The launches that sort `n` items into `bins` bins after the caller's kernel has counted them (see
    /// the module documentation), launches of more than `per_axis` workgroups folded into two dimensions.
    pub fn launches(
        &mut self,
        gpu: &Gpu,
        per_axis: u32,
        b: &SortBuffers,
        n: u64,
        bins: u64,
    ) -> Result<Vec<Launch>, GpuError> {
        let levels = scan_levels(bins + 1);
        while self.levels.len() < levels.len() {
            self.levels.push(gpu.uniform::<LevelUniform>("scan level"));
        }
        for (l, &(entries, at)) in levels.iter().enumerate() {
            let parent = levels.get(l + 1).map_or(NONE, |p| p.1 as u32);
            gpu.write(
                &self.levels[l],
                &[LevelUniform {
                    n: entries as u32,
                    at: at as u32,
                    parent,
                    pad: 0,
                }],
            );
        }
        let launch = |name: &str, source: &str, consts: &str, args: &[&dyn Bindable], groups| {
            launch(gpu, per_axis, (name, source, consts), args, groups)
        };
        let mut launches = Vec::new();
        for (level, uniform) in levels[..levels.len() - 1].iter().zip(&self.levels) {
            let args: [&dyn Bindable; 2] = [uniform, b.scan];
            launches.push(launch(
                "scan",
                SCAN,
                SCAN_REDUCE,
                &args,
                level.0.div_ceil(BLOCK),
            )?);
        }
        for l in (0..levels.len()).rev() {
            let args: [&dyn Bindable; 2] = [&self.levels[l], b.scan];
            launches.push(launch(
                "scan",
                SCAN,
                SCAN_BLOCKS,
                &args,
                levels[l].0.div_ceil(BLOCK),
            )?);
        }
        let place = |launches: &mut Vec<Launch>| -> Result<(), GpuError> {
            launches.push(launch(
                "place",
                PLACE,
                "",
                &[b.header, b.keys, b.rank, b.scan, b.sorted],
                n.div_ceil(WG),
            )?);
            Ok(())
        };
        place(&mut launches)?;
        launches.push(launch(
            "order",
            ORDER,
            "",
            &[b.header, b.keys, b.rank, b.scan, b.sorted],
            n.div_ceil(WG),
        )?);
        place(&mut launches)?;
        Ok(launches)
    }
}

/// A launch of the sort's kernel `(name, source, consts)` over `groups` workgroups, folded into two
/// dimensions beyond `per_axis`.
fn launch(
    gpu: &Gpu,
    per_axis: u32,
    (name, source, consts): (&str, &str, &str),
    args: &[&dyn Bindable],
    groups: u64,
) -> Result<Launch, GpuError> {
    let key = format!("sort {name} {consts}");
    let pipeline = gpu.pipeline(&key, &prelude(consts), source)?;
    gpu.launch_args(name, pipeline, args, fold_groups(groups, per_axis))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::validate_wgsl;

    /// Every kernel's variants parse and validate without a GPU.
    #[test]
    fn the_kernels_compile_without_a_gpu() {
        for (name, source, consts) in [
            ("scan", SCAN, SCAN_REDUCE),
            ("scan", SCAN, SCAN_BLOCKS),
            ("place", PLACE, ""),
            ("order", ORDER, ""),
            ("count", COUNT, ""),
        ] {
            let code = format!("{}\n{source}", prelude(consts));
            validate_wgsl(&code).unwrap_or_else(|e| panic!("{name} {consts}: {e}"));
        }
    }

    /// The uniforms have the sizes the shaders give them.
    #[test]
    fn uniforms_match_the_shaders() {
        assert_eq!(std::mem::size_of::<LevelUniform>(), 16);
        assert_eq!(std::mem::size_of::<SortHeader>(), 16);
    }

    /// The prefix sums' levels shrink by a block each until one workgroup holds the top.
    #[test]
    fn scan_levels_cover_every_entry() {
        assert_eq!(scan_levels(10), vec![(10, 0)]);
        assert_eq!(scan_levels(1024), vec![(1024, 0)]);
        assert_eq!(scan_levels(1025), vec![(1025, 0), (2, 1025)]);
        let big = scan_levels(134_217_729);
        assert_eq!(big.len(), 3);
        assert!(big.last().unwrap().0 <= BLOCK);
        for w in big.windows(2) {
            assert_eq!(w[1].0, w[0].0.div_ceil(BLOCK));
            assert_eq!(w[1].1, w[0].1 + w[0].0);
        }
        assert_eq!(CountingSort::entries(1024), 1025 + 2);
    }
}
