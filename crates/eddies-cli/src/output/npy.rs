//! NPY arrays (NumPy's format, version 1.0) of little-endian float32 in C order, for `output.npy`.
//!
//! Layout (numpy/lib/format.py): the magic `\x93NUMPY`, version bytes 1 and 0, the header length as a
//! little-endian u16, then an ASCII Python dict literal padded with spaces and ended by `\n` so that the data
//! starts at a multiple of 64 bytes, then the data.

/// Encodes `data` with `shape` (slowest axis first) as an NPY v1.0 file.
///
/// # Panics
/// If the product of `shape` differs from `data.len()` (a programming error).
pub fn encode_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    assert_eq!(
        shape.iter().product::<usize>(),
        data.len(),
        "NPY shape does not match the data"
    );
    let dims = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {dims}, }}");
    // 10 bytes of preamble; header plus its trailing newline padded to a multiple of 64.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * data.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for x in data {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Decodes an NPY v1.0 float32 C-order file as written by [`encode_f32`]: returns the shape and data.
pub fn decode_f32(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>), String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not an NPY file (bad magic)".into());
    }
    if bytes[6] != 1 {
        return Err(format!(
            "NPY version {}.{} is not supported",
            bytes[6], bytes[7]
        ));
    }
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let start = 10 + hlen;
    if !start.is_multiple_of(64) {
        return Err("NPY data is not 64-byte aligned".into());
    }
    let header = std::str::from_utf8(bytes.get(10..start).ok_or("truncated header")?)
        .map_err(|e| e.to_string())?;
    if !header.contains("'descr': '<f4'") || !header.contains("'fortran_order': False") {
        return Err(format!("unsupported NPY header {header:?}"));
    }
    let open = header.find("'shape': (").ok_or("no shape in header")? + "'shape': (".len();
    let close = open + header[open..].find(')').ok_or("unclosed shape")?;
    let shape: Vec<usize> = header[open..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|e| format!("bad dimension {s:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let data: Vec<f32> = bytes[start..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if data.len() != shape.iter().product::<usize>() || !(bytes.len() - start).is_multiple_of(4) {
        return Err("NPY data length does not match the shape".into());
    }
    Ok((shape, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_2d_and_3d() {
        for shape in [vec![3, 2], vec![2, 3, 4], vec![5], vec![0, 2]] {
            let n = shape.iter().product::<usize>();
            let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 1.0).collect();
            let bytes = encode_f32(&shape, &data);
            let (s, d) = decode_f32(&bytes).unwrap();
            assert_eq!(s, shape);
            assert_eq!(d, data);
        }
    }

    #[test]
    fn header_matches_numpy_conventions() {
        let bytes = encode_f32(&[2, 3], &[0.0; 6]);
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(header.ends_with('\n'));
        assert_eq!(bytes.len(), 10 + hlen + 24);
        let one = encode_f32(&[5], &[0.0; 5]);
        assert!(
            std::str::from_utf8(&one[10..])
                .unwrap_or("")
                .contains("(5,)")
                || one.windows(4).any(|w| w == b"(5,)")
        );
    }
}
