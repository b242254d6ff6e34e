//! A strict reader of the VTK XML files this module writes (`.vti`, `.vtp` with raw appended data), apart
//! from the writer, so that tests (and tools) check what was written rather than trust it: it parses the
//! elements and attributes, checks every appended block's byte count against its array's tuples (cells
//! from the extent, points, vertices) and type, that the blocks follow one another without gaps, and that
//! nothing trails them.

/// Why bytes are not a VTK XML file of the kind [`super`] writes.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("not a VTK file of ours: {0}")]
pub struct VtkReadError(String);

fn bad<T>(what: impl Into<String>) -> Result<T, VtkReadError> {
    Err(VtkReadError(what.into()))
}

/// One XML element's name and attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    /// The tag's name.
    pub name: String,
    /// `key="value"` pairs in order.
    pub attrs: Vec<(String, String)>,
}

impl Element {
    /// The attribute `key`.
    pub fn attr(&self, key: &str) -> Result<&str, VtkReadError> {
        match self.attrs.iter().find(|(k, _)| k == key) {
            Some((_, v)) => Ok(v),
            None => bad(format!("<{}> has no {key}", self.name)),
        }
    }

    fn number(&self, key: &str) -> Result<usize, VtkReadError> {
        let v = self.attr(key)?;
        v.parse()
            .or_else(|_| bad(format!("<{}> {key}=\"{v}\" is not a count", self.name)))
    }
}

/// Splits the markup into elements (closing tags and the declaration skipped); an element's section is the
/// nearest enclosing element that is not a `DataArray`.
fn elements(xml: &str) -> Result<Vec<(Element, String)>, VtkReadError> {
    let mut out = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut rest = xml;
    while let Some(at) = rest.find('<') {
        if !rest[..at].trim().is_empty() {
            return bad(format!("text outside elements: {:?}", &rest[..at]));
        }
        let Some(close) = rest[at..].find('>').map(|c| c + at) else {
            return bad("an unclosed tag");
        };
        let raw = &rest[at + 1..close];
        rest = &rest[close + 1..];
        if raw.starts_with('?') {
            continue;
        }
        if let Some(name) = raw.strip_prefix('/') {
            if open.pop().as_deref() != Some(name.trim()) {
                return bad(format!("</{name}> closes nothing open"));
            }
            continue;
        }
        let empty = raw.ends_with('/');
        let tag = raw.trim_end_matches('/');
        let (name, mut text) = tag.split_once(' ').unwrap_or((tag, ""));
        let mut attrs = Vec::new();
        while !text.trim().is_empty() {
            let Some((key, after)) = text.trim_start().split_once("=\"") else {
                return bad(format!("<{name}>: an attribute without a quoted value"));
            };
            let Some((value, after)) = after.split_once('"') else {
                return bad(format!("<{name}>: an unterminated value"));
            };
            attrs.push((key.to_string(), value.to_string()));
            text = after;
        }
        let section = open.last().cloned().unwrap_or_default();
        if !empty {
            open.push(name.to_string());
        }
        out.push((
            Element {
                name: name.to_string(),
                attrs,
            },
            section,
        ));
    }
    Ok(out)
}

/// A file read back: its elements and each `DataArray`'s values by name.
#[derive(Clone, Debug, PartialEq)]
pub struct VtkFile {
    /// Every element, in order.
    pub elements: Vec<Element>,
    /// Each array's name, components and values (as f64: exact for Float32 and for Int64 below 2⁵³).
    pub arrays: Vec<(String, usize, Vec<f64>)>,
}

impl VtkFile {
    /// The first element named `name`.
    pub fn element(&self, name: &str) -> Option<&Element> {
        self.elements.iter().find(|e| e.name == name)
    }

    /// The array `name`: its components and values.
    pub fn array(&self, name: &str) -> Option<(usize, &[f64])> {
        self.arrays
            .iter()
            .find(|(n, ..)| n == name)
            .map(|(_, c, v)| (*c, v.as_slice()))
    }
}

/// Reads a `.vti` or `.vtp` written by [`super::image_data`] or [`super::points`].
pub fn read(bytes: &[u8]) -> Result<VtkFile, VtkReadError> {
    let marker = b"<AppendedData encoding=\"raw\">";
    let Some(at) = bytes.windows(marker.len()).position(|w| w == marker) else {
        return bad("no raw appended data");
    };
    let Some(underscore) = bytes[at..].iter().position(|&b| b == b'_').map(|u| u + at) else {
        return bad("no _ opening the appended data");
    };
    let Ok(xml) = std::str::from_utf8(&bytes[..at]) else {
        return bad("the markup is not UTF-8");
    };
    let parsed = elements(xml)?;
    let Some((file, _)) = parsed.first() else {
        return bad("no elements");
    };
    if file.name != "VTKFile"
        || file.attr("byte_order")? != "LittleEndian"
        || file.attr("header_type")? != "UInt64"
    {
        return bad("not a little-endian VTKFile with UInt64 headers");
    }
    // Tuples per section: cells from the image's extent, points and vertices from the piece.
    let find = |name: &str| parsed.iter().map(|(e, _)| e).find(|e| e.name == name);
    let (cells, points, verts) = match file.attr("type")? {
        "ImageData" => {
            let Some(image) = find("ImageData") else {
                return bad("no <ImageData>");
            };
            let e: Vec<usize> = image
                .attr("WholeExtent")?
                .split(' ')
                .map(|x| x.parse().unwrap_or(usize::MAX))
                .collect();
            if e.len() != 6 || e.contains(&usize::MAX) || e[0] != 0 || e[2] != 0 || e[4] != 0 {
                return bad("WholeExtent is not 0 nx 0 ny 0 nz");
            }
            (e[1] * e[3] * e[5].max(1), 0, 0)
        }
        "PolyData" => {
            let Some(piece) = find("Piece") else {
                return bad("no <Piece>");
            };
            (
                0,
                piece.number("NumberOfPoints")?,
                piece.number("NumberOfVerts")?,
            )
        }
        t => return bad(format!("a VTKFile of type {t}")),
    };
    let data = &bytes[underscore + 1..];
    let tail = b"\n  </AppendedData>\n</VTKFile>\n";
    let Some(data) = data.strip_suffix(tail.as_slice()) else {
        return bad("the file does not end with its closing tags");
    };
    let mut arrays = Vec::new();
    let mut expected_offset = 0;
    for (e, section) in parsed.iter().filter(|(e, _)| e.name == "DataArray") {
        if e.attr("format")? != "appended" {
            return bad("an array that is not appended");
        }
        let offset = e.number("offset")?;
        if offset != expected_offset {
            return bad(format!(
                "array {} at offset {offset}, not {expected_offset}",
                e.attr("Name")?
            ));
        }
        let components = e.number("NumberOfComponents")?;
        let name = e.attr("Name")?;
        let Some(head) = data.get(offset..offset + 8) else {
            return bad(format!("array {name}: no byte count"));
        };
        let count = u64::from_le_bytes(head.try_into().unwrap_or([0; 8])) as usize;
        let Some(block) = data.get(offset + 8..offset + 8 + count) else {
            return bad(format!(
                "array {name}: {count} bytes announced past the end"
            ));
        };
        let values: Vec<f64> = match e.attr("type")? {
            "Float32" => block
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as f64)
                .collect(),
            "Int64" => block
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64)
                .collect(),
            "Int32" => block
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as f64)
                .collect(),
            t => return bad(format!("array {name} of type {t}")),
        };
        let tuples = match section.as_str() {
            "CellData" => cells,
            "PointData" | "Points" => points,
            "Verts" => verts,
            s => return bad(format!("array {name} in <{s}>")),
        };
        if values.len() * if e.attr("type")? == "Int64" { 8 } else { 4 } != count
            || values.len() != tuples * components
        {
            return bad(format!(
                "array {name}: {count} bytes for {tuples} tuples of {components}"
            ));
        }
        expected_offset = offset + 8 + count;
        arrays.push((name.to_string(), components, values));
    }
    if expected_offset != data.len() {
        return bad("bytes trail the last array");
    }
    Ok(VtkFile {
        elements: parsed.into_iter().map(|(e, _)| e).collect(),
        arrays,
    })
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    fn attr<'a>(f: &'a VtkFile, element: &str, key: &str) -> &'a str {
        f.element(element).unwrap().attr(key).unwrap()
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
        let f = read(&bytes).unwrap();
        assert_eq!(attr(&f, "ImageData", "WholeExtent"), "0 4 0 3 0 2");
        assert_eq!(attr(&f, "ImageData", "Origin"), "0 -1 0.5");
        assert_eq!(attr(&f, "ImageData", "Spacing"), "0.25 0.25 0.25");
        assert_eq!(attr(&f, "Piece", "Extent"), "0 4 0 3 0 2");
        let (c, d) = f.array("density").unwrap();
        assert_eq!(c, 1);
        assert!(d.iter().zip(&density).all(|(a, &b)| *a == b as f64));
        let (c, v) = f.array("velocity").unwrap();
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
        let f = read(&bytes).unwrap();
        assert_eq!(attr(&f, "ImageData", "WholeExtent"), "0 3 0 2 0 0");
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
        let f = read(&bytes).unwrap();
        assert_eq!(attr(&f, "Piece", "NumberOfPoints"), "2");
        assert_eq!(attr(&f, "Piece", "NumberOfVerts"), "2");
        assert_eq!(
            f.array("Points").unwrap().1,
            &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        assert_eq!(f.array("speed").unwrap().1, &[7.0, 8.0]);
        assert_eq!(f.array("connectivity").unwrap().1, &[0.0, 1.0]);
        assert_eq!(f.array("offsets").unwrap().1, &[1.0, 2.0]);
        // No particles is a valid file too.
        let empty = points(&[], &[]).unwrap();
        assert_eq!(read(&empty).unwrap().arrays.len(), 3);
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
        let e = elements(&pvd).unwrap();
        assert_eq!(e[0].0.attr("type").unwrap(), "Collection");
        let sets: Vec<_> = e
            .iter()
            .map(|(e, _)| e)
            .filter(|e| e.name == "DataSet")
            .collect();
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[1].attr("file").unwrap(), "particles_00000.vtp");
        assert_eq!(sets[1].attr("timestep").unwrap(), "0.5");
    }

    #[test]
    fn damaged_files_are_refused() {
        let bytes = points(&[0.0; 6], &[]).unwrap();
        assert!(read(&bytes[..bytes.len() - 40]).is_err());
        let mut more = bytes.clone();
        more.splice(more.len() - 30..more.len() - 30, [0u8; 4]);
        assert!(read(&more).is_err());
        assert!(read(b"<?xml version=\"1.0\"?>").is_err());
    }
}
