//! What a picture shows ([`Stage`]), the flags of its contents and the uniform block both renderers read
//! ([`Params`]).

/// A regular grid of cells: values live at cell centres, `origin + (i + ½) h`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    /// Cells along x, y, z.
    pub n: [usize; 3],
    /// The corner of cell (0, 0, 0) (m).
    pub origin: [f32; 3],
    /// Cell size (m).
    pub cell: f32,
}

impl Grid {
    /// Number of cells.
    pub fn cells(&self) -> usize {
        self.n[0] * self.n[1] * self.n[2]
    }

    /// The far corner of the grid's box (m).
    pub fn max(&self) -> [f32; 3] {
        std::array::from_fn(|a| self.origin[a] + self.n[a] as f32 * self.cell)
    }
}

/// A field whose iso-surface is drawn: inside where the value exceeds `level`.
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// One value per cell, x fastest.
    pub values: Vec<f32>,
    /// The surface's value.
    pub level: f32,
    /// The value beyond the grid, below `level`, so that surfaces close at the grid's faces.
    pub outside: f32,
    /// The change of value over which the field goes from clear to opaque in shadows (a density's level, a
    /// level set's cell size).
    pub width: f32,
    /// Whether `level − value` outside is (roughly) the distance to the surface in metres, as for a level
    /// set: rays then step most of that distance at once.
    pub distance: bool,
}

/// A colour per cell or for all (linear RGB, 0–1).
#[derive(Clone, Debug, PartialEq)]
pub enum Albedo {
    /// One colour.
    Uniform([f32; 3]),
    /// A colour per cell, x fastest.
    Cells(Vec<[f32; 3]>),
}

/// A surface and its colour.
#[derive(Clone, Debug, PartialEq)]
pub struct Surface {
    /// The field and its level.
    pub layer: Layer,
    /// Its colour.
    pub albedo: Albedo,
}

/// Smoke, dye or any participating medium.
#[derive(Clone, Debug, PartialEq)]
pub struct Smoke {
    /// Extinction coefficient per cell (1/m): the fraction of light lost per metre.
    pub extinction: Vec<f32>,
    /// Its colour (the fraction of light scattered rather than absorbed, per channel).
    pub albedo: Albedo,
}

/// Everything a picture shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    /// The grid every field lives on; its box is the domain drawn.
    pub grid: Grid,
    /// The world's up (unit): the floor lies under the grid, across it.
    pub up: [f32; 3],
    /// A liquid's surface.
    pub liquid: Option<Surface>,
    /// Obstacles' surface.
    pub solid: Option<Layer>,
    /// A medium in the volume.
    pub smoke: Option<Smoke>,
    /// Whether a tiled floor lies under the grid (it catches shadows and gives depth and scale).
    pub floor: bool,
}

/// Colour of obstacles (linear RGB).
pub const SOLID_ALBEDO: [f32; 3] = [0.40, 0.40, 0.43];

/// Cells along each side of a brick, the unit of empty-space skipping.
pub const BRICK: usize = 4;

/// Brick flags: which of the stage's contents may show inside a brick.
pub const HAS_LIQUID: u32 = 1;
/// The brick may hold obstacle surface.
pub const HAS_SOLID: u32 = 2;
/// The brick may hold smoke.
pub const HAS_SMOKE: u32 = 4;
/// The liquid's colour varies per cell.
pub const LIQUID_CELLS: u32 = 8;
/// The smoke's colour varies per cell.
pub const SMOKE_CELLS: u32 = 16;
/// A floor lies under the grid.
pub const FLOOR: u32 = 32;
/// The liquid's field is a distance.
pub const LIQUID_DISTANCE: u32 = 64;
/// The obstacles' field is a distance.
pub const SOLID_DISTANCE: u32 = 128;

/// The uniform block both renderers read: the camera, the grid, the light and the contents' flags. Laid
/// out as the WGSL struct `Params` in `render.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Params {
    /// The eye; w unused.
    pub eye: [f32; 4],
    /// Unit line of sight; w: tan of half the vertical field of view.
    pub forward: [f32; 4],
    /// Unit right of the picture; w: width over height.
    pub right: [f32; 4],
    /// Unit up of the picture; w: the angle a pixel spans (rad).
    pub cam_up: [f32; 4],
    /// The grid's origin; w: cell size.
    pub origin: [f32; 4],
    /// The world's up; w: the floor's height along it.
    pub up: [f32; 4],
    /// Unit direction towards the sun; w: the floor's tile size (m).
    pub sun: [f32; 4],
    /// Liquid level, liquid outside value, solid level, solid outside value.
    pub levels: [f32; 4],
    /// The grid box's centre; w: its half diagonal.
    pub centre: [f32; 4],
    /// The liquid's uniform colour.
    pub liquid_albedo: [f32; 4],
    /// The smoke's uniform colour.
    pub smoke_albedo: [f32; 4],
    /// Cells along x, y, z; w: contents flags.
    pub n: [u32; 4],
    /// Bricks along x, y, z; w unused.
    pub bricks: [u32; 4],
    /// Picture width and height; z, w unused.
    pub size: [u32; 4],
    /// The grid box's twelve edges in the picture, two rows each: (x, y, 1/depth, visible) of one end, then
    /// (x, y, 1/depth, 1/length²) of the other; pixels from the top-left corner, depth along the line of
    /// sight.
    pub edges: [[f32; 4]; 24],
}
