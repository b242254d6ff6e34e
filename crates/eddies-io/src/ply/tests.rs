//! Round trips through the writer and the reader, the exact header text, and the reader's rejections.

use super::*;

fn split_header(bytes: &[u8]) -> (&str, &[u8]) {
    let end = bytes
        .windows(11)
        .position(|w| w == b"end_header\n")
        .expect("a header")
        + 11;
    (
        std::str::from_utf8(&bytes[..end]).expect("ASCII"),
        &bytes[end..],
    )
}

fn as_f64(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

#[test]
fn point_cloud_header_is_the_spec_text() {
    let pos = [[1.0f32, 2.0, 3.0]];
    let bytes = points(
        &pos,
        &[
            Attribute::new("density", Values::F32(&[4.0])),
            Attribute::new("id", Values::I32(&[-7])),
            Attribute::new("phase", Values::U8(&[2])),
            Attribute::new("velocity", Values::Vec3(&[[5.0, 6.0, 7.0]])),
            Attribute::new("normal", Values::Vec3(&[[0.0, 0.0, 1.0]])),
            Attribute::new("uv", Values::Vec2(&[[0.25, 0.5]])),
        ],
    )
    .expect("valid");
    let (header, body) = split_header(&bytes);
    assert_eq!(
        header,
        "ply\nformat binary_little_endian 1.0\ncomment written by eddies\nelement vertex 1\n\
         property float x\nproperty float y\nproperty float z\nproperty float density\n\
         property int id\nproperty uchar phase\nproperty float velocity_x\nproperty float velocity_y\n\
         property float velocity_z\nproperty float nx\nproperty float ny\nproperty float nz\n\
         property float uv_x\nproperty float uv_y\nend_header\n"
    );
    // x y z density (4 bytes each), id (4), phase (1), 3 + 3 + 2 floats.
    assert_eq!(body.len(), 4 * 4 + 4 + 1 + 8 * 4);
    assert_eq!(&body[..4], &1.0f32.to_le_bytes());
    assert_eq!(&body[16..20], &(-7i32).to_le_bytes());
    assert_eq!(body[20], 2);
    assert_eq!(&body[21..25], &5.0f32.to_le_bytes());
}

#[test]
fn point_clouds_round_trip() {
    let n = 1000;
    let pos: Vec<[f32; 2]> = (0..n)
        .map(|i| [i as f32 * 0.1, -(i as f32) / 3.0])
        .collect();
    let mass: Vec<f32> = (0..n).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    let id: Vec<i32> = (0..n).map(|i| i as i32 - 500).collect();
    let flag: Vec<u8> = (0..n).map(|i| (i % 256) as u8).collect();
    let vel: Vec<[f32; 2]> = (0..n)
        .map(|i| [i as f32, f32::MIN_POSITIVE * i as f32])
        .collect();
    let bytes = points(
        &pos,
        &[
            Attribute::new("mass", Values::F32(&mass)),
            Attribute::new("id", Values::I32(&id)),
            Attribute::new("flag", Values::U8(&flag)),
            Attribute::new("velocity", Values::Vec2(&vel)),
        ],
    )
    .expect("valid");
    let ply = read(&bytes).expect("readable");
    assert_eq!(ply.format, Format::BinaryLittleEndian);
    assert_eq!(ply.comments, ["written by eddies"]);
    let v = ply.element("vertex").expect("vertex");
    assert_eq!(v.count, n);
    let column = |f: &dyn Fn(usize) -> f32| (0..n).map(|i| f64::from(f(i))).collect::<Vec<_>>();
    assert_eq!(v.scalars("x"), Some(&column(&|i| pos[i][0])[..]));
    assert_eq!(v.scalars("y"), Some(&column(&|i| pos[i][1])[..]));
    assert_eq!(v.scalars("z"), Some(&vec![0.0; n][..]));
    assert_eq!(v.scalars("mass"), Some(&as_f64(&mass)[..]));
    assert_eq!(
        v.scalars("id"),
        Some(&id.iter().map(|&x| f64::from(x)).collect::<Vec<_>>()[..])
    );
    assert_eq!(
        v.scalars("flag"),
        Some(&flag.iter().map(|&x| f64::from(x)).collect::<Vec<_>>()[..])
    );
    assert_eq!(v.scalars("velocity_y"), Some(&column(&|i| vel[i][1])[..]));
    assert!(matches!(
        v.property("id").map(|p| &p.data),
        Some(PropertyData::Scalar {
            ty: ScalarType::I32,
            ..
        })
    ));
}

#[test]
fn meshes_round_trip() {
    let pos = [
        [0.0f32, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
    ];
    let nrm = [
        [-0.57735f32, -0.57735, -0.57735],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
    ];
    let tri = [[0u32, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]];
    let bytes = mesh(&pos, &nrm, &tri).expect("valid");
    let (header, body) = split_header(&bytes);
    assert_eq!(
        header,
        "ply\nformat binary_little_endian 1.0\ncomment written by eddies\nelement vertex 4\n\
         property float x\nproperty float y\nproperty float z\nproperty float nx\nproperty float ny\n\
         property float nz\nelement face 4\nproperty list uchar int vertex_indices\nend_header\n"
    );
    assert_eq!(body.len(), 4 * 24 + 4 * 13);
    let ply = read(&bytes).expect("readable");
    let v = ply.element("vertex").expect("vertex");
    assert_eq!(v.scalars("nz"), Some(&as_f64(&nrm.map(|n| n[2]))[..]));
    let faces = ply
        .element("face")
        .and_then(|f| f.lists("vertex_indices"))
        .expect("faces");
    let expected: Vec<Vec<f64>> = tri
        .iter()
        .map(|t| t.iter().map(|&i| f64::from(i)).collect())
        .collect();
    assert_eq!(faces, &expected[..]);
    // Without normals the vertex has only x y z.
    let ply = read(&mesh(&pos, &[], &tri).expect("valid")).expect("readable");
    assert_eq!(ply.elements[0].properties.len(), 3);
}

#[test]
fn writer_rejects_inconsistent_input() {
    let pos = [[0.0f32; 3]; 3];
    let short = Attribute::new("mass", Values::F32(&[1.0, 2.0]));
    assert!(matches!(
        points(&pos, &[short]),
        Err(PlyError::LengthMismatch {
            expected: 3,
            found: 2,
            ..
        })
    ));
    let bad = Attribute::new("two words", Values::U8(&[0; 3]));
    assert_eq!(
        points(&pos, &[bad]),
        Err(PlyError::BadName("two words".into()))
    );
    let clash = Attribute::new("x", Values::F32(&[0.0; 3]));
    assert_eq!(
        points(&pos, &[clash]),
        Err(PlyError::DuplicateName("x".into()))
    );
    assert_eq!(points(&[[0.0f32; 4]], &[]), Err(PlyError::Dimension(4)));
    assert!(matches!(
        mesh(&pos, &[], &[[0, 1, 3]]),
        Err(PlyError::IndexOutOfRange { index: 3, .. })
    ));
    assert!(matches!(
        mesh(&pos, &[[0.0; 3]], &[]),
        Err(PlyError::LengthMismatch { .. })
    ));
}

#[test]
fn reads_ascii_and_big_endian() {
    let ascii = b"ply\r\nformat ascii 1.0\r\ncomment hi\r\nelement vertex 2\r\nproperty double x\r\n\
property char c\r\nelement face 1\r\nproperty list uint8 uint16 idx\r\nend_header\r\n1.5 -3\r\n-2e3 4\r\n2 0 1\r\n";
    let ply = read(ascii).expect("readable");
    assert_eq!(ply.format, Format::Ascii);
    let v = &ply.elements[0];
    assert_eq!(v.scalars("x"), Some(&[1.5, -2000.0][..]));
    assert_eq!(v.scalars("c"), Some(&[-3.0, 4.0][..]));
    assert_eq!(ply.elements[1].lists("idx"), Some(&[vec![0.0, 1.0]][..]));

    let mut big = b"ply\nformat binary_big_endian 1.0\nelement v 1\nproperty short s\nproperty float f\nend_header\n".to_vec();
    big.extend_from_slice(&(-2i16).to_be_bytes());
    big.extend_from_slice(&0.5f32.to_be_bytes());
    let ply = read(&big).expect("readable");
    assert_eq!(ply.elements[0].scalars("s"), Some(&[-2.0][..]));
    assert_eq!(ply.elements[0].scalars("f"), Some(&[0.5][..]));
}

#[test]
fn reader_rejects_malformed_files() {
    let good = mesh(&[[0.0; 3]; 3], &[], &[[0, 1, 2]]).expect("valid");
    assert!(read(&good).is_ok());
    let rejects = |bytes: &[u8]| read(bytes).err();
    assert_eq!(
        rejects(b"plx\nformat ascii 1.0\nend_header\n"),
        Some(PlyError::Magic)
    );
    assert_eq!(rejects(b""), Some(PlyError::Magic));
    let header = |text: &str| matches!(rejects(text.as_bytes()), Some(PlyError::Header { .. }));
    assert!(header("ply\nformat binary_middle_endian 1.0\nend_header\n"));
    assert!(header("ply\nformat ascii 2.0\nend_header\n"));
    assert!(header(
        "ply\nelement vertex 1\nformat ascii 1.0\nend_header\n"
    ));
    assert!(header(
        "ply\nformat ascii 1.0\nproperty float x\nend_header\n"
    ));
    assert!(header(
        "ply\nformat ascii 1.0\nelement vertex 1\nproperty float16 x\nend_header\n"
    ));
    assert!(header(
        "ply\nformat ascii 1.0\nelement vertex 1\nproperty list float int i\nend_header\n"
    ));
    assert!(header(
        "ply\nformat ascii 1.0\nelement vertex -1\nend_header\n"
    ));
    assert!(header(
        "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float x\nend_header\n"
    ));
    assert!(header("ply\nformat ascii 1.0\nelement vertex 1\n"));
    assert!(header("ply\nformat ascii 1.0\nbogus line\nend_header\n"));
    // Truncated data: every proper prefix of the body.
    let body = split_header(&good).1.len();
    for cut in 1..=body {
        assert!(
            matches!(
                rejects(&good[..good.len() - cut]),
                Some(PlyError::Truncated { .. })
            ),
            "cut {cut}"
        );
    }
    let mut long = good.clone();
    long.push(0);
    assert_eq!(rejects(&long), Some(PlyError::TrailingBytes(1)));
    let ascii = "ply\nformat ascii 1.0\nelement v 2\nproperty uchar a\nend_header\n";
    assert!(read(format!("{ascii}1\n2\n").as_bytes()).is_ok());
    assert!(matches!(
        rejects(format!("{ascii}1\n").as_bytes()),
        Some(PlyError::Truncated { .. })
    ));
    assert!(matches!(
        rejects(format!("{ascii}1\n256\n").as_bytes()),
        Some(PlyError::Value { .. })
    ));
    assert!(matches!(
        rejects(format!("{ascii}1\n2 3\n").as_bytes()),
        Some(PlyError::Value { .. })
    ));
    assert!(matches!(
        rejects(format!("{ascii}1\n2.5\n").as_bytes()),
        Some(PlyError::Value { .. })
    ));
    assert!(matches!(
        rejects(format!("{ascii}1\n2\n3\n").as_bytes()),
        Some(PlyError::TrailingBytes(1))
    ));
    let list = "ply\nformat ascii 1.0\nelement f 1\nproperty list char int i\nend_header\n-1\n";
    assert!(matches!(
        rejects(list.as_bytes()),
        Some(PlyError::Value { .. })
    ));
}

/// A large cloud (4M points with a velocity, 67 MB) is its header and every point's 24 bytes, nothing more:
/// the sizes and offsets hold past what a small test reaches. How fast it encodes is `eddies bench
/// outputs-3d-flip` (`write-ply`), not a test's concern.
#[test]
fn a_large_point_cloud_is_every_points_bytes_after_the_header() {
    let n = 4_000_000;
    let pos: Vec<[f32; 3]> = (0..n).map(|i| [i as f32, 0.0, 1.0]).collect();
    let vel = vec![[1.0f32, 2.0, 3.0]; n];
    let bytes = points(&pos, &[Attribute::new("velocity", Values::Vec3(&vel))]).expect("valid");
    let header = split_header(&bytes).0.len();
    assert_eq!(bytes.len(), header + n * 24);
    let last = &bytes[header + (n - 1) * 24..];
    let x = f32::from_le_bytes(last[..4].try_into().unwrap());
    assert_eq!(x, (n - 1) as f32);
}
