//! Stage "emit": emitters and sinks, one dispatch each in the scene's order (`emit.wgsl`).

use eddies::reint::{EmitterCells, SinkCells};

use super::Buffers;
use crate::device::{dispatch, Gpu, GpuError};

/// The kernel's WGSL, after the prelude and `common.wgsl`.
pub(super) const SOURCE: &str = include_str!("emit.wgsl");

/// One source's constants (`Source` in `emit.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct Source {
    first: u32,
    count: u32,
    pad1: u32,
    sink: u32,
    substance: u32,
    fill_to: f32,
    keep: f32,
    pad: u32,
    velocity: [f32; 4],
}

/// What a source is, as the library describes it (its cell list is on the device).
enum Role<const D: usize> {
    Emitter(EmitterCells<D>),
    Sink(SinkCells),
}

/// A source with its uniform and bind groups.
struct Bound<const D: usize> {
    constants: Source,
    uniform: wgpu::Buffer,
    bind: [wgpu::BindGroup; 2],
    role: Role<D>,
}

/// The emit kernel and the scene's sources.
pub(super) struct Emit<const D: usize> {
    pipeline: Option<std::sync::Arc<wgpu::ComputePipeline>>,
    sources: Vec<Bound<D>>,
}

impl<const D: usize> Emit<D> {
    pub fn new(
        gpu: &Gpu,
        prelude: &str,
        variant: &str,
        b: &Buffers,
        emitters: &[EmitterCells<D>],
        sinks: &[SinkCells],
    ) -> Result<Self, GpuError> {
        let mut cells: Vec<u32> = Vec::new();
        let mut listed = Vec::new();
        for e in emitters {
            let velocity = std::array::from_fn(|a| if a < D { e.velocity[a] } else { 0.0 });
            listed.push((
                Source {
                    first: cells.len() as u32,
                    count: e.cells.len() as u32,
                    substance: e.substance as u32,
                    fill_to: e.target,
                    velocity,
                    ..Default::default()
                },
                Role::Emitter(EmitterCells {
                    cells: Vec::new(),
                    ..e.clone()
                }),
            ));
            cells.extend(&e.cells);
        }
        for s in sinks {
            listed.push((
                Source {
                    first: cells.len() as u32,
                    count: s.cells.len() as u32,
                    sink: 1,
                    ..Default::default()
                },
                Role::Sink(SinkCells {
                    cells: Vec::new(),
                    ..s.clone()
                }),
            ));
            cells.extend(&s.cells);
        }
        listed.retain(|(s, _)| s.count > 0);
        if listed.is_empty() {
            return Ok(Self {
                pipeline: None,
                sources: Vec::new(),
            });
        }
        let pipeline = gpu.pipeline(&format!("reint emit {variant}"), prelude, SOURCE)?;
        let cell_buffer = gpu.buffer_with("source cells", &cells);
        let sources = listed
            .into_iter()
            .map(|(constants, role)| {
                let uniform = gpu.uniform::<Source>("source");
                gpu.write(&uniform, &[constants]);
                let bind = std::array::from_fn(|cur| {
                    gpu.bind(
                        &pipeline,
                        &[
                            &b.params,
                            &uniform,
                            &cell_buffer,
                            &b.motion,
                            &b.mass[cur],
                            &b.exchange,
                        ],
                    )
                });
                Bound {
                    constants,
                    uniform,
                    bind,
                    role,
                }
            })
            .collect();
        Ok(Self {
            pipeline: Some(pipeline),
            sources,
        })
    }

    /// Encodes the sources that act in a step of `dt` seconds starting at `time`.
    pub fn encode(
        &self,
        gpu: &Gpu,
        encoder: &mut wgpu::CommandEncoder,
        cur: usize,
        time: f64,
        dt: f64,
    ) {
        let Some(pipeline) = &self.pipeline else {
            return;
        };
        for s in &self.sources {
            match &s.role {
                Role::Emitter(e) if !e.active_at(time) => continue,
                Role::Emitter(_) => {}
                // The keep factor depends on the step.
                Role::Sink(sink) => gpu.write(
                    &s.uniform,
                    &[Source {
                        keep: sink.keep(dt),
                        ..s.constants
                    }],
                ),
            }
            let groups = [s.constants.count.div_ceil(super::LIST_WORKGROUP), 1, 1];
            dispatch(encoder, "emit", pipeline, &s.bind[cur], groups, None);
        }
    }
}
