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

/// Why bytes are not an NPY file as [`encode_f32`] writes them.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The file does not start with `\x93NUMPY`.
    #[error("not an NPY file (bad magic)")]
    BadMagic,
    /// A format version other than 1.x.
    #[error("NPY version {0}.{1} is not supported")]
    Version(u8, u8),
    /// The data does not start at a multiple of 64 bytes.
    #[error("NPY data is not 64-byte aligned")]
    Unaligned,
    /// The file ends inside the header.
    #[error("truncated header")]
    TruncatedHeader,
    /// The header is not text.
    #[error("{0}")]
    HeaderNotText(#[from] std::str::Utf8Error),
    /// The header describes something other than little-endian float32 in C order.
    #[error("unsupported NPY header {0:?}")]
    UnsupportedHeader(String),
    /// The header has no `'shape': (`.
    #[error("no shape in header")]
    NoShape,
    /// The header's shape has no closing parenthesis.
    #[error("unclosed shape")]
    UnclosedShape,
    /// A dimension of the shape is not a number.
    #[error("bad dimension {text:?}: {source}")]
    BadDimension {
        /// The dimension as written.
        text: String,
        /// Why it does not parse.
        source: std::num::ParseIntError,
    },
    /// The data is not the shape's number of float32 values.
    #[error("NPY data length does not match the shape")]
    LengthMismatch,
}

/// Decodes an NPY v1.0 float32 C-order file as written by [`encode_f32`]: returns the shape and data.
pub fn decode_f32(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>), NpyError> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(NpyError::BadMagic);
    }
    if bytes[6] != 1 {
        return Err(NpyError::Version(bytes[6], bytes[7]));
    }
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let start = 10 + hlen;
    if !start.is_multiple_of(64) {
        return Err(NpyError::Unaligned);
    }
    let header = std::str::from_utf8(bytes.get(10..start).ok_or(NpyError::TruncatedHeader)?)?;
    if !header.contains("'descr': '<f4'") || !header.contains("'fortran_order': False") {
        return Err(NpyError::UnsupportedHeader(header.to_string()));
    }
    let open = header.find("'shape': (").ok_or(NpyError::NoShape)? + "'shape': (".len();
    let close = open + header[open..].find(')').ok_or(NpyError::UnclosedShape)?;
    let shape: Vec<usize> = header[open..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse().map_err(|source| NpyError::BadDimension {
                text: s.to_string(),
                source,
            })
        })
        .collect::<Result<_, _>>()?;
    let data: Vec<f32> = bytes[start..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if data.len() != shape.iter().product::<usize>() || !(bytes.len() - start).is_multiple_of(4) {
        return Err(NpyError::LengthMismatch);
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
