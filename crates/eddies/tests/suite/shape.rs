//! Signed-distance shapes: unit gradient away from kinks, correct sign, exact distances where they are known in
//! closed form, 2D boxes exact in the plane z = 0, and bounds that contain the shape.

use eddies::rng::SplitMix64;
use eddies::Shape;
use glam::{DQuat, DVec3};

/// Deterministic sample points (SplitMix64).
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }
    fn unit(&mut self) -> f64 {
        self.0.next_f64()
    }
    fn point(&mut self, lo: DVec3, hi: DVec3) -> DVec3 {
        DVec3::new(
            lo.x + (hi.x - lo.x) * self.unit(),
            lo.y + (hi.y - lo.y) * self.unit(),
            lo.z + (hi.z - lo.z) * self.unit(),
        )
    }
}

/// Distance kept from every kink (medial axes, edges, the centre of a sphere, the seam of a union) before the
/// gradient is checked (m). Within it the central difference may straddle a kink; beyond it the third
/// derivative of the distance is at most ~1/MARGIN², so the O(h²) truncation error stays below 1e-8.
const MARGIN: f64 = 1e-2;

/// Central-difference gradient with step `h` (m).
fn gradient(s: &Shape, p: DVec3, h: f64) -> DVec3 {
    DVec3::from_array(std::array::from_fn(|k| {
        let mut e = DVec3::ZERO;
        e[k] = h;
        (s.sdf(p + e) - s.sdf(p - e)) / (2.0 * h)
    }))
}

// Membership and smoothness of the primitives, written independently of `Shape::sdf`.

fn box_inside(min: DVec3, max: DVec3, p: DVec3) -> bool {
    p.cmpge(min).all() && p.cmple(max).all()
}

/// Exact distance to a box from its definition: to the clamped point outside, to the nearest face inside.
fn box_distance(min: DVec3, max: DVec3, p: DVec3) -> f64 {
    if box_inside(min, max, p) {
        -(p - min).min(max - p).min_element()
    } else {
        (p - p.clamp(min, max)).length()
    }
}

/// Away from the box's kinks: its medial axis inside, and (where the distance switches between face, edge and
/// corner regions) the planes through its faces.
fn box_smooth(min: DVec3, max: DVec3, p: DVec3) -> bool {
    let d = (p - (min + max) * 0.5).abs() - (max - min) * 0.5;
    let mut s = d.to_array();
    s.sort_by(f64::total_cmp);
    let medial = box_inside(min, max, p) && s[2] - s[1] < MARGIN;
    !medial && d.abs().min_element() > MARGIN
}

fn sphere_smooth(center: DVec3, p: DVec3) -> bool {
    (p - center).length() > MARGIN
}

/// (radial − radius, |along| − height/2) of a capped cylinder.
fn cylinder_coords(
    center: DVec3,
    axis: DVec3,
    radius: f64,
    height: f64,
    p: DVec3,
) -> (f64, f64, f64) {
    let a = axis.normalize();
    let q = p - center;
    let along = q.dot(a);
    let radial = (q - a * along).length();
    (radial, radial - radius, along.abs() - 0.5 * height)
}

fn cylinder_inside(center: DVec3, axis: DVec3, radius: f64, height: f64, p: DVec3) -> bool {
    let (_, dr, dh) = cylinder_coords(center, axis, radius, height, p);
    dr <= 0.0 && dh <= 0.0
}

fn cylinder_smooth(center: DVec3, axis: DVec3, radius: f64, height: f64, p: DVec3) -> bool {
    let (radial, dr, dh) = cylinder_coords(center, axis, radius, height, p);
    radial > MARGIN && (dr - dh).abs() > MARGIN && dr.abs() > MARGIN && dh.abs() > MARGIN
}

/// A shape with an independent membership test and a predicate for "far enough from every kink".
struct Case {
    name: &'static str,
    shape: Shape,
    inside: Box<dyn Fn(DVec3) -> bool>,
    smooth: Box<dyn Fn(DVec3) -> bool>,
    /// Where to sample (m).
    region: (DVec3, DVec3),
}

fn cases() -> Vec<Case> {
    let (bmin, bmax) = (DVec3::new(-0.5, 0.1, -0.3), DVec3::new(0.7, 0.9, 0.4));
    let (sc, sr) = (DVec3::new(0.2, -0.1, 0.3), 0.6);
    let (cc, ca, cr, ch) = (
        DVec3::new(0.1, 0.2, -0.1),
        DVec3::new(1.0, 2.0, -0.5),
        0.4,
        1.1,
    );
    let (pp, pn) = (DVec3::new(0.0, 0.3, 0.0), DVec3::new(0.3, -1.0, 0.2));
    let pn_unit = pn.normalize();
    let boxed = Shape::Box {
        min: bmin,
        max: bmax,
    };
    let sphere = Shape::Sphere {
        center: sc,
        radius: sr,
    };
    let cylinder = Shape::Cylinder {
        center: cc,
        axis: ca,
        radius: cr,
        height: ch,
    };
    let rotation = DQuat::from_axis_angle(DVec3::new(1.0, 1.0, 0.3).normalize(), 0.9);
    let (translation, scale) = (DVec3::new(2.0, -1.0, 0.5), 1.7);
    let to_local = move |p: DVec3| rotation.inverse() * (p - translation) / scale;
    let around = |lo: DVec3, hi: DVec3| (lo - 0.5, hi + 0.5);
    vec![
        Case {
            name: "box",
            shape: boxed.clone(),
            inside: Box::new(move |p| box_inside(bmin, bmax, p)),
            smooth: Box::new(move |p| box_smooth(bmin, bmax, p)),
            region: around(bmin, bmax),
        },
        Case {
            name: "sphere",
            shape: sphere.clone(),
            inside: Box::new(move |p| (p - sc).length() <= sr),
            smooth: Box::new(move |p| sphere_smooth(sc, p)),
            region: around(sc - sr, sc + sr),
        },
        Case {
            name: "cylinder",
            shape: cylinder.clone(),
            inside: Box::new(move |p| cylinder_inside(cc, ca, cr, ch, p)),
            smooth: Box::new(move |p| cylinder_smooth(cc, ca, cr, ch, p)),
            region: around(cc - 0.8, cc + 0.8),
        },
        Case {
            name: "half-space",
            shape: Shape::HalfSpace {
                point: pp,
                normal: pn,
            },
            inside: Box::new(move |p| (p - pp).dot(pn_unit) <= 0.0),
            smooth: Box::new(|_| true),
            region: (DVec3::splat(-2.0), DVec3::splat(2.0)),
        },
        Case {
            name: "union",
            shape: Shape::Union(vec![boxed.clone(), sphere.clone()]),
            inside: Box::new(move |p| box_inside(bmin, bmax, p) || (p - sc).length() <= sr),
            smooth: {
                let (b, s) = (boxed.clone(), sphere.clone());
                Box::new(move |p| {
                    box_smooth(bmin, bmax, p)
                        && sphere_smooth(sc, p)
                        && (b.sdf(p) - s.sdf(p)).abs() > MARGIN
                })
            },
            region: around(bmin.min(sc - sr), bmax.max(sc + sr)),
        },
        Case {
            name: "difference",
            shape: Shape::Difference {
                base: Box::new(boxed.clone()),
                cut: Box::new(sphere.clone()),
            },
            inside: Box::new(move |p| box_inside(bmin, bmax, p) && (p - sc).length() > sr),
            smooth: {
                let (b, s) = (boxed.clone(), sphere.clone());
                Box::new(move |p| {
                    box_smooth(bmin, bmax, p)
                        && sphere_smooth(sc, p)
                        && (b.sdf(p) + s.sdf(p)).abs() > MARGIN
                })
            },
            region: around(bmin, bmax),
        },
        Case {
            name: "transform",
            shape: Shape::Transform {
                shape: Box::new(cylinder.clone()),
                rotation,
                translation,
                scale,
            },
            inside: Box::new(move |p| cylinder_inside(cc, ca, cr, ch, to_local(p))),
            // Local distances are world distances / scale: a local MARGIN keeps 1.7·MARGIN in the world.
            smooth: Box::new(move |p| cylinder_smooth(cc, ca, cr, ch, to_local(p))),
            region: {
                let c = rotation * (cc * scale) + translation;
                let r = scale * (cr * cr + 0.25 * ch * ch).sqrt();
                around(c - r, c + r)
            },
        },
    ]
}

#[test]
fn sdf_gradient_has_unit_length_away_from_kinks() {
    let mut rng = Rng::new(1);
    for case in cases() {
        let mut checked = 0;
        for _ in 0..4000 {
            let p = rng.point(case.region.0, case.region.1);
            if !(case.smooth)(p) {
                continue;
            }
            for h in [1e-6, 1e-5] {
                // Central differences: truncation ≤ h²/6 · |∂³d| < 1e-8 beyond MARGIN, rounding ≈ ε|d|/h < 1e-9
                // for |d| < 5, so 1e-6 is a strict test of the eikonal property |∇d| = 1.
                let g = gradient(&case.shape, p, h);
                assert!(
                    (g.length() - 1.0).abs() < 1e-6,
                    "{}: |∇d| = {} at {p} (h = {h})",
                    case.name,
                    g.length()
                );
            }
            checked += 1;
        }
        // Most points are far from kinks: make sure the check was not vacuous.
        assert!(
            checked > 2000,
            "{}: only {checked} smooth points",
            case.name
        );
    }
}

#[test]
fn sdf_sign_is_negative_inside() {
    let mut rng = Rng::new(2);
    for case in cases() {
        let (mut inside, mut outside) = (0, 0);
        for _ in 0..4000 {
            let p = rng.point(case.region.0, case.region.1);
            let d = case.shape.sdf(p);
            if d.abs() < 1e-12 {
                continue; // on the surface, where rounding decides the sign
            }
            let expected = (case.inside)(p);
            assert_eq!(d < 0.0, expected, "{}: sdf {d} at {p}", case.name);
            assert_eq!(
                case.shape.contains(p),
                expected,
                "{}: contains at {p}",
                case.name
            );
            if expected {
                inside += 1;
            } else {
                outside += 1;
            }
        }
        // Each region straddles its shape, so both signs must have been exercised.
        assert!(
            inside > 100 && outside > 100,
            "{}: {inside} inside, {outside} outside",
            case.name
        );
    }
}

#[test]
fn primitive_distances_are_exact() {
    let mut rng = Rng::new(3);
    let (bmin, bmax) = (DVec3::new(-0.5, 0.1, -0.3), DVec3::new(0.7, 0.9, 0.4));
    let boxed = Shape::Box {
        min: bmin,
        max: bmax,
    };
    let (sc, sr) = (DVec3::new(0.2, -0.1, 0.3), 0.6);
    let sphere = Shape::Sphere {
        center: sc,
        radius: sr,
    };
    let (pp, pn) = (DVec3::new(0.0, 0.3, 0.0), DVec3::new(0.3, -1.0, 0.2));
    let plane = Shape::HalfSpace {
        point: pp,
        normal: pn,
    };
    for _ in 0..4000 {
        let p = rng.point(DVec3::splat(-1.5), DVec3::splat(1.5));
        // Same quantities by different formulas: agreement to a few ulps of |d| ≤ 4.
        assert!(
            (boxed.sdf(p) - box_distance(bmin, bmax, p)).abs() < 1e-14,
            "box at {p}"
        );
        assert!(
            (sphere.sdf(p) - ((p - sc).length() - sr)).abs() < 1e-14,
            "sphere at {p}"
        );
        assert!(
            (plane.sdf(p) - (p - pp).dot(pn) / pn.length()).abs() < 1e-14,
            "plane at {p}"
        );
    }
}

#[test]
fn box2_is_exact_in_the_plane_and_independent_of_z() {
    let (min, max) = ([-0.4, 0.2], [0.9, 1.1]);
    let b = Shape::box2(min, max);
    // The 2D rectangle as a 3D box tall enough (±10 m) that its z faces never decide the distance at z = 0.
    let (lo, hi) = (
        DVec3::new(min[0], min[1], -10.0),
        DVec3::new(max[0], max[1], 10.0),
    );
    let mut rng = Rng::new(4);
    for _ in 0..4000 {
        let p = rng.point(DVec3::new(-1.5, -1.0, 0.0), DVec3::new(2.0, 2.5, 0.0));
        let exact = box_distance(lo, hi, p);
        assert!(
            (b.sdf(p) - exact).abs() < 1e-14,
            "box2 at {p}: {} vs {exact}",
            b.sdf(p)
        );
        // Infinite along z: the same value at any height, bit for bit.
        for z in [-1e3, 0.37, 1e9] {
            assert_eq!(b.sdf(DVec3::new(p.x, p.y, z)).to_bits(), b.sdf(p).to_bits());
        }
        // The in-plane gradient has no z component and unit length away from the kinks.
        if box_smooth(lo, hi, p) {
            let g = gradient(&b, p, 1e-6);
            assert_eq!(g.z, 0.0);
            assert!((g.length() - 1.0).abs() < 1e-6, "box2 gradient {g} at {p}");
        }
    }
}

#[test]
fn bounds_contain_the_shape() {
    let mut rng = Rng::new(5);
    for case in cases() {
        let (lo, hi) = case.shape.bounds();
        if case.name == "half-space" {
            assert!(lo.cmpeq(DVec3::NEG_INFINITY).all() && hi.cmpeq(DVec3::INFINITY).all());
            continue;
        }
        assert!(
            lo.is_finite() && hi.is_finite(),
            "{}: bounds {lo} {hi}",
            case.name
        );
        // Sample a box 50 % larger than the bounds (and the case's own region): every inside point must lie
        // within the bounds.
        let pad = (hi - lo) * 0.5;
        let (slo, shi) = ((lo - pad).min(case.region.0), (hi + pad).max(case.region.1));
        let mut inside = 0;
        for _ in 0..20_000 {
            let p = rng.point(slo, shi);
            if case.shape.sdf(p) <= 0.0 {
                inside += 1;
                assert!(
                    p.cmpge(lo).all() && p.cmple(hi).all(),
                    "{}: {p} outside bounds {lo} {hi}",
                    case.name
                );
            }
        }
        assert!(inside > 100, "{}: only {inside} inside points", case.name);
    }
}
