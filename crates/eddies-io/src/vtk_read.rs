//! A strict reader of the VTK XML files [`super`] writes, written apart from the writer for the tests: it
//! parses the XML's elements and attributes, checks every appended block's byte count against its array's
//! tuples and type, that the blocks follow one another without gaps and that nothing trails them, and
//! returns the arrays' values.

use super::*;

/// One XML element's name and attributes.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
}

impl Element {
    fn attr(&self, key: &str) -> &str {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("<{}> has no {key}", self.name))
    }
}

/// Splits the markup into elements (closing tags and the declaration skipped), checking that every
/// attribute is `key="value"`.
fn elements(xml: &str) -> Vec<Element> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(open) = rest.find('<') {
        assert!(
            rest[..open].trim().is_empty(),
            "text outside elements: {:?}",
            &rest[..open]
        );
        let close = rest[open..].find('>').expect("unclosed tag") + open;
        let tag = rest[open + 1..close].trim_end_matches('/');
        rest = &rest[close + 1..];
        if tag.starts_with('/') || tag.starts_with('?') {
            continue;
        }
        let (name, mut attrs_text) = tag.split_once(' ').unwrap_or((tag, ""));
        let mut attrs = Vec::new();
        while !attrs_text.trim().is_empty() {
            let (key, after) = attrs_text
                .trim_start()
                .split_once("=\"")
                .expect("attribute");
            let (value, after) = after.split_once('"').expect("quoted value");
            attrs.push((key.to_string(), value.to_string()));
            attrs_text = after;
        }
        out.push(Element {
            name: name.to_string(),
            attrs,
        });
    }
    out
}

/// A file read back: its elements and each `DataArray`'s values (as f64) by name.
pub(super) struct VtkFile {
    elements: Vec<Element>,
    pub arrays: Vec<(String, usize, Vec<f64>)>,
}

impl VtkFile {
    pub fn element(&self, name: &str) -> &Element {
        self.elements
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no <{name}>"))
    }

    pub fn array(&self, name: &str) -> (usize, &[f64]) {
        let (_, c, v) = self
            .arrays
            .iter()
            .find(|(n, ..)| n == name)
            .unwrap_or_else(|| panic!("no array {name}"));
        (*c, v)
    }
}

/// Reads a `.vti` or `.vtp` of `tuples_of(array name)` tuples per array, checking the appended blocks.
pub(super) fn read(bytes: &[u8], tuples_of: impl Fn(&str) -> usize) -> VtkFile {
    let marker = b"<AppendedData encoding=\"raw\">";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("appended data");
    let underscore = at + bytes[at..].iter().position(|&b| b == b'_').expect("_");
    let xml = std::str::from_utf8(&bytes[..at]).expect("UTF-8 markup");
    let elements = elements(xml);
    let file = &elements[0];
    assert_eq!(file.name, "VTKFile");
    assert_eq!(file.attr("byte_order"), "LittleEndian");
    assert_eq!(file.attr("header_type"), "UInt64");
    let data = &bytes[underscore + 1..];
    let tail = b"\n  </AppendedData>\n</VTKFile>\n";
    assert!(data.ends_with(tail), "the file ends with its closing tags");
    let data = &data[..data.len() - tail.len()];
    let mut arrays = Vec::new();
    let mut expected_offset = 0;
    for e in elements.iter().filter(|e| e.name == "DataArray") {
        assert_eq!(e.attr("format"), "appended");
        let offset: usize = e.attr("offset").parse().unwrap();
        assert_eq!(offset, expected_offset, "blocks follow one another");
        let components: usize = e.attr("NumberOfComponents").parse().unwrap();
        let name = e.attr("Name");
        let count = u64::from_le_bytes(data[offset..offset + 8].try_into().unwrap()) as usize;
        let block = &data[offset + 8..offset + 8 + count];
        let values: Vec<f64> = match e.attr("type") {
            "Float32" => block
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            "Int64" => block
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            t => panic!("unexpected type {t}"),
        };
        assert_eq!(values.len(), tuples_of(name) * components, "{name}");
        expected_offset = offset + 8 + count;
        arrays.push((name.to_string(), components, values));
    }
    assert_eq!(expected_offset, data.len(), "nothing trails the last block");
    VtkFile { elements, arrays }
}

#[test]
fn image_data_reads_back_with_its_geometry() {
    let density: Vec<f32> = (0..4 * 3 * 2).map(|i| i as f32 * 0.5).collect();
    let velocity: Vec<f32> = (0..3 * 24).map(|i| -(i as f32)).collect();
    let bytes = image_data(
        [4, 3, 2],
        [0.0, -1.0, 0.5],
        0.25,
        &[
            VtkArray {
                name: "density",
                components: 1,
                values: &density,
            },
            VtkArray {
                name: "velocity",
                components: 3,
                values: &velocity,
            },
        ],
    )
    .unwrap();
    let f = read(&bytes, |_| 24);
    let image = f.element("ImageData");
    assert_eq!(image.attr("WholeExtent"), "0 4 0 3 0 2");
    assert_eq!(image.attr("Origin"), "0 -1 0.5");
    assert_eq!(image.attr("Spacing"), "0.25 0.25 0.25");
    assert_eq!(f.element("Piece").attr("Extent"), "0 4 0 3 0 2");
    let (c, d) = f.array("density");
    assert_eq!(c, 1);
    assert!(d.iter().zip(&density).all(|(a, &b)| *a == b as f64));
    let (c, v) = f.array("velocity");
    assert_eq!(c, 3);
    assert!(v.iter().zip(&velocity).all(|(a, &b)| *a == b as f64));
}

#[test]
fn a_flat_grid_has_a_zero_z_extent() {
    let v = [1.0f32; 6];
    let bytes = image_data(
        [3, 2, 1],
        [0.0; 3],
        0.5,
        &[VtkArray {
            name: "mass",
            components: 1,
            values: &v,
        }],
    )
    .unwrap();
    let f = read(&bytes, |_| 6);
    assert_eq!(f.element("ImageData").attr("WholeExtent"), "0 3 0 2 0 0");
}

#[test]
fn points_read_back_with_vertices_and_attributes() {
    let positions = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let speed = [7.0f32, 8.0];
    let bytes = points(
        &positions,
        &[VtkArray {
            name: "speed",
            components: 1,
            values: &speed,
        }],
    )
    .unwrap();
    let f = read(&bytes, |_| 2);
    let piece = f.element("Piece");
    assert_eq!(piece.attr("NumberOfPoints"), "2");
    assert_eq!(piece.attr("NumberOfVerts"), "2");
    assert_eq!(f.array("Points").1, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(f.array("speed").1, &[7.0, 8.0]);
    assert_eq!(f.array("connectivity").1, &[0.0, 1.0]);
    assert_eq!(f.array("offsets").1, &[1.0, 2.0]);
    // No particles is a valid file too.
    let empty = points(&[], &[]).unwrap();
    assert_eq!(read(&empty, |_| 0).arrays.len(), 3);
}

#[test]
fn bad_arrays_are_refused() {
    let v = [0.0f32; 5];
    let arr = |name| VtkArray {
        name,
        components: 1,
        values: &v,
    };
    assert!(matches!(
        image_data([2, 2, 1], [0.0; 3], 1.0, &[arr("a")]),
        Err(VtkError::Length { expected: 4, .. })
    ));
    assert!(matches!(
        points(&[0.0; 15], &[arr("a\"b")]),
        Err(VtkError::Name(_))
    ));
    assert!(matches!(
        points(&[0.0; 15], &[arr("a"), arr("a")]),
        Err(VtkError::Name(_))
    ));
    assert!(matches!(points(&[0.0; 4], &[]), Err(VtkError::Geometry(_))));
    assert!(matches!(
        image_data([1, 1, 1], [0.0; 3], 0.0, &[]),
        Err(VtkError::Geometry(_))
    ));
}

#[test]
fn collection_lists_each_file_at_its_time() {
    let pvd = collection(&[
        CollectionEntry {
            time: 0.5,
            part: 0,
            file: "grid_00000.vti".into(),
        },
        CollectionEntry {
            time: 0.5,
            part: 1,
            file: "particles_00000.vtp".into(),
        },
    ]);
    let e = elements(&pvd);
    assert_eq!(e[0].attr("type"), "Collection");
    let sets: Vec<_> = e.iter().filter(|e| e.name == "DataSet").collect();
    assert_eq!(sets.len(), 2);
    assert_eq!(sets[1].attr("file"), "particles_00000.vtp");
    assert_eq!(sets[1].attr("timestep"), "0.5");
}
