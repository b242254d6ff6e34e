//! The grid techniques' last stage on the GPU ([`eddies::vpm::sampling`]): the Poisson technique's curl
//! (`sample_curl.wgsl`) and the grid's velocity sampled at the vortons, with its gradient for stretching,
//! and at the tracers (`sample_points.wgsl`).
//!
//! The host uploads the vector potential (or the grid's velocity, for the techniques that compute it
//! there) in double precision, unless the potential is taken from the GPU solver's solutions through a
//! field they share ([`GpuSampling::share_field`], `sample_potential.wgsl`); and each point's stencil as
//! the splat does: the key of its lowest grid point and its fractions, taken with the CPU's own
//! [`FittedGrid::cic`] in f64 and rounded to f32. The kernels
//! compute the CPU's differences and trilinear blends in f64, each value by one thread, so a run repeats
//! bit for bit; the velocities and gradients come back in f32. A device without double precision leaves
//! the stage to the CPU.

use std::sync::{Arc, Mutex};

use bytemuck::{Pod, Zeroable};
use eddies::vpm::mollify::FittedGrid;
use eddies::vpm::sampling::{GridDevice, GridField, Sampled, Samples, SharedGridDevice};
use glam::DVec3;
use rayon::prelude::*;

use super::rhs::{outer_points, OUTER_LAYER};
use super::{dims4, held, sized, sized_all, stencil, taken};
use crate::device::{copy_bytes, fold_groups, Bindable, Gpu, GpuError, Scratch};
use crate::sort::{self, WG};
use eddies::linsolve::Layout;

/// The kernels' WGSL, after [`prelude`].
pub(crate) const CURL: &str = include_str!("sample_curl.wgsl");
pub(crate) const POINTS: &str = include_str!("sample_points.wgsl");
const POTENTIAL: &str = include_str!("sample_potential.wgsl");

/// The kernels' uniform ([`SamplingUniform`]) and the grid's helpers; a kernel defines
/// `value(g: u32) -> vec3<f64>`, the grid value whose differences it takes.
const SAMPLING: &str = "
struct Sampling {
    // Grid points per axis; w: grid points.
    dims: vec4<u32>,
    // Distance between neighbours along each axis (1, nx, nx·ny).
    strides: vec4<u32>,
    // Points sampled, of which the first `gradient` with the velocity gradient.
    points: u32, gradient: u32, pad0: u32, pad1: u32,
    // The reciprocal of a difference's span: 1/h one-sided, 1/(2h) central.
    inv_one: f64, inv_two: f64,
}

fn coordinates(g: u32) -> vec3<u32> {
    return vec3<u32>(g % p.dims.x, (g / p.dims.x) % p.dims.y, g / (p.dims.x * p.dims.y));
}

// The difference of `value` between the two points around grid point `g` (at `here`) along `axis`, over
// their distance: FittedGrid::differences at one point.
fn difference(here: vec3<u32>, g: u32, axis: u32) -> vec3<f64> {
    let c = here[axis];
    let lo = select(c - 1u, 0u, c == 0u);
    let hi = min(c + 1u, p.dims[axis] - 1u);
    let stride = p.strides[axis];
    let inverse = select(p.inv_two, p.inv_one, hi - lo == 1u);
    return (value(g + (hi - c) * stride) - value(g - (c - lo) * stride)) * inverse;
}

// Corner `corner` of the stencil whose lowest point is `base`, with fractions `f`: the grid point's
// coordinates, its index, and its trilinear weight (the factors multiplied x, y, z, as Grid::stencil does).
struct Corner {
    here: vec3<u32>,
    g: u32,
    w: f64,
}

fn corner(base: vec3<u32>, f: vec3<f64>, corner: u32) -> Corner {
    let b = vec3<u32>(corner & 1u, (corner >> 1u) & 1u, (corner >> 2u) & 1u);
    var w = 1.0lf;
    for (var a = 0u; a < 3u; a++) {
        w *= select(1.0lf - f[a], f[a], b[a] == 1u);
    }
    let here = base + b;
    return Corner(here, here.x + p.dims.x * (here.y + p.dims.y * here.z), w);
}
";

/// The prelude of the kernels that sample the grid (here and in `baroclinic.rs`): the sort's
/// (`thread_index`), and `Sampling`.
pub(crate) fn prelude() -> String {
    format!("{}\n{SAMPLING}", sort::prelude(""))
}

/// `Sampling` of the kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(crate) struct SamplingUniform {
    dims: [u32; 4],
    strides: [u32; 4],
    points: u32,
    gradient: u32,
    pad: [u32; 2],
    inv_one: f64,
    inv_two: f64,
}

impl SamplingUniform {
    /// `points` points sampled on `grid`, the first `gradient` of them with the gradient.
    pub(crate) fn new(grid: &FittedGrid, points: u64, gradient: u64) -> Self {
        let [nx, ny, _] = grid.dims;
        let h = grid.spacing;
        Self {
            dims: dims4(
                grid.dims
                    .iter()
                    .map(|&d| d as u64)
                    .chain([grid.len() as u64]),
            ),
            strides: [1, nx as u32, (nx * ny) as u32, 0],
            points: points as u32,
            gradient: gradient as u32,
            pad: [0; 2],
            inv_one: 1.0 / h,
            inv_two: 1.0 / (2.0 * h),
        }
    }
}

/// Refuses, as [`GpuError::Limit`], a device without double precision, a grid of fewer than two points along
/// an axis (whose differences the CPU defines) and grids or point counts beyond 32-bit indices (`points`
/// points, nine numbers each at most).
pub(crate) fn check(gpu: &Gpu, grid: &FittedGrid, points: u64) -> Result<(), GpuError> {
    if !gpu.has_f64() {
        return Err(GpuError::Limit(
            "the grid's differences and blends compute in double precision, which the adapter lacks"
                .into(),
        ));
    }
    if grid.dims.iter().any(|&d| d < 2) {
        return Err(GpuError::Limit(format!(
            "a grid of {:?} points has an axis without differences",
            grid.dims
        )));
    }
    let n = grid.len() as u64;
    if 3 * n >= u32::MAX as u64 || 9 * points >= u32::MAX as u64 {
        return Err(GpuError::Limit(format!(
            "{points} points on {n} grid points: too many for 32-bit indices"
        )));
    }
    Ok(())
}

/// The uniform of `sample_potential.wgsl` ([`CopyUniform`]).
const COPY: &str = "
struct Copy {
    // Grid points per axis; padded entries per axis.
    dims: vec4<u32>,
    padded: vec4<u32>,
    // The component written; whether it was solved (else its interior is zero).
    component: u32, solved: u32, pad0: u32, pad1: u32,
}
";

/// `Copy` of `sample_potential.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct CopyUniform {
    dims: [u32; 4],
    padded: [u32; 4],
    component: u32,
    solved: u32,
    pad: [u32; 2],
}

/// The sampling on the GPU; its buffers grow to the largest grid and point count and are reused.
pub struct GpuSampling {
    gpu: Arc<Gpu>,
    params: wgpu::Buffer,
    /// Potential, grid velocity, stencils, velocity at the points, gradient at the vortons; the outer
    /// layer's values of a potential kept from the solver.
    buffers: [Option<wgpu::Buffer>; 6],
    stencils: Vec<[f32; 4]>,
    /// The velocities and gradients as read back, reused.
    velocity: Vec<f32>,
    gradient: Vec<f32>,
    /// The field the solver leaves its solutions in (`GpuPoisson::share_faces`), if shared.
    field: Option<Scratch>,
    /// The grid of the potential kept from the solver, its components taken so far, and the copy's
    /// uniform; `None`: the potential buffer holds no such potential.
    kept: Option<([usize; 3], [bool; 3])>,
    copy_params: wgpu::Buffer,
    /// The boundary values as uploaded, reused.
    values: Vec<f64>,
    /// Bytes of potential sent up since the sampling was made.
    potential_up: u64,
}

impl GpuSampling {
    /// The sampling on `gpu`.
    pub fn new(gpu: Arc<Gpu>) -> Self {
        let params = gpu.uniform::<SamplingUniform>("sampling params");
        let copy_params = gpu.uniform::<CopyUniform>("sampling potential params");
        Self {
            gpu,
            params,
            buffers: Default::default(),
            stencils: Vec::new(),
            velocity: Vec::new(),
            gradient: Vec::new(),
            field: None,
            kept: None,
            copy_params,
            values: Vec::new(),
            potential_up: 0,
        }
    }

    /// Bytes of vector potential sent up from the host since the sampling was made
    /// ([`GridField::Potential`]; none for [`GridField::KeptPotential`]).
    pub fn potential_bytes_up(&self) -> u64 {
        self.potential_up
    }

    /// Offers to take the Poisson technique's potential from the solver's solutions in `field`, where a
    /// `GpuPoisson` sharing it (`GpuPoisson::share_faces`) leaves them, instead of an upload:
    /// [`GridDevice::begin_potential`], [`GridDevice::potential_component`] and
    /// [`GridField::KeptPotential`].
    pub fn share_field(&mut self, field: Scratch) {
        self.field = Some(field);
    }

    /// Starts a potential kept on the device ([`GridDevice::begin_potential`]).
    ///
    /// # Errors
    /// [`GpuError::Limit`] as for [`sample`](Self::sample); the device's own failures.
    fn begin_potential(&mut self, dims: [usize; 3], boundary: &[DVec3]) -> Result<(), GpuError> {
        self.kept = None;
        let grid = FittedGrid {
            dims,
            origin: [0.0; 3],
            spacing: 1.0,
        };
        check(&self.gpu, &grid, 0)?;
        if dims.iter().any(|&d| d < 3) {
            return Err(GpuError::Limit(format!(
                "a grid of {dims:?} points has no interior to take from the solver"
            )));
        }
        let outer = outer_points(dims);
        if boundary.len() != outer {
            return Err(GpuError::Internal(format!(
                "{} boundary values for the {outer} points of the grid's outer layer",
                boundary.len()
            )));
        }
        let n = grid.len() as u64;
        let gpu = self.gpu.clone();
        let (potential, values) = (24 * n, 24 * outer as u64);
        for (label, bytes) in [
            ("sampling potential", potential),
            ("sampling boundary values", values),
        ] {
            gpu.check_binding(label, bytes)?;
        }
        let [slot_potential, .., slot_values] = &mut self.buffers;
        let values_buffer = gpu.allocating("the kept potential", || {
            sized(&gpu, slot_potential, "sampling potential", potential);
            sized(&gpu, slot_values, "sampling boundary values", values)
        })?;
        self.values.clear();
        self.values
            .extend(boundary.iter().flat_map(|v| v.to_array()));
        gpu.write(&values_buffer, &self.values);
        self.kept = Some((dims, [false; 3]));
        Ok(())
    }

    /// Takes one component of the kept potential ([`GridDevice::potential_component`]).
    fn potential_component(&mut self, component: usize, solved: bool) -> Result<(), GpuError> {
        let Some((dims, taken)) = self.kept.as_mut() else {
            return Err(GpuError::Internal(
                "a component of the potential before its start".into(),
            ));
        };
        if component > 2 {
            return Err(GpuError::Internal(format!("no component {component}")));
        }
        let layout = Layout::new(*dims);
        let len = 8 * layout.len() as u64;
        let b = &self.buffers;
        let (potential, values) = (b[0].clone(), b[5].clone());
        let (potential, values) = potential.zip(values).expect("sized by begin_potential");
        let field = match (&self.field, solved) {
            (Some(field), true) => {
                if field.bytes() < len {
                    return Err(GpuError::Internal(
                        "the potential was asked for a solution that the solver did not leave in the \
                         field"
                            .into(),
                    ));
                }
                self.gpu.check_binding("the solver's solution", len)?;
                field.get(&self.gpu, "the solver's solution", len)?.0
            }
            (None, true) => {
                return Err(GpuError::Internal(
                    "a solved component without a field to take it from".into(),
                ))
            }
            // Unread: the values stand in.
            (_, false) => values.clone(),
        };
        let n = layout.dims.iter().product::<usize>() as u64;
        self.gpu.write(
            &self.copy_params,
            &[CopyUniform {
                dims: dims4(dims.map(|d| d as u64)),
                padded: dims4(layout.padded.map(|d| d as u64)),
                component: component as u32,
                solved: solved as u32,
                pad: [0; 2],
            }],
        );
        let gpu = &self.gpu;
        let prelude = format!("const WG: u32 = {WG}u;\n{COPY}\n{OUTER_LAYER}");
        let pipeline = gpu.pipeline("vpm sampling potential", &prelude, POTENTIAL)?;
        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        let launch = gpu.launch_args(
            "vpm sampling potential",
            pipeline,
            &[&self.copy_params, &field, &values, &potential],
            fold_groups(n.div_ceil(WG), per_axis),
        )?;
        gpu.submit_launches("vpm sampling potential", |_| {}, [&launch]);
        taken[component] = true;
        Ok(())
    }

    /// As the simulation holds it.
    pub fn shared(gpu: Arc<Gpu>) -> SharedGridDevice {
        SharedGridDevice(Arc::new(Mutex::new(Self::new(gpu))))
    }

    /// Device memory held (bytes).
    pub fn bytes(&self) -> u64 {
        held(&self.buffers, &self.params)
    }

    /// The velocity of `field` on `grid` sampled at the points of `at` into `out`
    /// ([`GridDevice::sample`]).
    ///
    /// # Errors
    /// [`GpuError::Limit`] for a device without double precision, a grid of fewer than two points along an
    /// axis (whose differences the CPU defines), more points than its 32-bit indices count or a buffer beyond
    /// the adapter's binding size; the device's own failures.
    pub fn sample(
        &mut self,
        grid: &FittedGrid,
        field: GridField,
        at: Samples,
        out: Sampled,
    ) -> Result<(), GpuError> {
        let gpu = self.gpu.clone();
        let n = grid.len() as u64;
        let vortons = at.vortons.len() as u64;
        let gradient = if at.gradient { vortons } else { 0 };
        let m = vortons + at.tracers.len() as u64;
        assert_eq!(out.u.len() as u64, vortons, "a velocity per vorton");
        assert_eq!(
            out.jac.len() as u64,
            gradient,
            "a gradient per vorton asked"
        );
        assert_eq!(
            out.u_tracers.len(),
            at.tracers.len(),
            "a velocity per tracer"
        );
        check(&gpu, grid, m)?;
        if m == 0 {
            return Ok(());
        }
        self.stencils.resize(m as usize, [0.0; 4]);
        self.stencils
            .par_iter_mut()
            .zip(at.vortons.par_iter().chain(at.tracers))
            .with_min_len(1024)
            .for_each(|(s, &p)| *s = stencil(grid, p));
        let curl = !matches!(field, GridField::Velocity(_));
        if let GridField::KeptPotential = field {
            if self.kept != Some((grid.dims, [true; 3])) {
                return Err(GpuError::Internal(
                    "the kept potential was sampled on another grid, or before all its components"
                        .into(),
                ));
            }
        } else {
            // The potential buffer is written, or may be reallocated, below.
            self.kept = None;
        }
        let sizes = [
            if curl { 24 * n } else { 4 },
            24 * n,
            16 * m,
            12 * m,
            36 * gradient,
        ];
        const LABELS: [&str; 5] = [
            "sampling potential",
            "sampling grid velocity",
            "sampling stencils",
            "sampling velocity",
            "sampling gradient",
        ];
        let b = sized_all(
            &gpu,
            "the sampling's grid",
            &mut self.buffers[..5],
            &LABELS,
            &sizes,
        )?;
        gpu.write(&self.params, &[SamplingUniform::new(grid, m, gradient)]);
        match field {
            GridField::Potential(a) => {
                assert_eq!(a.len() as u64, 3 * n, "three components per grid point");
                gpu.write(&b[0], a);
                self.potential_up += 8 * a.len() as u64;
            }
            GridField::Velocity(u) => {
                assert_eq!(u.len() as u64, n, "a velocity per grid point");
                gpu.write(&b[1], u);
            }
            GridField::KeptPotential => {}
        }
        gpu.write(&b[2], &self.stencils);

        let per_axis = gpu.limits().max_compute_workgroups_per_dimension;
        let launch = |name: &str, source: &str, args: &[&dyn Bindable], groups: u64| {
            let key = format!("vpm sampling {name}");
            let pipeline = gpu.pipeline(&key, &prelude(), source)?;
            gpu.launch_args(&key, pipeline, args, fold_groups(groups, per_axis))
        };
        let mut launches = Vec::new();
        if curl {
            launches.push(launch(
                "curl",
                CURL,
                &[&self.params, &b[0], &b[1]],
                n.div_ceil(WG),
            )?);
        }
        launches.push(launch(
            "points",
            POINTS,
            &[&self.params, &b[1], &b[2], &b[3], &b[4]],
            m.div_ceil(WG),
        )?);
        gpu.submit_launches("vpm sampling", |_| {}, &launches);
        let (velocity, jac) = (&mut self.velocity, &mut self.gradient);
        velocity.resize(3 * m as usize, 0.0);
        jac.resize(9 * gradient as usize, 0.0);
        gpu.read_into(
            &[(&b[3], 0, 12 * m), (&b[4], 0, 36 * gradient)],
            |k, bytes| {
                let to = if k == 0 { &mut *velocity } else { &mut *jac };
                copy_bytes(bytemuck::cast_slice_mut(to), bytes)
            },
        )?;
        let vector = |v: &[f32]| DVec3::new(v[0] as f64, v[1] as f64, v[2] as f64);
        let (at_vortons, at_tracers) = velocity.split_at(3 * vortons as usize);
        out.u
            .par_iter_mut()
            .zip(at_vortons.par_chunks_exact(3))
            .with_min_len(1024)
            .for_each(|(o, v)| *o = vector(v));
        out.u_tracers
            .par_iter_mut()
            .zip(at_tracers.par_chunks_exact(3))
            .with_min_len(1024)
            .for_each(|(o, v)| *o = vector(v));
        out.jac
            .par_iter_mut()
            .zip(jac.par_chunks_exact(9))
            .with_min_len(1024)
            .for_each(|(o, j)| *o = std::array::from_fn(|q| j[q] as f64));
        Ok(())
    }
}

impl GridDevice for GpuSampling {
    fn sample(
        &mut self,
        grid: &FittedGrid,
        field: GridField,
        at: Samples,
        out: Sampled,
    ) -> Result<bool, String> {
        // No double precision, or beyond the device's indices or bindings: the CPU samples.
        taken(GpuSampling::sample(self, grid, field, at, out).map(|()| true))
    }

    fn potential_field(&self) -> Option<u64> {
        self.field.as_ref().map(Scratch::id)
    }

    fn begin_potential(&mut self, dims: [usize; 3], boundary: &[DVec3]) -> Result<bool, String> {
        taken(GpuSampling::begin_potential(self, dims, boundary).map(|()| true))
    }

    fn potential_component(&mut self, component: usize, solved: bool) -> Result<(), String> {
        GpuSampling::potential_component(self, component, solved).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::validate_wgsl;

    /// Both kernels parse and validate without a GPU, and the uniform has the layout WGSL gives `Sampling`.
    #[test]
    fn the_kernels_compile_without_a_gpu() {
        for (name, source) in [("curl", CURL), ("points", POINTS)] {
            let code = format!("{}\n{source}", prelude());
            validate_wgsl(&code).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let code = format!("const WG: u32 = {WG}u;\n{COPY}\n{OUTER_LAYER}\n{POTENTIAL}");
        validate_wgsl(&code).unwrap_or_else(|e| panic!("potential: {e}"));
        assert_eq!(std::mem::size_of::<SamplingUniform>(), 64);
        assert_eq!(std::mem::size_of::<CopyUniform>(), 48);
    }
}
