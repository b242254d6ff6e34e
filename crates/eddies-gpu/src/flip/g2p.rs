//! Stage "grid_to_particles_advect" on the device: the grid-to-particle transfer, advection and the
//! obstacles' push-out (`g2p.wgsl`, with `shapes.wgsl`).

use std::time::Instant;

use eddies::flip::{
    Advection, Boundary, Displacement, GridTally, KeptParticles, Particles, Projection, Transfer,
};
use eddies::grid::MacGrid;
use rayon::prelude::*;

use super::shapes;
use super::{
    face_layout, grid_key, GpuTransfer, MoveUniform, ProjectUniform, EXTRAPOLATE, G2P, LOAD,
    PROJECT, WG,
};
use crate::device::{BufferRange, GpuError, Launch};

/// The cells of `grid` with one halo cell per side: the pressure solve's padded layout.
fn padded_cells<const D: usize>(grid: &MacGrid<D>) -> u64 {
    grid.dims.iter().map(|&n| n as u64 + 2).product()
}

/// Cells per block of the grid's tallies: a workgroup adds a block (`project.wgsl`, OP 3 and OP 4).
const BLOCK: u64 = GridTally::BLOCK as u64;
const _: () = assert!(BLOCK == WG);

/// The blocks of [`GridTally::BLOCK`] cells of `grid` (`project.wgsl`, OP 3 and OP 4).
fn tally_blocks<const D: usize>(grid: &MacGrid<D>) -> u64 {
    let cells: u64 = grid.dims.iter().map(|&n| n as u64).product();
    cells.div_ceil(GridTally::BLOCK as u64)
}

/// The constants of `project.wgsl`'s `op`.
pub(super) fn project_consts(op: u32) -> String {
    format!(
        "const OP: u32 = {op}u;\nconst BLOCK: u32 = {}u;",
        GridTally::BLOCK
    )
}

/// The uniform of `project.wgsl`'s OP 0 and OP 1 for `step` on `grid`.
fn project_uniform<const D: usize>(grid: &MacGrid<D>, step: &Projection<D>) -> ProjectUniform {
    let (dims, base, _) = face_layout(grid);
    let mut uniform = ProjectUniform {
        dims,
        base,
        coef: step.coef,
        inv_h: step.inv_h,
        scale: step.scale,
        closed: (step.boundary == Boundary::Closed) as u32,
        ..Default::default()
    };
    for k in 0..D {
        if let Some(f) = step.force[k] {
            uniform.force[k] = f;
            uniform.forced |= 1 << k;
        }
    }
    uniform
}

impl GpuTransfer {
    /// [`TransferDevice::rhs_to_faces`](eddies::flip::TransferDevice::rhs_to_faces): one launch
    /// (`project.wgsl`, OP 0) submitted without waiting, over the face field (dead between the read-back of
    /// the derived velocities and the solve). Where the transfer derived the fill fraction, the launch keeps
    /// it in the counts for [`excess_on`](Self::excess_on). `false` where the fields no longer hold this
    /// substep's sums on `grid`, or as [`projection`](Self::projection) says.
    pub(super) fn rhs_on<const D: usize>(
        &mut self,
        grid: &MacGrid<D>,
        step: &Projection<D>,
    ) -> Result<bool, GpuError> {
        let key = Some(grid_key(grid));
        if self.sums_of != key {
            return Ok(false);
        }
        let cells: u64 = grid.dims.iter().map(|&n| n as u64).product();
        let keep_fill = self.fill_of == key;
        let uniform = ProjectUniform {
            keep_fill: keep_fill as u32,
            ..project_uniform(grid, step)
        };
        self.tally_of = None;
        let Some(launch) = self.projection(grid, step.kept, 0, cells, uniform)? else {
            return Ok(false);
        };
        // The fill fractions' sums per block, for the step's tally, while the fill fractions live.
        let fill = match keep_fill {
            true => self.projection(grid, step.kept, 3, BLOCK * tally_blocks(grid), uniform)?,
            false => None,
        };
        self.gpu.submit_launches(
            "flip right-hand side",
            |_| {},
            std::iter::once(&launch).chain(&fill),
        );
        if keep_fill {
            self.fill_in_counts = key;
        }
        self.fill_blocks_of = fill.and(key);
        self.times.right_hand_sides += 1;
        Ok(true)
    }

    /// [`TransferDevice::project_velocity`](eddies::flip::TransferDevice::project_velocity): one launch
    /// (`project.wgsl`, OP 1) submitted without waiting, before the volume correction's solve writes the
    /// face field over the pressure. `false` as [`rhs_on`](Self::rhs_on) says, or where the face field
    /// cannot hold the pressure of this grid.
    pub(super) fn project_on<const D: usize>(
        &mut self,
        grid: &MacGrid<D>,
        step: &Projection<D>,
    ) -> Result<bool, GpuError> {
        let faces: u64 = grid.u.iter().map(|g| g.data.len() as u64).sum();
        if self.sums_of != Some(grid_key(grid)) || self.faces.bytes() < 8 * padded_cells(grid) {
            return Ok(false);
        }
        let uniform = project_uniform(grid, step);
        let Some(launch) = self.projection(grid, step.kept, 1, faces, uniform)? else {
            return Ok(false);
        };
        // The largest divergences per block, for the step's tally, before the launch rounds the velocity.
        let key = Some(grid_key(grid));
        let divergence = match self.fill_blocks_of == key {
            true => self.projection(grid, step.kept, 4, BLOCK * tally_blocks(grid), uniform)?,
            false => None,
        };
        self.gpu.submit_launches(
            "flip projection",
            |_| {},
            divergence.iter().chain(std::iter::once(&launch)),
        );
        self.tally_of = divergence.and(key);
        self.fill_blocks_of = None;
        (self.sums_of, self.fill_of) = (None, None);
        self.projected_of = Some(grid_key(grid));
        self.times.projections += 1;
        Ok(true)
    }

    /// [`TransferDevice::excess_to_faces`](eddies::flip::TransferDevice::excess_to_faces): one launch
    /// (`project.wgsl`, OP 2) submitted without waiting, over the pressure that
    /// [`project_on`](Self::project_on) read. `false` unless the device projected this substep's velocity on
    /// `grid` and keeps its fill fraction in the counts ([`rhs_on`](Self::rhs_on)), or as
    /// [`projection`](Self::projection) says.
    pub(super) fn excess_on<const D: usize>(
        &mut self,
        grid: &MacGrid<D>,
        kappa: f64,
        kept: KeptParticles,
    ) -> Result<bool, GpuError> {
        let key = Some(grid_key(grid));
        let ready = self.projected_of == key && self.fill_in_counts == key;
        if !ready || self.faces.bytes() < 8 * padded_cells(grid) {
            return Ok(false);
        }
        let cells: u64 = grid.dims.iter().map(|&n| n as u64).product();
        let (dims, base, _) = face_layout(grid);
        let uniform = ProjectUniform {
            dims,
            base,
            kappa,
            ..Default::default()
        };
        let Some(launch) = self.projection(grid, kept, 2, cells, uniform)? else {
            return Ok(false);
        };
        self.gpu
            .submit_launches("flip volume right-hand side", |_| {}, [&launch]);
        self.times.volume_right_hand_sides += 1;
        Ok(true)
    }

    /// The launch of `project.wgsl`'s `op` over `threads` threads with `uniform`, written; `None` where the
    /// particles kept are not `kept`'s, or the adapter has no double precision.
    fn projection<const D: usize>(
        &mut self,
        grid: &MacGrid<D>,
        kept: KeptParticles,
        op: u32,
        threads: u64,
        uniform: ProjectUniform,
    ) -> Result<Option<Launch>, GpuError> {
        let ready = self.kept.is_some_and(|(owner, ..)| owner == kept) && self.gpu.has_f64();
        if !ready {
            return Ok(None);
        }
        let (padded, _) = self.faces.get(
            &self.gpu,
            "the projection's right-hand side and pressure",
            8 * padded_cells(grid),
        )?;
        let fill = self.fill_range(grid);
        let tally_bytes = 16 * tally_blocks(grid);
        if self
            .grid_tallies
            .as_ref()
            .is_none_or(|t| t.size() < tally_bytes)
        {
            self.grid_tallies = None;
            let gpu = &self.gpu;
            self.grid_tallies = Some(gpu.allocating("the grid's tallies", || {
                gpu.buffer("flip grid tallies", tally_bytes)
            })?);
        }
        let tallies = self.grid_tallies.as_ref().expect("allocated");
        let b = self.buffers.as_ref().expect("buffers of the transfer");
        self.gpu.write(&b.project, &[uniform]);
        self.launch::<D>(
            "project",
            PROJECT,
            &project_consts(op),
            &[&b.params, &b.project, &b.fields, &padded, &fill, tallies],
            threads.div_ceil(WG),
        )
        .map(Some)
    }

    /// [`TransferDevice::grid_tally`](eddies::flip::TransferDevice::grid_tally): the blocks' tallies that
    /// [`rhs_on`](Self::rhs_on) and [`project_on`](Self::project_on) left for `grid`, read back and folded
    /// on the host ([`GridTally::fold`]); `None` where they did not both run since the last transfer.
    pub(super) fn grid_tally_on<const D: usize>(
        &mut self,
        grid: &MacGrid<D>,
    ) -> Result<Option<GridTally>, GpuError> {
        if self.tally_of != Some(grid_key(grid)) {
            return Ok(None);
        }
        let blocks = tally_blocks(grid) as usize;
        let buffer = self
            .grid_tallies
            .as_ref()
            .expect("written by the projection");
        let mut tally = None;
        self.gpu
            .read_into(&[(buffer, 0, 16 * blocks as u64)], |_, bytes| {
                let value = |i: usize| {
                    f64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"))
                };
                // −1 stands for a divergence that is not a number.
                let divergence = (blocks..2 * blocks).map(value).map(|d| match d < 0.0 {
                    true => f64::NAN,
                    false => d,
                });
                tally = Some(GridTally::fold((0..blocks).map(value), divergence));
            })?;
        self.times.grid_tallies += 1;
        Ok(tally)
    }

    /// The grid-to-particle pass (see
    /// [`TransferDevice::grid_to_particles_advect`](eddies::flip::TransferDevice::grid_to_particles_advect)),
    /// its failures as the device reports them.
    pub(super) fn advect_on<const D: usize>(
        &mut self,
        particles: &mut Particles<D>,
        step: &Advection<'_, D>,
        program: &[shapes::Instr],
        ranges: &[[u32; 4]],
    ) -> Result<(), GpuError> {
        let start = Instant::now();
        let apic = step.transfer == Transfer::Apic;
        let grid = step.u;
        let n = if let Some(owner) = step.kept {
            self.prepare_kept(owner, grid, apic)?.ok_or_else(|| {
                GpuError::Internal(
                    "the particle pass was asked to move kept particles that the device no longer keeps \
                     (a device that keeps particles serves one simulation at a time)"
                        .into(),
                )
            })?
        } else {
            self.upload(particles, grid, apic, false, step.unchanged)?;
            self.kept = None;
            particles.len() as u64
        };
        self.resident = None;
        let mut uniform = MoveUniform {
            dt: step.dt as f32,
            pic_ratio: step.pic_ratio as f32,
            mode: match step.transfer {
                Transfer::Pic => 0,
                Transfer::Flip => 1,
                Transfer::Apic => 2,
            },
            closed: (step.boundary == Boundary::Closed) as u32,
            obstacles: ranges.len() as u32,
            ..Default::default()
        };
        let instr = std::mem::size_of::<shapes::Instr>() as u64;
        let fits = self.obstacles.as_ref().is_some_and(|(p, r)| {
            p.size() >= program.len() as u64 * instr && r.size() >= ranges.len() as u64 * 16
        });
        if !fits {
            let gpu = &self.gpu;
            self.obstacles = Some(gpu.allocating("the obstacles", || {
                (
                    gpu.buffer("obstacle programs", (program.len() as u64).max(16) * instr),
                    gpu.buffer("obstacle ranges", (ranges.len() as u64).max(16) * 16),
                )
            })?);
        }
        // `[u, u − u_old]` per face, component after component, and the displacement laid out alike. Where
        // the fields still hold this substep's particle-to-grid sums, `u` alone: the device derives `u_old`
        // from them (`load.wgsl`).
        // Where the device projected the velocity itself, the fields hold `[u, u − u_old]` already
        // (`project.wgsl`), and nothing is sent.
        let projected = std::mem::take(&mut self.projected_of);
        if step.projected && projected != Some(grid_key(grid)) {
            return Err(GpuError::Internal(
                "the particle pass was asked for a velocity that the device did not project".into(),
            ));
        }
        let derive_old = !step.projected && step.unchanged && self.sums_of == Some(grid_key(grid));
        let send = !step.projected && !derive_old;
        self.forget_sums();
        let mut fields = std::mem::take(&mut self.fields);
        let mut velocity = std::mem::take(&mut self.velocity);
        let mut disp_host = std::mem::take(&mut self.displacement);
        fields.clear();
        velocity.clear();
        disp_host.clear();
        let faces: usize = grid.u.iter().map(|g| g.data.len()).sum();
        if matches!(step.displacement, Displacement::Device)
            && self.faces.bytes() < 4 * faces as u64
        {
            return Err(GpuError::Internal(
                "the particle pass was asked for a displacement that no solve left on the device"
                    .into(),
            ));
        }
        let (disp_buffer, _) = self.faces.get(
            &self.gpu,
            "the volume correction's displacement",
            4 * faces as u64,
        )?;
        (uniform.dims, uniform.base, _) = face_layout(grid);
        for k in 0..D {
            let (u, old) = (&grid.u[k].data, &step.u_old.u[k].data);
            if derive_old {
                velocity.par_extend(u.par_iter().map(|&u| u as f32));
            } else if send {
                fields.par_extend(
                    (0..u.len())
                        .into_par_iter()
                        .map(|j| [u[j] as f32, (u[j] - old[j]) as f32]),
                );
            }
            if let Displacement::Host(d) = step.displacement {
                disp_host.par_extend(d.u[k].data.par_iter().map(|&d| d as f32));
            }
        }
        uniform.displaced = !matches!(step.displacement, Displacement::None) as u32;
        let gpu = self.gpu.clone();
        let b = self.buffers.as_ref().expect("buffers ensured");
        let (program_buffer, ranges_buffer) = self.obstacles.as_ref().expect("obstacles' buffers");
        gpu.write(&b.moves, &[uniform]);
        let mut launches = Vec::new();
        if derive_old {
            // The velocity goes into the second of the extrapolation's masks, which the load reads before
            // the extrapolation's first launch writes the first.
            let (_, staged) = self.masks(faces as u64)?;
            gpu.write_at(
                &staged.buffer,
                staged.offset,
                bytemuck::cast_slice(&velocity),
            );
            launches.push(self.launch::<D>(
                "load",
                LOAD,
                "",
                &[&b.moves, &b.fields, &staged],
                (faces as u64).div_ceil(WG),
            )?);
        } else if send {
            gpu.write(&b.fields, &fields);
        }
        if !disp_host.is_empty() {
            gpu.write(&disp_buffer, &disp_host);
        }
        self.times.grid_bytes_up += std::mem::size_of_val(&fields[..]) as u64
            + std::mem::size_of_val(&velocity[..]) as u64
            + std::mem::size_of_val(&disp_host[..]) as u64;
        self.fields = fields;
        self.velocity = velocity;
        self.displacement = disp_host;
        gpu.write(program_buffer, program);
        gpu.write(ranges_buffer, ranges);
        let uploaded = Instant::now();

        match step.extrapolate {
            Some(layers) if step.kept.is_some() => launches.extend(self.extrapolation::<D>(
                faces as u64,
                layers,
                uniform.closed != 0,
            )?),
            Some(_) => {
                return Err(GpuError::Internal(
                    "the particle pass was asked to extrapolate without kept particles, whose cells it \
                     takes for the liquid"
                        .into(),
                ))
            }
            None => {}
        }
        let b = self.buffers.as_ref().expect("buffers ensured");
        launches.push(self.launch::<D>(
            "g2p",
            G2P,
            "",
            &[
                &b.params,
                &b.moves,
                &b.fields,
                &b.pos,
                &b.vel,
                &b.affine,
                program_buffer,
                ranges_buffer,
                &disp_buffer,
            ],
            n.div_ceil(WG),
        )?);
        self.submit(&launches, 0)?;
        let ran = Instant::now();
        if step.kept.is_some() {
            // The moved particles stay on the device until `read_kept`.
            self.times.record(start, uploaded, ran);
            return Ok(());
        }

        self.read_particles(n, apic, particles)?;
        self.times.record(start, uploaded, ran);
        Ok(())
    }

    /// The grid velocity (m/s) that the last particle pass read, per face, each component's faces after
    /// the last's as the host's grids lie: the host's projected velocity, extrapolated on the device when
    /// the pass did that ([`Advection::extrapolate`]). For inspection: it waits for the device.
    ///
    /// # Errors
    /// What the device reported.
    ///
    /// [`Advection::extrapolate`]: eddies::flip::Advection::extrapolate
    pub fn face_velocities(&self) -> Result<Vec<f32>, GpuError> {
        let Some(b) = self.buffers.as_ref() else {
            return Ok(Vec::new());
        };
        let bytes = self.gpu.read(&[(&b.fields, 0, 8 * b.faces)])?;
        let pairs: Vec<[f32; 2]> = bytemuck::pod_collect_to_vec(&bytes[0]);
        Ok(pairs.iter().map(|f| f[0]).collect())
    }

    /// Two ranges of the scratch buffer, 4 bytes for each of `faces` faces: the extrapolation's masks of
    /// known faces, the second of which first stages the host's velocity for `load.wgsl`.
    fn masks(&self, faces: u64) -> Result<(BufferRange, BufferRange), GpuError> {
        let align = self.gpu.limits().min_storage_buffer_offset_alignment as u64;
        let size = 4 * faces.max(1);
        let stride = size.next_multiple_of(align);
        let (buffer, _) =
            self.scratch
                .get(&self.gpu, "the extrapolation's known faces", stride + size)?;
        let mask = |k: u64| BufferRange {
            buffer: buffer.clone(),
            offset: k * stride,
            size,
        };
        Ok((mask(0), mask(1)))
    }

    /// The launches of the velocity extrapolation on the device (`extrapolate.wgsl`;
    /// [`Advection::extrapolate`]) over the `faces` faces of the fields the pass reads: the known faces,
    /// `layers` layers, and the closed walls' faces back to 0. The known faces' two masks (4 bytes a face
    /// each) lie in the scratch buffer, free during the pass (the sort's prefix sums, or the solves'
    /// vectors, are dead by then).
    ///
    /// [`Advection::extrapolate`]: eddies::flip::Advection::extrapolate
    fn extrapolation<const D: usize>(
        &self,
        faces: u64,
        layers: usize,
        closed: bool,
    ) -> Result<Vec<Launch>, GpuError> {
        let (first, second) = self.masks(faces)?;
        let b = self.buffers.as_ref().expect("buffers ensured");
        let groups = faces.div_ceil(WG);
        let op = |op: u32, from: &BufferRange, to: &BufferRange| {
            self.launch::<D>(
                "extrapolate",
                EXTRAPOLATE,
                &format!("const OP: u32 = {op}u;"),
                &[&b.params, &b.moves, &b.fields, from, to],
                groups,
            )
        };
        // The mark reads no mask: it writes the first, and binds the second only as the layout asks.
        let mut out = vec![op(0, &second, &first)?];
        let (mut from, mut to) = (&first, &second);
        for _ in 0..layers {
            out.push(op(1, from, to)?);
            std::mem::swap(&mut from, &mut to);
        }
        if closed {
            out.push(op(2, from, to)?);
        }
        Ok(out)
    }
}
