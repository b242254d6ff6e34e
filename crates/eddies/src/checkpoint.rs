//! Checkpoints: a simulation's evolving state as named arrays ([`SavedState`], what
//! [`Simulation::save_state`](crate::Simulation::save_state) returns), and the file that holds it with a
//! driver's metadata ([`Checkpoint`]): versioned and checksummed, so that a truncated, corrupt or foreign file
//! is refused with a reason instead of resuming from garbage.
//!
//! What a state holds is only what evolves: a simulation is rebuilt from its scene, then given the state. So
//! a checkpoint is small (the particles and the fields a step reads, the time, the step count, a random
//! generator's position), and resuming repeats the uninterrupted run bit for bit.
//!
//! File layout (all integers little-endian):
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `EDDIESCK` |
//! | 4 | format version ([`FORMAT_VERSION`]) |
//! | 8 | length of the body that follows (bytes) |
//! | body | metadata: a `u32` count, then per entry two strings; arrays: a `u32` count, then per array a string (its name), a `u8` type tag (0 f32, 1 f64, 2 u32, 3 u64, 4 u8), a `u64` length and the values |
//! | 4 | CRC-32 (IEEE) of everything before it |
//!
//! A string is a `u32` byte length and UTF-8 bytes.

/// The first bytes of every checkpoint file.
pub const MAGIC: &[u8; 8] = b"EDDIESCK";
/// The version this build writes and reads. Raise it when the layout, or what a method saves, changes.
pub const FORMAT_VERSION: u32 = 1;

/// One saved array.
#[derive(Clone, Debug, PartialEq)]
pub enum StateArray {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// 64-bit floats (times, positions kept in double precision).
    F64(Vec<f64>),
    /// 32-bit unsigned integers (indices, flags).
    U32(Vec<u32>),
    /// 64-bit unsigned integers (counters, random generator states).
    U64(Vec<u64>),
    /// Bytes (flags, booleans).
    U8(Vec<u8>),
}

impl StateArray {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Self::F32(v) => v.len(),
            Self::F64(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::U8(v) => v.len(),
        }
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn tag(&self) -> u8 {
        match self {
            Self::F32(_) => 0,
            Self::F64(_) => 1,
            Self::U32(_) => 2,
            Self::U64(_) => 3,
            Self::U8(_) => 4,
        }
    }

    fn type_name(&self) -> &'static str {
        ["f32", "f64", "u32", "u64", "u8"][self.tag() as usize]
    }
}

macro_rules! state_array_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<Vec<$t>> for StateArray {
            fn from(v: Vec<$t>) -> Self {
                Self::$v(v)
            }
        }
    )*};
}
state_array_from!(f32 => F32, f64 => F64, u32 => U32, u64 => U64, u8 => U8);

/// Why a saved state does not fit the simulation asked to continue from it: an array missing, or of another
/// type or length. [`crate::SimError`] takes it as an invalid input.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("{0}")]
pub struct StateMismatch(pub String);

/// A simulation's evolving state: named arrays, in the order the method saved them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SavedState {
    /// The arrays by name.
    pub arrays: Vec<(String, StateArray)>,
}

/// Reading one typed array out of a [`SavedState`].
macro_rules! saved_state_getter {
    ($($name:ident: $t:ty => $v:ident),*) => {$(
        /// The array `name` of this type with exactly `len` values, or an error naming what differs.
        pub fn $name(&self, name: &str, len: usize) -> Result<&[$t], StateMismatch> {
            match self.array(name)? {
                StateArray::$v(v) if v.len() == len => Ok(v),
                StateArray::$v(v) => Err(Self::mismatch(name, &format!("{} values", v.len()), &format!("{len}"))),
                other => Err(Self::mismatch(name, other.type_name(), stringify!($t))),
            }
        }
    )*};
}

impl SavedState {
    /// Adds an array.
    pub fn push(&mut self, name: impl Into<String>, values: impl Into<StateArray>) {
        self.arrays.push((name.into(), values.into()));
    }

    /// Adds a scalar as an array of one value.
    pub fn push_scalar<T>(&mut self, name: impl Into<String>, value: T)
    where
        Vec<T>: Into<StateArray>,
    {
        self.push(name, vec![value]);
    }

    /// The array `name`, or an error naming it.
    pub fn array(&self, name: &str) -> Result<&StateArray, StateMismatch> {
        self.arrays
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a)
            .ok_or_else(|| {
                StateMismatch(format!(
                    "the checkpoint has no `{name}`: it was written by another method or version"
                ))
            })
    }

    fn mismatch(name: &str, found: &str, expected: &str) -> StateMismatch {
        StateMismatch(format!(
            "the checkpoint's `{name}` holds {found} where this scene needs {expected}: it was written for \
             another scene"
        ))
    }

    saved_state_getter!(f32s: f32 => F32, f64s: f64 => F64, u32s: u32 => U32, u64s: u64 => U64, u8s: u8 => U8);

    /// The scalar `name` saved with [`SavedState::push_scalar`] as f64.
    pub fn f64_scalar(&self, name: &str) -> Result<f64, StateMismatch> {
        Ok(self.f64s(name, 1)?[0])
    }

    /// The scalar `name` saved with [`SavedState::push_scalar`] as u64.
    pub fn u64_scalar(&self, name: &str) -> Result<u64, StateMismatch> {
        Ok(self.u64s(name, 1)?[0])
    }

    /// Bytes of the values held.
    pub fn bytes(&self) -> usize {
        self.arrays
            .iter()
            .map(|(_, a)| {
                a.len()
                    * match a {
                        StateArray::F32(_) | StateArray::U32(_) => 4,
                        StateArray::F64(_) | StateArray::U64(_) => 8,
                        StateArray::U8(_) => 1,
                    }
            })
            .sum()
    }
}

/// A checkpoint file's content: a driver's metadata (the scene, the frame reached, the program's version)
/// and the simulation's state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checkpoint {
    /// Key–value pairs the driver needs to resume, in order.
    pub meta: Vec<(String, String)>,
    /// The simulation's state.
    pub state: SavedState,
}

/// Why bytes are not a checkpoint this build can resume from.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum CheckpointError {
    /// The file does not start with [`MAGIC`].
    #[error("not an eddies checkpoint (it does not start with EDDIESCK)")]
    Foreign,
    /// Another format version.
    #[error("checkpoint format version {found}, but this eddies reads version {FORMAT_VERSION}")]
    Version {
        /// The file's version.
        found: u32,
    },
    /// The file ends early.
    #[error("the checkpoint is truncated: {found} bytes where its header announces {expected}")]
    Truncated {
        /// Bytes present.
        found: usize,
        /// Bytes the header announces.
        expected: usize,
    },
    /// The checksum does not match the content.
    #[error("the checkpoint is corrupt: its CRC-32 is {stored:08x} but its content gives {computed:08x}")]
    Checksum {
        /// The checksum written.
        stored: u32,
        /// The checksum of what was read.
        computed: u32,
    },
    /// The checksum matches but the body does not parse (a bug in the writer, or a crafted file).
    #[error("the checkpoint is malformed: {0}")]
    Malformed(String),
}

impl Checkpoint {
    /// The value of metadata `key`.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.state.bytes() + 1024);
        put_u32(&mut body, self.meta.len() as u32);
        for (k, v) in &self.meta {
            put_str(&mut body, k);
            put_str(&mut body, v);
        }
        put_u32(&mut body, self.state.arrays.len() as u32);
        for (name, array) in &self.state.arrays {
            put_str(&mut body, name);
            body.push(array.tag());
            body.extend_from_slice(&(array.len() as u64).to_le_bytes());
            match array {
                StateArray::F32(v) => v.iter().for_each(|x| body.extend(x.to_le_bytes())),
                StateArray::F64(v) => v.iter().for_each(|x| body.extend(x.to_le_bytes())),
                StateArray::U32(v) => v.iter().for_each(|x| body.extend(x.to_le_bytes())),
                StateArray::U64(v) => v.iter().for_each(|x| body.extend(x.to_le_bytes())),
                StateArray::U8(v) => body.extend_from_slice(v),
            }
        }
        let mut out = Vec::with_capacity(body.len() + 24);
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, FORMAT_VERSION);
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        let crc = crc32fast::hash(&out);
        put_u32(&mut out, crc);
        out
    }

    /// Reads a file written by [`Checkpoint::encode`], checking its magic, version, length and checksum.
    pub fn decode(bytes: &[u8]) -> Result<Self, CheckpointError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(CheckpointError::Foreign);
        }
        let header = MAGIC.len() + 12;
        if bytes.len() < header {
            return Err(CheckpointError::Truncated {
                found: bytes.len(),
                expected: header + 4,
            });
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
        if version != FORMAT_VERSION {
            return Err(CheckpointError::Version { found: version });
        }
        let body_len = u64::from_le_bytes(bytes[12..20].try_into().unwrap_or_default());
        let expected = usize::try_from(body_len)
            .ok()
            .and_then(|n| n.checked_add(header + 4))
            .unwrap_or(usize::MAX);
        if bytes.len() != expected {
            return Err(CheckpointError::Truncated {
                found: bytes.len(),
                expected,
            });
        }
        let (content, tail) = bytes.split_at(expected - 4);
        let stored = u32::from_le_bytes(tail.try_into().unwrap_or_default());
        let computed = crc32fast::hash(content);
        if stored != computed {
            return Err(CheckpointError::Checksum { stored, computed });
        }
        let mut r = Reader {
            bytes: &content[header..],
        };
        let mut meta = Vec::new();
        for _ in 0..r.u32()? {
            meta.push((r.string()?, r.string()?));
        }
        let mut state = SavedState::default();
        for _ in 0..r.u32()? {
            let name = r.string()?;
            let tag = r.take(1)?[0];
            let len = usize::try_from(r.u64()?)
                .map_err(|_| CheckpointError::Malformed(format!("array `{name}` is too long")))?;
            let array = match tag {
                0 => StateArray::F32(r.values(len, f32::from_le_bytes)?),
                1 => StateArray::F64(r.values(len, f64::from_le_bytes)?),
                2 => StateArray::U32(r.values(len, u32::from_le_bytes)?),
                3 => StateArray::U64(r.values(len, u64::from_le_bytes)?),
                4 => StateArray::U8(r.take(len)?.to_vec()),
                t => {
                    return Err(CheckpointError::Malformed(format!(
                        "array `{name}` has the unknown type tag {t}"
                    )))
                }
            };
            state.arrays.push((name, array));
        }
        if !r.bytes.is_empty() {
            return Err(CheckpointError::Malformed(format!(
                "{} bytes after the last array",
                r.bytes.len()
            )));
        }
        Ok(Self { meta, state })
    }
}

fn put_u32(out: &mut Vec<u8>, x: u32) {
    out.extend_from_slice(&x.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}

/// A cursor over a checkpoint's body.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CheckpointError> {
        if n > self.bytes.len() {
            return Err(CheckpointError::Malformed(format!(
                "{n} bytes wanted, {} left",
                self.bytes.len()
            )));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, CheckpointError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }

    fn u64(&mut self) -> Result<u64, CheckpointError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }

    fn string(&mut self) -> Result<String, CheckpointError> {
        let len = self.u32()? as usize;
        String::from_utf8(self.take(len)?.to_vec())
            .map_err(|e| CheckpointError::Malformed(format!("a name is not UTF-8: {e}")))
    }

    fn values<T, const N: usize>(
        &mut self,
        len: usize,
        from: fn([u8; N]) -> T,
    ) -> Result<Vec<T>, CheckpointError> {
        let bytes = len
            .checked_mul(N)
            .ok_or_else(|| CheckpointError::Malformed("an array is too long".into()))?;
        Ok(self
            .take(bytes)?
            .chunks_exact(N)
            .map(|c| from(c.try_into().unwrap_or([0; N])))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        let mut state = SavedState::default();
        state.push("pos", vec![1.5f32, -0.0, f32::MIN_POSITIVE]);
        state.push_scalar("time", 0.1f64 + 0.2);
        state.push_scalar("steps", 12u64);
        state.push("flags", vec![1u8, 0, 255]);
        state.push("ids", vec![7u32]);
        Checkpoint {
            meta: vec![("scene".into(), "method = \"reint\"\n".into())],
            state,
        }
    }

    #[test]
    fn round_trip_is_bit_exact() {
        let c = sample();
        let back = Checkpoint::decode(&c.encode()).unwrap();
        assert_eq!(back, c);
        assert_eq!(
            back.state.f64_scalar("time").unwrap().to_bits(),
            (0.1f64 + 0.2).to_bits()
        );
        assert_eq!(back.meta("scene"), Some("method = \"reint\"\n"));
    }

    #[test]
    fn damaged_files_are_refused_with_their_reason() {
        let bytes = sample().encode();
        assert_eq!(
            Checkpoint::decode(b"PK\x03\x04 a zip file"),
            Err(CheckpointError::Foreign)
        );
        assert!(matches!(
            Checkpoint::decode(&bytes[..bytes.len() - 7]),
            Err(CheckpointError::Truncated { .. })
        ));
        let mut flipped = bytes.clone();
        flipped[40] ^= 0x10;
        assert!(matches!(
            Checkpoint::decode(&flipped),
            Err(CheckpointError::Checksum { .. })
        ));
        let mut newer = bytes.clone();
        newer[8] = 2;
        assert_eq!(
            Checkpoint::decode(&newer),
            Err(CheckpointError::Version { found: 2 })
        );
    }

    #[test]
    fn getters_name_what_is_missing_or_mismatched() {
        let s = sample().state;
        assert_eq!(s.f32s("pos", 3).unwrap()[0], 1.5);
        let missing = s.f32s("vel", 3).unwrap_err().to_string();
        assert!(missing.contains("no `vel`"), "{missing}");
        let short = s.f32s("pos", 4).unwrap_err().to_string();
        assert!(
            short.contains("3 values") && short.contains("needs 4"),
            "{short}"
        );
        let typed = s.f64s("pos", 3).unwrap_err().to_string();
        assert!(typed.contains("f32") && typed.contains("f64"), "{typed}");
    }
}
