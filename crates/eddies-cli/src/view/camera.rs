//! The viewer's orbit camera: yaw, pitch and distance around a target, turned by dragging and zoomed by the
//! wheel. It yields the pose a 3D renderer takes (position, target, vertical field of view) and maps the
//! cursor onto the plane through the target that faces the camera, where a drag pushes the fluid.

use glam::DVec3;

/// Where a camera stands and looks, in world metres: what a 3D renderer needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CameraPose {
    /// The eye (m).
    pub position: [f64; 3],
    /// The point looked at (m).
    pub target: [f64; 3],
    /// Vertical field of view (degrees).
    pub fov_y: f64,
}

/// Radians of turn per pixel dragged.
const TURN_PER_PIXEL: f64 = 0.005;
/// Distance factor per wheel notch (a notch in is 10 % closer).
const ZOOM_PER_NOTCH: f64 = 0.9;
/// Pitch stays within this of straight up or down (radians), where yaw would lose its meaning.
const PITCH_LIMIT: f64 = 89.0 * std::f64::consts::PI / 180.0;

/// A camera that circles `target`: at yaw 0 and pitch 0 it stands on the +z side of the target looking along
/// −z with y up (the view of the 2D projection); yaw turns it about +y towards +x, pitch raises it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrbitCamera {
    /// The point circled and looked at (m).
    pub target: DVec3,
    /// Turn about +y (radians).
    pub yaw: f64,
    /// Elevation above the target's horizontal plane (radians), within ±89°.
    pub pitch: f64,
    /// Distance from the target (m), > 0.
    pub distance: f64,
    /// Vertical field of view (degrees).
    pub fov_y: f64,
}

impl OrbitCamera {
    /// A camera on the +z side of a domain of `size` (m) with its lower corner at the origin, looking at its
    /// centre from far enough that the whole domain fits in the view.
    pub fn framing(size: [f64; 3]) -> Self {
        let fov_y: f64 = 40.0;
        let target = DVec3::from(size) * 0.5;
        let radius = target.length().max(1e-6);
        let distance = radius / (0.5 * fov_y.to_radians()).tan() + 0.5 * size[2];
        Self {
            target,
            yaw: 0.0,
            pitch: 0.0,
            distance,
            fov_y,
        }
    }

    /// The unit vector from the target to the eye.
    fn back(&self) -> DVec3 {
        let (sy, cy) = self.yaw.sin_cos();
        let (sp, cp) = self.pitch.sin_cos();
        DVec3::new(cp * sy, sp, cp * cy)
    }

    /// Where the camera stands and looks.
    pub fn pose(&self) -> CameraPose {
        CameraPose {
            position: (self.target + self.distance * self.back()).to_array(),
            target: self.target.to_array(),
            fov_y: self.fov_y,
        }
    }

    /// Turns the camera by a drag of `dx`, `dy` pixels: right turns it to the left of the target (the scene
    /// follows the cursor), down raises it.
    pub fn orbit(&mut self, dx: f64, dy: f64) {
        self.yaw -= dx * TURN_PER_PIXEL;
        self.pitch = (self.pitch + dy * TURN_PER_PIXEL).clamp(-PITCH_LIMIT, PITCH_LIMIT);
    }

    /// Moves closer (`notches` > 0) or further away, never through the target.
    pub fn zoom(&mut self, notches: f64) {
        self.distance = (self.distance * ZOOM_PER_NOTCH.powf(notches)).max(1e-6);
    }

    /// The ray from the eye through a point of the picture: `ndc` from −1 to 1 across, bottom to top, in a
    /// picture `aspect` (width / height) wide. Returns the eye and the unit direction.
    pub fn ray(&self, ndc: [f64; 2], aspect: f64) -> (DVec3, DVec3) {
        let eye = self.target + self.distance * self.back();
        let forward = -self.back();
        let right = forward.cross(DVec3::Y).normalize();
        let up = right.cross(forward);
        let half = (0.5 * self.fov_y.to_radians()).tan();
        let dir = forward + right * (ndc[0] * half * aspect) + up * (ndc[1] * half);
        (eye, dir.normalize())
    }

    /// The point under a picture point on the plane through the target that faces the camera (m), where
    /// drags push the fluid.
    pub fn on_target_plane(&self, ndc: [f64; 2], aspect: f64) -> DVec3 {
        let (eye, dir) = self.ray(ndc, aspect);
        let normal = self.back();
        // The plane faces the camera, so every ray of the view meets it in front of the eye.
        let t = (self.target - eye).dot(normal) / dir.dot(normal);
        eye + t * dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: [f64; 3], b: [f64; 3]) -> bool {
        (0..3).all(|k| (a[k] - b[k]).abs() < 1e-9)
    }

    #[test]
    fn the_eye_circles_the_target_at_known_yaw_and_pitch() {
        let mut cam = OrbitCamera {
            target: DVec3::new(1.0, 2.0, 3.0),
            yaw: 0.0,
            pitch: 0.0,
            distance: 2.0,
            fov_y: 45.0,
        };
        assert!(close(cam.pose().position, [1.0, 2.0, 5.0]), "on +z");
        cam.yaw = std::f64::consts::FRAC_PI_2;
        assert!(
            close(cam.pose().position, [3.0, 2.0, 3.0]),
            "yaw 90°: on +x"
        );
        cam.yaw = 0.0;
        cam.pitch = std::f64::consts::FRAC_PI_4;
        let s = 2.0 * std::f64::consts::FRAC_1_SQRT_2;
        assert!(
            close(cam.pose().position, [1.0, 2.0 + s, 3.0 + s]),
            "pitch 45°"
        );
        assert_eq!(cam.pose().target, [1.0, 2.0, 3.0]);
        assert_eq!(cam.pose().fov_y, 45.0);
    }

    #[test]
    fn dragging_and_the_wheel_turn_and_zoom_within_limits() {
        let mut cam = OrbitCamera::framing([1.0, 1.0, 1.0]);
        let d = cam.distance;
        cam.zoom(1.0);
        assert!((cam.distance - 0.9 * d).abs() < 1e-12);
        cam.zoom(-1.0);
        assert!((cam.distance - d).abs() < 1e-12);
        cam.orbit(0.0, 1e6);
        assert!((cam.pitch - PITCH_LIMIT).abs() < 1e-12);
        cam.orbit(100.0, 0.0);
        assert!((cam.yaw + 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_picture_centre_lies_on_the_target_and_the_plane_faces_the_eye() {
        let mut cam = OrbitCamera::framing([2.0, 1.0, 1.0]);
        cam.orbit(80.0, -40.0);
        let centre = cam.on_target_plane([0.0, 0.0], 1.5);
        assert!((centre - cam.target).length() < 1e-9);
        let corner = cam.on_target_plane([1.0, 1.0], 1.5);
        let normal = DVec3::from(cam.pose().position) - cam.target;
        assert!((corner - cam.target).dot(normal).abs() < 1e-9);
        // Head on, the right edge of the view lies `tan(fov/2) · aspect · distance` to the right.
        let cam = OrbitCamera::framing([1.0, 1.0, 1.0]);
        let right = cam.on_target_plane([1.0, 0.0], 2.0);
        let want = (0.5 * cam.fov_y.to_radians()).tan() * 2.0 * cam.distance;
        assert!((right.x - cam.target.x - want).abs() < 1e-9);
        assert!((right.y - cam.target.y).abs() < 1e-9);
    }
}
