//! What the viewer shows of a simulation, and how a point of it maps back into the domain: the one place a
//! renderer plugs into the viewer. 2D scenes, and 3D ones with `output.view = "projection"` or `"slice"`,
//! are shown through the frame path of `eddies run` ([`render::render`]); rendered 3D scenes through the
//! [`Studio`] of `eddies run`, seen by the orbit camera's [`CameraPose`](super::camera::CameraPose).

use eddies::Simulation;
use glam::DVec3;
use image::RgbImage;

use super::camera::OrbitCamera;
use crate::render::{self, Backdrop, RenderError};
use crate::render3d::Studio;
use crate::scene::{Scene, PARTICLE_VIEWS};

/// A picture for the window and the way back from its pixels into the domain.
pub struct Shown {
    /// The picture, row 0 at the top.
    pub image: RgbImage,
    /// Where a point of the picture lies in the domain.
    pub pick: Pick,
}

/// How a point of a [`Shown`] picture maps into the domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pick {
    /// The picture is the domain's x–y rectangle, seen along −z (2D, or a 3D projection): a point of it lies
    /// at depth `depth` (m), the camera target's, so that a drag pushes in the plane through the target.
    Domain {
        /// The domain's edge lengths (m; 0 along z in 2D).
        size: [f64; 3],
        /// z of the points picked (m).
        depth: f64,
    },
    /// The picture is the camera's view: a point lies on the plane through the target facing the camera.
    Camera(OrbitCamera),
}

impl Pick {
    /// The domain point (m) under the picture point `u` (0 at the left edge, 1 at the right) and `v` (0 at
    /// the top, 1 at the bottom) of a picture `aspect` (width / height) wide.
    pub fn point(&self, u: f64, v: f64, aspect: f64) -> DVec3 {
        match *self {
            Pick::Domain { size, depth } => DVec3::new(u * size[0], (1.0 - v) * size[1], depth),
            Pick::Camera(camera) => camera.on_target_plane([2.0 * u - 1.0, 1.0 - 2.0 * v], aspect),
        }
    }
}

/// What the viewer can show of `sim`: its grid fields and, for a method whose pictures are made of
/// particles, the particle views.
pub fn views(sim: &dyn Simulation) -> Vec<String> {
    let d = sim.describe();
    let mut names: Vec<String> = Vec::new();
    if d.picture == eddies::FrameSource::Particles {
        names.extend(PARTICLE_VIEWS.iter().map(|s| s.to_string()));
    }
    names.extend(d.fields.iter().map(|s| s.to_string()));
    names
}

/// Longest side of rendered 3D pictures in the viewer (pixels): the window scales them; smaller pictures
/// keep the CPU renderer's frame rate interactive.
pub const RENDERED_SIDE: u32 = 800;

/// The picture of `sim` for the window: rendered by `studio` through `camera` (3D scenes rendered as
/// `eddies run` renders them), or `scene.output.field` over `backdrop`.
pub fn show(
    sim: &dyn Simulation,
    scene: &Scene,
    backdrop: &Backdrop,
    camera: &OrbitCamera,
    studio: Option<&mut Studio>,
) -> Result<Shown, RenderError> {
    if let Some(studio) = studio {
        let pose = camera.pose();
        let f = |v: [f64; 3]| v.map(|x| x as f32);
        let mut cam = studio.camera();
        cam.position = f(pose.position);
        cam.target = f(pose.target);
        cam.fov_y = pose.fov_y as f32;
        studio.set_camera(cam);
        let [w, h] = [
            scene.output.camera.pixels[0] as f64,
            scene.output.camera.pixels[1] as f64,
        ];
        let k = RENDERED_SIDE as f64 / w.max(h);
        let size = [
            (w * k).round().max(16.0) as u32,
            (h * k).round().max(16.0) as u32,
        ];
        let rendered = studio.render(sim, scene, Some(size))?;
        return Ok(Shown {
            image: rendered.image,
            pick: Pick::Camera(*camera),
        });
    }
    let picture = render::render(sim, scene, backdrop)?;
    let size = scene.size();
    Ok(Shown {
        image: picture.to_image(),
        pick: Pick::Domain {
            size: [size[0], size[1], size.get(2).copied().unwrap_or(0.0)],
            depth: camera.target.z,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_picture_maps_its_corners_to_the_domain_corners_at_the_target_depth() {
        let pick = Pick::Domain {
            size: [2.0, 1.0, 0.5],
            depth: 0.25,
        };
        assert_eq!(pick.point(0.0, 1.0, 2.0), DVec3::new(0.0, 0.0, 0.25));
        assert_eq!(pick.point(1.0, 0.0, 2.0), DVec3::new(2.0, 1.0, 0.25));
        let camera = OrbitCamera::framing([1.0, 1.0, 1.0]);
        let centre = Pick::Camera(camera).point(0.5, 0.5, 1.0);
        assert!((centre - camera.target).length() < 1e-9);
    }
}
