//! eddies' PLY files read by an independent parser, ply-rs-bw, so that the writer and the crate's own reader
//! cannot share a misreading of the format.

use eddies_io::ply::{self, Attribute, Values};
use ply_rs_bw::parser::Parser;
use ply_rs_bw::ply::{DefaultElement, Encoding, Property};

fn parse(bytes: &[u8]) -> ply_rs_bw::ply::Ply<DefaultElement> {
    Parser::<DefaultElement>::new()
        .read_ply(&mut &bytes[..])
        .expect("ply-rs-bw reads the file")
}

#[test]
fn point_clouds_read_by_ply_rs() {
    let n = 257;
    let pos: Vec<[f32; 3]> = (0..n)
        .map(|i| [i as f32, 0.5 * i as f32, -1.0 / (i as f32 + 1.0)])
        .collect();
    let temperature: Vec<f32> = (0..n).map(|i| 273.15 + i as f32).collect();
    let id: Vec<i32> = (0..n).map(|i| i as i32 * -3).collect();
    let phase: Vec<u8> = (0..n).map(|i| (i % 3) as u8).collect();
    let vel: Vec<[f32; 3]> = (0..n).map(|i| [1.0, i as f32, -2.0]).collect();
    let bytes = ply::points(
        &pos,
        &[
            Attribute::new("temperature", Values::F32(&temperature)),
            Attribute::new("id", Values::I32(&id)),
            Attribute::new("phase", Values::U8(&phase)),
            Attribute::new("velocity", Values::Vec3(&vel)),
        ],
    )
    .expect("valid");
    let ply = parse(&bytes);
    assert_eq!(ply.header.encoding, Encoding::BinaryLittleEndian);
    let vertices = &ply.payload["vertex"];
    assert_eq!(vertices.len(), n);
    for (i, v) in vertices.iter().enumerate() {
        assert_eq!(v["x"], Property::Float(pos[i][0]));
        assert_eq!(v["z"], Property::Float(pos[i][2]));
        assert_eq!(v["temperature"], Property::Float(temperature[i]));
        assert_eq!(v["id"], Property::Int(id[i]));
        assert_eq!(v["phase"], Property::UChar(phase[i]));
        assert_eq!(v["velocity_y"], Property::Float(vel[i][1]));
    }
}

#[test]
fn meshes_read_by_ply_rs() {
    let pos = [
        [0.0f32, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
    ];
    let nrm = [
        [-0.5f32, -0.5, -0.5],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
    ];
    let tri = [[0u32, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]];
    let ply = parse(&ply::mesh(&pos, &nrm, &tri).expect("valid"));
    let vertices = &ply.payload["vertex"];
    for (i, v) in vertices.iter().enumerate() {
        assert_eq!(v["y"], Property::Float(pos[i][1]));
        assert_eq!(v["nx"], Property::Float(nrm[i][0]));
    }
    let faces = &ply.payload["face"];
    assert_eq!(faces.len(), tri.len());
    for (f, t) in faces.iter().zip(&tri) {
        assert_eq!(
            f["vertex_indices"],
            Property::ListInt(t.map(|i| i as i32).to_vec())
        );
    }
}
