//! A pinhole camera in world coordinates (metres).

use crate::RenderError;

/// Where the camera stands, what it looks at and how wide it sees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    /// Position of the eye (m).
    pub position: [f32; 3],
    /// The point at the centre of the picture (m).
    pub target: [f32; 3],
    /// Vertical field of view (degrees).
    pub fov_y: f32,
    /// The world's up direction; the picture's vertical is the part of it across the line of sight.
    pub up: [f32; 3],
}

/// Default vertical field of view (degrees): a normal lens, little perspective distortion.
pub const DEFAULT_FOV_Y: f32 = 35.0;

impl Camera {
    /// A camera that frames the box `min`–`max` in a `width` × `height` picture, looking at its centre from
    /// the front (+z when up is +y), a little from the right and from above, as a person standing before a
    /// tank would; close enough that the box fills most of the picture.
    pub fn framing(min: [f32; 3], max: [f32; 3], up: [f32; 3], width: u32, height: u32) -> Self {
        let up = normalize(up);
        let target: [f32; 3] = std::array::from_fn(|a| 0.5 * (min[a] + max[a]));
        // "Front" and "right" are the axes after up's, cyclically (x, y, z → y up: front z, right x).
        let k = dominant(up);
        let right = unit((k + 2) % 3);
        let front = unit((k + 1) % 3);
        let dir = normalize(add(
            add(scale(front, 1.0), scale(right, 0.55)),
            scale(up, 0.6),
        ));
        let mut camera = Self {
            position: target,
            target,
            fov_y: DEFAULT_FOV_Y,
            up,
        };
        // Fit all eight corners: the distance at which each corner's offset from the view axis fits the
        // half-field of view, plus its depth along the axis; 4 % margin.
        let tan_y = (0.5 * DEFAULT_FOV_Y.to_radians()).tan() / 1.04;
        let tan_x = tan_y * width.max(1) as f32 / height.max(1) as f32;
        let (cam_right, cam_up) = basis(scale(dir, -1.0), up);
        let mut distance = 0.0f32;
        for corner in 0..8 {
            let c: [f32; 3] =
                std::array::from_fn(|a| if corner >> a & 1 == 0 { min[a] } else { max[a] });
            let r = sub(c, target);
            let along = dot(r, dir);
            distance = distance
                .max(along + dot(r, cam_right).abs() / tan_x)
                .max(along + dot(r, cam_up).abs() / tan_y);
        }
        camera.position = add(target, scale(dir, distance));
        camera
    }

    /// The camera's rays for a `width` × `height` picture.
    ///
    /// # Errors
    /// No pixels, a field of view outside (0°, 180°), or the eye on its target.
    pub fn view(&self, width: u32, height: u32) -> Result<View, RenderError> {
        if width == 0 || height == 0 {
            return Err(RenderError::Camera(format!(
                "a picture of {width} × {height} pixels has no pixels"
            )));
        }
        if !(self.fov_y > 0.0 && self.fov_y < 180.0) {
            return Err(RenderError::Camera(format!(
                "the field of view must lie between 0 and 180 degrees, not {}",
                self.fov_y
            )));
        }
        let to_target = sub(self.target, self.position);
        if dot(to_target, to_target) <= 0.0 || !dot(to_target, to_target).is_finite() {
            return Err(RenderError::Camera(
                "the camera's position and target must be two different points".into(),
            ));
        }
        let forward = normalize(to_target);
        let (right, up) = basis(forward, normalize(self.up));
        let tan_half = (0.5 * self.fov_y.to_radians()).tan();
        Ok(View {
            eye: self.position,
            forward,
            right,
            up,
            tan_half,
            aspect: width as f32 / height as f32,
            width,
            height,
            metres_per_pixel: 2.0 * tan_half * dot(to_target, to_target).sqrt() / height as f32,
        })
    }

    /// Where a world point appears: its pixel (x right, y down, from the top-left corner) and its depth
    /// along the line of sight, or `None` behind the eye.
    pub fn project(&self, p: [f32; 3], width: u32, height: u32) -> Option<([f32; 2], f32)> {
        let view = self.view(width, height).ok()?;
        let r = sub(p, view.eye);
        let depth = dot(r, view.forward);
        if depth <= 0.0 {
            return None;
        }
        let sx = dot(r, view.right) / (depth * view.tan_half * view.aspect);
        let sy = dot(r, view.up) / (depth * view.tan_half);
        Some((
            [
                0.5 * (sx + 1.0) * width as f32,
                0.5 * (1.0 - sy) * height as f32,
            ],
            depth,
        ))
    }
}

/// A camera's rays for one picture size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct View {
    /// The eye (m).
    pub eye: [f32; 3],
    /// Unit vector along the line of sight.
    pub forward: [f32; 3],
    /// Unit vector to the picture's right.
    pub right: [f32; 3],
    /// Unit vector to the picture's top.
    pub up: [f32; 3],
    /// tan of half the vertical field of view.
    pub tan_half: f32,
    /// Width over height.
    pub aspect: f32,
    /// Pixels across.
    pub width: u32,
    /// Pixels down.
    pub height: u32,
    /// Size of a pixel at the target's distance (m): what a scale bar in the picture uses.
    pub metres_per_pixel: f32,
}

impl View {
    /// Unit direction of the ray through the centre of pixel (`x`, `y`), y counted down from the top.
    pub fn ray(&self, x: u32, y: u32) -> [f32; 3] {
        let sx = (2.0 * (x as f32 + 0.5) / self.width as f32 - 1.0) * self.tan_half * self.aspect;
        let sy = (1.0 - 2.0 * (y as f32 + 0.5) / self.height as f32) * self.tan_half;
        normalize(add(
            add(self.forward, scale(self.right, sx)),
            scale(self.up, sy),
        ))
    }
}

/// Right and up of a camera looking along `forward` with the world's `up` (any up not along the line of
/// sight; along it, the picture's up is chosen from another axis).
fn basis(forward: [f32; 3], up: [f32; 3]) -> ([f32; 3], [f32; 3]) {
    let mut right = cross(forward, up);
    if dot(right, right) < 1e-12 {
        right = cross(forward, unit((dominant(up) + 1) % 3));
    }
    let right = normalize(right);
    (right, cross(right, forward))
}

fn dominant(v: [f32; 3]) -> usize {
    (0..3)
        .max_by(|&a, &b| v[a].abs().total_cmp(&v[b].abs()))
        .unwrap_or(1)
}

fn unit(a: usize) -> [f32; 3] {
    std::array::from_fn(|b| if a == b { 1.0 } else { 0.0 })
}

pub(crate) fn add(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    std::array::from_fn(|i| a[i] + b[i])
}

pub(crate) fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    std::array::from_fn(|i| a[i] - b[i])
}

pub(crate) fn scale(a: [f32; 3], s: f32) -> [f32; 3] {
    a.map(|v| v * s)
}

pub(crate) fn dot(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub(crate) fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

pub(crate) fn normalize(a: [f32; 3]) -> [f32; 3] {
    let len = dot(a, a).sqrt();
    if len > 0.0 {
        scale(a, 1.0 / len)
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_shows_every_corner_and_fills_the_picture() {
        for (min, max, up, w, h) in [
            ([0.0, 0.0, 0.0], [2.0, 1.0, 1.0], [0.0, 1.0, 0.0], 1280, 720),
            ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0], 640, 640),
            ([-1.0, 0.0, 0.0], [1.0, 0.5, 3.0], [0.0, 0.0, 1.0], 800, 600),
        ] {
            let cam = Camera::framing(min, max, up, w, h);
            let (mut lo, mut hi) = ([f32::MAX; 2], [f32::MIN; 2]);
            for corner in 0..8 {
                let c = std::array::from_fn(|a| if corner >> a & 1 == 0 { min[a] } else { max[a] });
                let (p, _) = cam.project(c, w, h).expect("every corner before the eye");
                for a in 0..2 {
                    lo[a] = lo[a].min(p[a]);
                    hi[a] = hi[a].max(p[a]);
                }
            }
            assert!(
                lo[0] >= 0.0 && lo[1] >= 0.0,
                "{min:?}–{max:?}: corner off the picture at {lo:?}"
            );
            assert!(
                hi[0] <= w as f32 && hi[1] <= h as f32,
                "corner off the picture at {hi:?}"
            );
            // Tight: the box spans at least 75 % of the picture along one side. The nearest corner touches
            // the margin (4 %); with the box's centre held at the picture's centre, perspective keeps the
            // far corners from reaching the opposite side.
            let fill = ((hi[0] - lo[0]) / w as f32).max((hi[1] - lo[1]) / h as f32);
            assert!(fill > 0.75, "the box fills only {fill} of the picture");
            // The box's centre is the picture's centre.
            let (c, _) = cam.project(cam.target, w, h).unwrap();
            assert!((c[0] - w as f32 / 2.0).abs() < 0.5 && (c[1] - h as f32 / 2.0).abs() < 0.5);
            // Seen from above: the eye is higher than the target.
            assert!(dot(sub(cam.position, cam.target), up) > 0.0);
        }
    }

    #[test]
    fn rays_and_projection_agree() {
        let cam = Camera {
            position: [0.3, 2.0, 4.0],
            target: [0.5, 0.4, 0.5],
            fov_y: 50.0,
            up: [0.0, 1.0, 0.0],
        };
        let view = cam.view(320, 200).unwrap();
        for (x, y) in [(0, 0), (160, 100), (319, 7), (31, 199)] {
            let d = view.ray(x, y);
            let p = add(view.eye, scale(d, 3.7));
            let (px, depth) = cam.project(p, 320, 200).unwrap();
            assert!(
                (px[0] - (x as f32 + 0.5)).abs() < 1e-3 && (px[1] - (y as f32 + 0.5)).abs() < 1e-3
            );
            assert!(depth > 0.0);
        }
        // A pixel at the target spans 2 d tan(fov/2) / height.
        let d = dot(sub(cam.target, cam.position), sub(cam.target, cam.position)).sqrt();
        let expected = 2.0 * d * (25.0f32).to_radians().tan() / 200.0;
        assert!((view.metres_per_pixel - expected).abs() < 1e-6 * expected.max(1.0));
    }

    #[test]
    fn a_camera_that_cannot_see_is_refused() {
        let cam = Camera {
            position: [1.0; 3],
            target: [1.0; 3],
            fov_y: 40.0,
            up: [0.0, 1.0, 0.0],
        };
        assert!(cam
            .view(10, 10)
            .unwrap_err()
            .to_string()
            .contains("two different points"));
        let cam = Camera {
            fov_y: 180.0,
            target: [0.0; 3],
            ..cam
        };
        assert!(cam
            .view(10, 10)
            .unwrap_err()
            .to_string()
            .contains("field of view"));
        let cam = Camera { fov_y: 40.0, ..cam };
        assert!(cam
            .view(0, 10)
            .unwrap_err()
            .to_string()
            .contains("no pixels"));
    }
}
