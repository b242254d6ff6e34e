//! The vector solve's right-hand sides formed where the splat left the vorticity (`rhs.wgsl`), so that
//! neither the vorticity nor the right-hand sides cross the bus: [`eddies::vpm::poisson::SplatDevice`]'s
//! `splat_kept`, `right_hand_sides` and `right_hand_side`, implemented by [`super::GpuSplat`].
//!
//! The host computes the boundary values (from the vortons, by its treecode or the GPU's direct sum) and
//! sends them up, three f64 per point of the grid's outer layer; the device forms each component's
//! right-hand side with the host's arithmetic and its sums of squares run by run
//! ([`eddies::vpm::poisson::RHS_RUN`], each in index order), which the host adds in order, as it adds its
//! own. Each component's right-hand side then goes into the field that the Poisson solver reads
//! (`GpuPoisson::share_faces`), just before that component's solve.

use bytemuck::{Pod, Zeroable};
use eddies::linsolve::Layout;
use eddies::vpm::poisson::RHS_RUN;
use glam::DVec3;

use super::{dims4, sized_all};
use crate::device::{copy_bytes, fold_groups, Gpu, GpuError, Scratch};

/// The kernel's WGSL, after [`prelude`].
const SOURCE: &str = include_str!("rhs.wgsl");

/// Invocations per workgroup.
const WG: u64 = 128;

/// The kernel's uniform (`Rhs` of `rhs.wgsl`).
const RHS: &str = "
struct Rhs {
    // Grid points per axis; padded entries per axis.
    dims: vec4<u32>,
    padded: vec4<u32>,
    // Padded entries, runs of RUN, the component written.
    len: u32, runs: u32, component: u32, pad0: u32,
    // The vorticity's factor (h²).
    scale: f64,
}
";

/// The grid's outer layer (the points with a coordinate 0 or `dims − 1`) for the kernels that read its
/// values, one per point in the storage order of `eddies::vpm::poisson`'s boundary lists.
pub(super) const OUTER_LAYER: &str = "
fn on_face(g: vec3<u32>, dims: vec3<u32>) -> bool {
    return any(g == vec3<u32>(0u)) || any(g == dims - 1u);
}

// The position of the outer layer's point `g` in storage order: the whole first plane, then each middle
// plane's ring (its first row, the two ends of each middle row, its last row), then the whole last plane.
fn slot(g: vec3<u32>, dims: vec3<u32>) -> u32 {
    let nx = dims.x;
    let ny = dims.y;
    let plane = nx * ny;
    let ring = 2u * nx + 2u * (ny - 2u);
    if g.z == 0u {
        return g.x + nx * g.y;
    }
    if g.z == dims.z - 1u {
        return plane + (dims.z - 2u) * ring + g.x + nx * g.y;
    }
    let first = plane + (g.z - 1u) * ring;
    if g.y == 0u {
        return first + g.x;
    }
    if g.y == ny - 1u {
        return first + nx + 2u * (ny - 2u) + g.x;
    }
    return first + nx + 2u * (g.y - 1u) + select(0u, 1u, g.x != 0u);
}
";

/// Points of the outer layer of a grid of `dims` points (each at least 3).
pub(super) fn outer_points(dims: [usize; 3]) -> usize {
    let [nx, ny, nz] = dims;
    nx * ny * nz - (nx - 2) * (ny - 2) * (nz - 2)
}

/// The prelude of the kernel that sums the runs' squares (`sums`) or writes a component.
fn prelude(sums: bool) -> String {
    format!(
        "const WG: u32 = {WG}u;\nconst RUN: u32 = {RHS_RUN}u;\nconst SUMS: bool = {sums};\n{RHS}\n\
         {OUTER_LAYER}"
    )
}

/// `Rhs` of the kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct RhsUniform {
    dims: [u32; 4],
    padded: [u32; 4],
    len: u32,
    runs: u32,
    component: u32,
    pad0: u32,
    scale: f64,
    pad1: f64,
}

/// What the right-hand sides need on the device, and the field they go to.
pub(super) struct Rhs {
    /// The field shared with the Poisson solver; `None`: not offered.
    field: Option<Scratch>,
    params: wgpu::Buffer,
    /// The boundary values, and the runs' sums of squares.
    buffers: [Option<wgpu::Buffer>; 2],
    /// The kept splat's vorticity (three f32 a point) and its grid's points per axis.
    kept: Option<([usize; 3], wgpu::Buffer)>,
    /// The uniform of the last [`sums`](Self::sums), for [`write`](Self::write).
    formed: Option<RhsUniform>,
    /// The boundary values as uploaded, reused.
    values: Vec<f64>,
}

impl Rhs {
    pub(super) fn new(gpu: &Gpu) -> Self {
        Self {
            field: None,
            params: gpu.uniform::<RhsUniform>("vpm rhs params"),
            buffers: Default::default(),
            kept: None,
            formed: None,
            values: Vec::new(),
        }
    }

    /// Offers the right-hand sides, written into `field`.
    pub(super) fn share_field(&mut self, field: Scratch) {
        self.field = Some(field);
    }

    /// The id of the field ([`Scratch::id`]).
    pub(super) fn field(&self) -> Option<u64> {
        self.field.as_ref().map(Scratch::id)
    }

    /// Device memory held (bytes), the field aside (the Poisson solver's).
    pub(super) fn bytes(&self) -> u64 {
        self.buffers
            .iter()
            .flatten()
            .map(wgpu::Buffer::size)
            .sum::<u64>()
            + self.params.size()
    }

    /// The splat on a grid of `dims` points left its vorticity in `vorticity`, for the right-hand sides.
    pub(super) fn keep(&mut self, dims: [usize; 3], vorticity: wgpu::Buffer) {
        self.kept = Some((dims, vorticity));
        self.formed = None;
    }

    /// The kept vorticity is no longer valid (its buffer holds another splat's).
    pub(super) fn forget(&mut self) {
        self.kept = None;
        self.formed = None;
    }

    /// The kept vorticity's buffer and its grid's points per axis.
    pub(super) fn kept(&self) -> Option<&([usize; 3], wgpu::Buffer)> {
        self.kept.as_ref()
    }

    /// Uploads `boundary` and writes each component's runs' sums of squares of the right-hand sides into
    /// `squares` ([`eddies::vpm::poisson::SplatDevice::right_hand_sides`]).
    pub(super) fn sums(
        &mut self,
        gpu: &Gpu,
        scale: f64,
        boundary: &[DVec3],
        squares: &mut Vec<f64>,
    ) -> Result<(), GpuError> {
        let Some((dims, vorticity)) = self.kept.clone() else {
            return Err(GpuError::Internal(
                "the right-hand sides were asked for without a kept splat".into(),
            ));
        };
        if dims.iter().any(|&d| d < 3) {
            return Err(GpuError::Internal(format!(
                "right-hand sides on a grid of {dims:?} points, without interior points"
            )));
        }
        let layout = Layout::new(dims);
        let len = layout.len() as u64;
        let outer = outer_points(dims);
        if boundary.len() != outer {
            return Err(GpuError::Internal(format!(
                "{} boundary values for the {outer} points of the grid's outer layer",
                boundary.len()
            )));
        }
        if len >= u32::MAX as u64 {
            return Err(GpuError::Limit(format!(
                "{len} padded entries: too many for the right-hand sides' 32-bit indices"
            )));
        }
        let runs = len.div_ceil(RHS_RUN as u64);
        let b = sized_all(
            gpu,
            "the right-hand sides' inputs",
            &mut self.buffers,
            &["vpm rhs boundary values", "vpm rhs sums of squares"],
            &[24 * outer as u64, 24 * runs],
        )?;
        self.values.clear();
        self.values
            .extend(boundary.iter().flat_map(|v| v.to_array()));
        gpu.write(&b[0], &self.values);
        let uniform = RhsUniform {
            dims: dims4(dims.map(|d| d as u64)),
            padded: dims4(layout.padded.map(|d| d as u64)),
            len: len as u32,
            runs: runs as u32,
            scale,
            ..Default::default()
        };
        gpu.write(&self.params, &[uniform]);
        let launch = self.launch(gpu, true, &vorticity, &b[1], runs)?;
        gpu.submit_launches("vpm rhs sums", |_| {}, [&launch]);
        squares.resize(3 * runs as usize, 0.0);
        gpu.read_into(&[(&b[1], 0, 24 * runs)], |_, bytes| {
            copy_bytes(bytemuck::cast_slice_mut(squares), bytes)
        })?;
        self.formed = Some(uniform);
        Ok(())
    }

    /// Writes component `component` of the right-hand sides of the last [`sums`](Self::sums) into the
    /// field, f64 in the padded layout.
    pub(super) fn write(&mut self, gpu: &Gpu, component: usize) -> Result<(), GpuError> {
        let (Some(uniform), Some((_, vorticity)), Some(field)) =
            (self.formed, self.kept.clone(), self.field.as_ref())
        else {
            return Err(GpuError::Internal(
                "a right-hand side was asked for before the right-hand sides were formed, or without a \
                 field"
                    .into(),
            ));
        };
        if component > 2 {
            return Err(GpuError::Internal(format!("no component {component}")));
        }
        let len = uniform.len as u64;
        gpu.check_binding("the right-hand side", 8 * len)?;
        let (out, _) = field.get(gpu, "the right-hand side", 8 * len)?;
        gpu.write(
            &self.params,
            &[RhsUniform {
                component: component as u32,
                ..uniform
            }],
        );
        let launch = self.launch(gpu, false, &vorticity, &out, len)?;
        gpu.submit_launches("vpm rhs", |_| {}, [&launch]);
        Ok(())
    }

    /// The kernel over `threads` threads (runs, or padded entries) writing into `out`.
    fn launch(
        &self,
        gpu: &Gpu,
        sums: bool,
        vorticity: &wgpu::Buffer,
        out: &wgpu::Buffer,
        threads: u64,
    ) -> Result<crate::device::Launch, GpuError> {
        let key = if sums { "vpm rhs sums" } else { "vpm rhs" };
        let pipeline = gpu.pipeline(key, &prelude(sums), SOURCE)?;
        let boundary = self.buffers[0].as_ref().expect("sized by `sums`");
        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        gpu.launch_args(
            key,
            pipeline,
            &[&self.params, vorticity, boundary, out],
            fold_groups(threads.div_ceil(WG), per_axis),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::validate_wgsl;

    /// Both variants of the kernel parse and validate without a GPU, and the uniform is the shader's size.
    #[test]
    fn the_kernel_compiles_without_a_gpu() {
        for sums in [true, false] {
            let code = format!("{}\n{SOURCE}", prelude(sums));
            validate_wgsl(&code).unwrap_or_else(|e| panic!("sums {sums}: {e}"));
        }
        assert_eq!(std::mem::size_of::<RhsUniform>(), 64);
    }
}
