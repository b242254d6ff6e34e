//! The per-frame files for other tools (docs/OUTPUTS.md): VTK XML grids and particles with their `.pvd`
//! series (`output.vtk`), PLY point clouds (`output.ply`), the liquid surface (`output.mesh`) and OpenVDB
//! volumes (`output.vdb`). What a method offers comes from its [`eddies::Description`] (fields, particle
//! values); the formats from `eddies-io`; this module only puts them together.

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use eddies::mesh::{self, Inside, IsoSurface, TriMesh};
use eddies::{Field, Simulation};
use eddies_io::vdb::{self, GridClass, VdbGrid, VdbValues};
use eddies_io::vtk::{self, CollectionEntry, VtkArray};
use eddies_io::{obj, ply};

use super::names::{numbered_name, SERIES_NAME};
use super::write_atomic;
use crate::scene::{MeshFormat, Method, Scene};

/// The parts of a frame in the `.pvd` series.
const PART_GRID: usize = 0;
const PART_PARTICLES: usize = 1;
const PART_TRACERS: usize = 2;

/// Why a frame's files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A file could not be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// The data could not be encoded (a field missing, a mismatched array).
    #[error("cannot encode {what} of frame {frame}: {message}")]
    Encode {
        /// Which file's data.
        what: &'static str,
        /// The frame.
        frame: usize,
        /// What went wrong.
        message: String,
    },
}

/// What to write with every frame, and the VTK series so far.
pub struct Exports {
    vtk: bool,
    ply: bool,
    mesh: MeshFormat,
    surface: IsoSurface,
    vdb: bool,
    fps: f64,
    series: Vec<CollectionEntry>,
}

/// A scalar of a grid or of the particles, or a vector put together from its `_x`, `_y` (and `_z`)
/// components, interleaved with three components (z = 0 in 2D).
struct Named {
    name: String,
    components: usize,
    values: Vec<f32>,
}

/// Groups `NAME_x`, `NAME_y` (and `NAME_z`) of `names` into vectors `NAME` and keeps the rest as scalars;
/// `get` returns the values of one name.
fn group_components(names: &[&str], mut get: impl FnMut(&str) -> Option<Vec<f32>>) -> Vec<Named> {
    let mut out = Vec::new();
    for &name in names {
        if let Some(stem) = name.strip_suffix("_x") {
            let y = format!("{stem}_y");
            if names.contains(&y.as_str()) {
                let z = format!("{stem}_z");
                let parts = [
                    Some(name.to_string()),
                    Some(y),
                    names.contains(&z.as_str()).then_some(z),
                ];
                let arrays: Vec<Option<Vec<f32>>> = parts
                    .iter()
                    .map(|p| p.as_deref().and_then(&mut get))
                    .collect();
                let n = arrays[0].as_ref().map_or(0, Vec::len);
                let mut values = vec![0.0; 3 * n];
                for (c, a) in arrays.iter().enumerate() {
                    if let Some(a) = a {
                        for (i, v) in a.iter().enumerate().take(n) {
                            values[3 * i + c] = *v;
                        }
                    }
                }
                out.push(Named {
                    name: stem.to_string(),
                    components: 3,
                    values,
                });
                continue;
            }
        }
        let is_component = ["_y", "_z"].iter().any(|s| {
            name.strip_suffix(s)
                .is_some_and(|stem| names.contains(&format!("{stem}_x").as_str()))
        });
        if !is_component {
            if let Some(values) = get(name) {
                out.push(Named {
                    name: name.to_string(),
                    components: 1,
                    values,
                });
            }
        }
    }
    out
}

/// A frame's grid fields, each computed once however many files read it (FLIP's `surface` costs a
/// reconstruction from every particle).
struct Fields<'a> {
    sim: &'a dyn Simulation,
    cache: RefCell<Vec<(String, Rc<Field>)>>,
}

impl<'a> Fields<'a> {
    fn new(sim: &'a dyn Simulation) -> Self {
        Self {
            sim,
            cache: RefCell::new(Vec::new()),
        }
    }

    fn get(&self, name: &str) -> Option<Rc<Field>> {
        if let Some((_, f)) = self.cache.borrow().iter().find(|(n, _)| n == name) {
            return Some(f.clone());
        }
        let f = Rc::new(self.sim.field(name)?);
        self.cache.borrow_mut().push((name.to_string(), f.clone()));
        Some(f)
    }
}

/// Positions of `dim` values each as points with three coordinates (z = 0 in 2D).
fn points3(positions: &[f32], dim: usize) -> Vec<[f32; 3]> {
    positions
        .chunks_exact(dim)
        .map(|p| [p[0], p[1], if dim == 3 { p[2] } else { 0.0 }])
        .collect()
}

/// A grid field's cells per axis `[nx, ny, nz]` from its C-order shape.
fn cells_of(shape: &[usize]) -> [usize; 3] {
    match shape {
        [ny, nx] => [*nx, *ny, 1],
        [nz, ny, nx] => [*nx, *ny, *nz],
        _ => [0, 0, 0],
    }
}

impl Exports {
    /// The files `scene` asks for; a run resumed after `frames_done` frames lists theirs in the series
    /// again (the same scene wrote the same files).
    pub fn new(scene: &Scene, frames_done: usize) -> Self {
        let out = &scene.output;
        let surface = match scene.method {
            Method::Reint => IsoSurface {
                level: (out.mesh_level * scene.substances()[0].rest_density) as f32,
                inside: Inside::Above,
                smoothing_iterations: out.mesh_smoothing,
            },
            _ => IsoSurface {
                level: 0.0,
                inside: Inside::Below,
                smoothing_iterations: out.mesh_smoothing,
            },
        };
        let mut exports = Self {
            vtk: out.vtk,
            ply: out.ply,
            mesh: out.mesh,
            surface,
            vdb: out.vdb,
            fps: scene.time.fps,
            series: Vec::new(),
        };
        if exports.vtk {
            let tracers = scene.method == Method::Vpm;
            for frame in 0..frames_done {
                exports.list_in_series(frame, tracers);
            }
        }
        exports
    }

    fn list_in_series(&mut self, frame: usize, tracers: bool) {
        let time = (frame + 1) as f64 / self.fps;
        let mut add = |part, stem: &str| {
            self.series.push(CollectionEntry {
                time,
                part,
                file: numbered_name(stem, frame, if stem == "grid" { "vti" } else { "vtp" }),
            })
        };
        add(PART_GRID, "grid");
        add(PART_PARTICLES, "particles");
        if tracers {
            add(PART_TRACERS, "tracers");
        }
    }

    /// Writes frame `frame`'s files into `out`.
    pub fn write(
        &mut self,
        sim: &dyn Simulation,
        frame: usize,
        out: &Path,
    ) -> Result<(), ExportError> {
        let fields = Fields::new(sim);
        let save = |name: String, bytes: &[u8]| {
            let path = out.join(name);
            write_atomic(&path, bytes).map_err(|source| ExportError::Write { path, source })
        };
        let encoding = |what: &'static str, e: &dyn std::fmt::Display| ExportError::Encode {
            what,
            frame,
            message: e.to_string(),
        };
        if self.vtk || self.ply {
            let particles = particles(sim);
            let tracers = sim.tracer_positions();
            let has_tracers = !tracers.is_empty() || sim.describe().method == "vpm";
            if self.vtk {
                save(
                    numbered_name("grid", frame, "vti"),
                    &grid_vti(&fields).map_err(|e| encoding("the grid", &e))?,
                )?;
                let vtp = |p: &[[f32; 3]], attrs: &[Named]| {
                    vtk::points(p.as_flattened(), &vtk_views(attrs))
                };
                save(
                    numbered_name("particles", frame, "vtp"),
                    &vtp(&particles.0, &particles.1).map_err(|e| encoding("the particles", &e))?,
                )?;
                if has_tracers {
                    let t = points3(&tracers, sim.dim());
                    save(
                        numbered_name("tracers", frame, "vtp"),
                        &vtp(&t, &[]).map_err(|e| encoding("the tracers", &e))?,
                    )?;
                }
                self.list_in_series(frame, has_tracers);
                save(
                    SERIES_NAME.to_string(),
                    vtk::collection(&self.series).as_bytes(),
                )?;
            }
            if self.ply {
                let ply_points = |p: &[[f32; 3]], attrs: &[Named]| {
                    let vectors: Vec<Vec<[f32; 3]>> = attrs
                        .iter()
                        .map(|a| {
                            if a.components == 3 {
                                a.values
                                    .chunks_exact(3)
                                    .map(|c| [c[0], c[1], c[2]])
                                    .collect()
                            } else {
                                Vec::new()
                            }
                        })
                        .collect();
                    let attributes: Vec<ply::Attribute> = attrs
                        .iter()
                        .zip(&vectors)
                        .map(|(a, v)| {
                            let values = if a.components == 3 {
                                ply::Values::Vec3(v)
                            } else {
                                ply::Values::F32(&a.values)
                            };
                            ply::Attribute::new(&a.name, values)
                        })
                        .collect();
                    ply::points(p, &attributes)
                };
                save(
                    numbered_name("particles", frame, "ply"),
                    &ply_points(&particles.0, &particles.1)
                        .map_err(|e| encoding("the particles", &e))?,
                )?;
                if has_tracers {
                    let t = points3(&tracers, sim.dim());
                    save(
                        numbered_name("tracers", frame, "ply"),
                        &ply_points(&t, &[]).map_err(|e| encoding("the tracers", &e))?,
                    )?;
                }
            }
        }
        if self.mesh != MeshFormat::None {
            let surface = self
                .surface(&fields)
                .map_err(|e| encoding("the surface", &e))?;
            match self.mesh {
                MeshFormat::Ply => save(
                    numbered_name("surface", frame, "ply"),
                    &ply::mesh(&surface.positions, &surface.normals, &surface.triangles)
                        .map_err(|e| encoding("the surface", &e))?,
                )?,
                MeshFormat::Obj => save(
                    numbered_name("surface", frame, "obj"),
                    obj::mesh(&surface.positions, &surface.normals, &surface.triangles)
                        .map_err(|e| encoding("the surface", &e))?
                        .as_bytes(),
                )?,
                MeshFormat::None => {}
            }
        }
        if self.vdb {
            save(
                numbered_name("volume", frame, "vdb"),
                &volume_vdb(&fields).map_err(|e| encoding("the volume", &e))?,
            )?;
        }
        Ok(())
    }

    /// The liquid surface: FLIP's level set at 0, reint's density at the scene's level.
    fn surface(&self, fields: &Fields) -> Result<TriMesh, String> {
        let sim = fields.sim;
        let name = if sim.describe().method == "flip" {
            "surface"
        } else {
            "density"
        };
        let field = fields
            .get(name)
            .ok_or_else(|| format!("the simulation has no {name} field"))?;
        mesh::extract(
            &field.data,
            cells_of(&field.shape),
            sim.cell_size(),
            sim.grid_origin(),
            &self.surface,
        )
        .map_err(|e| e.to_string())
    }
}

/// The particles as points with their values (velocity components grouped into vectors).
fn particles(sim: &dyn Simulation) -> (Vec<[f32; 3]>, Vec<Named>) {
    let positions = points3(&sim.particle_positions(), sim.dim());
    let names = sim.describe().particle_values;
    let values = group_components(&names, |n| sim.particle_values(n))
        .into_iter()
        .filter(|a| a.values.len() == positions.len() * a.components)
        .collect();
    (positions, values)
}

/// The `.vti` of every grid field (velocity components as one vector).
fn grid_vti(fields: &Fields) -> Result<Vec<u8>, vtk::VtkError> {
    let sim = fields.sim;
    let names = sim.field_names();
    let mut shape = Vec::new();
    let arrays = group_components(&names, |n| {
        let f = fields.get(n)?;
        shape.clone_from(&f.shape);
        Some(f.data.clone())
    });
    vtk::image_data(
        cells_of(&shape),
        sim.grid_origin(),
        sim.cell_size(),
        &vtk_views(&arrays),
    )
}

/// VTK's views of named arrays.
fn vtk_views(arrays: &[Named]) -> Vec<VtkArray<'_>> {
    arrays
        .iter()
        .map(|a| VtkArray {
            name: &a.name,
            components: a.components,
            values: &a.values,
        })
        .collect()
}

/// The `.vdb` of a 3D frame: the liquid's density (reint, flip) as a fog volume, or the vortex particles'
/// vorticity magnitude as a fog volume with their density deviation and temperature; velocity as a vector
/// grid. Values within 1e-6 of the field's largest magnitude count as empty space.
fn volume_vdb(fields: &Fields) -> Result<Vec<u8>, String> {
    let sim = fields.sim;
    let names = sim.field_names();
    let fog: &[&str] = if sim.describe().method == "vpm" {
        &["vorticity_magnitude"]
    } else {
        &["density"]
    };
    let plain = ["density_deviation", "temperature"];
    let mut shape = Vec::new();
    let mut scalars: Vec<(&str, GridClass, Vec<f32>)> = Vec::new();
    for &name in names
        .iter()
        .filter(|n| fog.contains(n) || plain.contains(n))
    {
        if let Some(f) = sim.field(name) {
            shape = f.shape;
            let class = if fog.contains(&name) {
                GridClass::FogVolume
            } else {
                GridClass::Unknown
            };
            scalars.push((name, class, f.data));
        }
    }
    let velocity: Vec<[f32; 3]> = group_components(&names, |n| {
        n.starts_with("velocity_")
            .then(|| sim.field(n).map(|f| f.data))
            .flatten()
    })
    .into_iter()
    .find(|a| a.name == "velocity")
    .map(|a| {
        a.values
            .chunks_exact(3)
            .map(|c| [c[0], c[1], c[2]])
            .collect()
    })
    .unwrap_or_default();
    let largest = scalars
        .iter()
        .flat_map(|(_, _, v)| v.iter())
        .fold(0.0f32, |m, x| m.max(x.abs()));
    let mut grids: Vec<VdbGrid> = scalars
        .iter()
        .map(|(name, class, values)| VdbGrid {
            name,
            class: *class,
            values: VdbValues::Float(values),
        })
        .collect();
    if !velocity.is_empty() {
        grids.push(VdbGrid {
            name: "velocity",
            class: GridClass::Unknown,
            values: VdbValues::Vec3(&velocity),
        });
    }
    vdb::write_vdb(
        &grids,
        cells_of(&shape),
        sim.cell_size(),
        sim.grid_origin(),
        largest * 1e-6,
    )
    .map_err(|e| e.to_string())
}
