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

use crate::SimError;

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
        pub fn $name(&self, name: &str, len: usize) -> Result<&[$t], SimError> {
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
    pub fn array(&self, name: &str) -> Result<&StateArray, SimError> {
        self.arrays
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a)
            .ok_or_else(|| {
                SimError::InvalidInput(format!(
                    "the checkpoint has no `{name}`: it was written by another method or version"
                ))
            })
    }

    fn mismatch(name: &str, found: &str, expected: &str) -> SimError {
        SimError::InvalidInput(format!(
            "the checkpoint's `{name}` holds {found} where this scene needs {expected}: it was written for \
             another scene"
        ))
    }

    saved_state_getter!(f32s: f32 => F32, f64s: f64 => F64, u32s: u32 => U32, u64s: u64 => U64, u8s: u8 => U8);

    /// The scalar `name` saved with [`SavedState::push_scalar`] as f64.
    pub fn f64_scalar(&self, name: &str) -> Result<f64, SimError> {
        Ok(self.f64s(name, 1)?[0])
    }

    /// The scalar `name` saved with [`SavedState::push_scalar`] as u64.
    pub fn u64_scalar(&self, name: &str) -> Result<u64, SimError> {
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

/// The resume checks every method's tests share: a run continued from a checkpoint against the run that was
/// not interrupted, bit for bit.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Checkpoint, SavedState, StateArray};
    use crate::{Simulation, StepRecord};

    /// `n` steps, each of the time step `max_dt(cfl)` picks.
    pub fn run(sim: &mut dyn Simulation, n: usize, cfl: f64) -> Vec<StepRecord> {
        (0..n)
            .map(|_| {
                let dt = sim.max_dt(cfl);
                sim.step(dt).expect("a step")
            })
            .collect()
    }

    /// The state's file bytes (a state holding NaN is not `==` itself; its bytes are).
    pub fn bytes(state: &SavedState) -> Vec<u8> {
        Checkpoint {
            meta: Vec::new(),
            state: state.clone(),
        }
        .encode()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every output of `a` and `b` the same, bit for bit: time, steps, the next time step, every field,
    /// particle position and value, tracer positions.
    pub fn assert_same(a: &dyn Simulation, b: &dyn Simulation) {
        assert_eq!(a.steps(), b.steps());
        assert_eq!(a.time().to_bits(), b.time().to_bits(), "time");
        for cfl in [0.5, 1.0, 2.0] {
            assert_eq!(
                a.max_dt(cfl).to_bits(),
                b.max_dt(cfl).to_bits(),
                "max_dt({cfl})"
            );
        }
        let d = a.describe();
        assert_eq!(d, b.describe());
        for name in &d.fields {
            match (a.field(name), b.field(name)) {
                (Some(x), Some(y)) => {
                    assert_eq!((&x.shape, x.signed), (&y.shape, y.signed), "field {name}");
                    assert!(bits(&x.data) == bits(&y.data), "field {name} differs");
                }
                (x, y) => assert_eq!(x.is_some(), y.is_some(), "field {name}"),
            }
        }
        assert!(
            bits(&a.particle_positions()) == bits(&b.particle_positions()),
            "particle positions differ"
        );
        assert!(
            bits(&a.tracer_positions()) == bits(&b.tracer_positions()),
            "tracer positions differ"
        );
        for name in &d.particle_values {
            let (x, y) = (a.particle_values(name), b.particle_values(name));
            assert_eq!(
                x.as_deref().map(bits),
                y.as_deref().map(bits),
                "particle value {name}"
            );
        }
    }

    /// The records of two runs the same but for their wall times: step, time, time step, substeps, every
    /// quantity (their `Debug` text, which spells every bit of a float) and clamps.
    pub fn assert_same_records(a: &[StepRecord], b: &[StepRecord]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert_eq!((x.step, x.substeps), (y.step, y.substeps));
            assert_eq!(
                x.time.to_bits(),
                y.time.to_bits(),
                "time of step {}",
                x.step
            );
            assert_eq!(x.dt.to_bits(), y.dt.to_bits(), "dt of step {}", x.step);
            assert_eq!(
                format!("{:?}", x.quantities),
                format!("{:?}", y.quantities),
                "step {}",
                x.step
            );
            assert_eq!(x.clamps, y.clamps, "clamps of step {}", x.step);
        }
    }

    /// Builds `a`, runs it `k` steps, saves its state through a checkpoint file and runs it `n` more; builds
    /// `b`, restores the state and runs it `n` steps, each of the time step its own `max_dt(cfl)` picks,
    /// which must be `a`'s. Checks the records and every output, and returns both for the method's own
    /// comparisons.
    pub fn check_resume<S: Simulation>(
        build: impl Fn() -> S,
        k: usize,
        n: usize,
        cfl: f64,
    ) -> (S, S) {
        let mut a = build();
        run(&mut a, k, cfl);
        let saved = a.save_state().expect("a state");
        let file = bytes(&saved);
        let state = Checkpoint::decode(&file).expect("a checkpoint").state;
        assert_eq!(bytes(&state), file, "the file round trip");
        let ra = run(&mut a, n, cfl);
        let mut b = build();
        b.restore_state(&state).expect("the state fits");
        // The outputs are readable at once (a driver writes a frame on resuming), whatever the particle
        // count was before.
        for name in b.describe().fields {
            let _ = b.field(name);
        }
        let rb = run(&mut b, n, cfl);
        assert_same_records(&ra, &rb);
        assert_same(&a, &b);
        (a, b)
    }

    /// A hash of what a run shows: its records but for wall times, and every output of the simulation.
    fn fingerprint(sim: &dyn Simulation, records: &[StepRecord]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        for r in records {
            let text = format!(
                "{} {} {} {} {:?} {:?}",
                r.step, r.time, r.dt, r.substeps, r.quantities, r.clamps
            );
            h.update(text.as_bytes());
        }
        let mut floats = |v: &[f32]| v.iter().for_each(|x| h.update(&x.to_le_bytes()));
        floats(&sim.particle_positions());
        floats(&sim.tracer_positions());
        let d = sim.describe();
        for name in &d.fields {
            floats(&sim.field(name).map(|f| f.data).unwrap_or_default());
        }
        for name in &d.particle_values {
            floats(&sim.particle_values(name).unwrap_or_default());
        }
        for x in [sim.max_dt(1.0), sim.time()] {
            h.update(&x.to_le_bytes());
        }
        h.finalize()
    }

    /// `array` with every value changed: floats by 1% and 10⁻³ (a zero, a vorticity at rest, moves too),
    /// integers by one down (zero up).
    fn perturbed(array: &StateArray) -> StateArray {
        let mut a = array.clone();
        match &mut a {
            StateArray::F32(v) => v.iter_mut().for_each(|x| *x = *x * 1.01 + 1e-3),
            StateArray::F64(v) => v.iter_mut().for_each(|x| *x = *x * 1.01 + 1e-3),
            StateArray::U32(v) => v
                .iter_mut()
                .for_each(|x| *x = x.checked_sub(1).unwrap_or(1)),
            StateArray::U64(v) => v
                .iter_mut()
                .for_each(|x| *x = x.checked_sub(1).unwrap_or(1)),
            StateArray::U8(v) => v
                .iter_mut()
                .for_each(|x| *x = x.checked_sub(1).unwrap_or(1)),
        }
        a
    }

    /// Every array that `build`'s scene saves after `k` steps is read by the `n` steps that follow: restored
    /// with another value instead (what a fresh simulation holds, as if the array had not been saved, or where
    /// that is the same or of another length, every value changed), the run differs from the uninterrupted one
    /// (or the state is refused, or the run fails). So the resume tests would catch a restore that skips it.
    /// `unread` names the arrays that the scene's run does not read (checked with another scene).
    pub fn assert_every_array_is_read<S: Simulation>(
        build: impl Fn() -> S,
        k: usize,
        n: usize,
        cfl: f64,
        unread: &[&str],
    ) {
        let mut a = build();
        run(&mut a, k, cfl);
        let saved = a.save_state().expect("a state");
        let records = run(&mut a, n, cfl);
        let want = fingerprint(&a, &records);
        let fresh = build().save_state().expect("a state");
        for (i, (name, array)) in saved.arrays.iter().enumerate() {
            // An empty array holds nothing to forget (its length is checked by the refusal tests).
            if array.is_empty() || unread.contains(&name.as_str()) {
                continue;
            }
            let unsaved = fresh.array(name).ok().filter(|f| {
                f.len() == array.len() && {
                    let one = |a: &StateArray| {
                        bytes(&SavedState {
                            arrays: vec![(String::new(), a.clone())],
                        })
                    };
                    one(f) != one(array)
                }
            });
            let mut forged = saved.clone();
            forged.arrays[i].1 = unsaved.cloned().unwrap_or_else(|| perturbed(array));
            let mut b = build();
            let bites = b.restore_state(&forged).is_err() || {
                let mut records = Vec::new();
                let mut failed = false;
                for _ in 0..n {
                    match b.step(b.max_dt(cfl)) {
                        Ok(r) => records.push(r),
                        Err(_) => {
                            failed = true;
                            break;
                        }
                    }
                }
                failed || fingerprint(&b, &records) != want
            };
            assert!(
                bites,
                "`{name}` changes nothing when it is not restored: it need not be saved"
            );
        }
    }

    /// `sim` refuses `state` with an error that contains `names`, and is left as it was.
    pub fn assert_refused<S: Simulation>(sim: &mut S, state: &SavedState, names: &str) {
        let before = bytes(&sim.save_state().expect("a state"));
        let err = sim
            .restore_state(state)
            .expect_err("a state that does not fit");
        assert!(err.to_string().contains(names), "{err}");
        assert!(matches!(err, crate::SimError::InvalidInput(_)));
        assert!(
            bytes(&sim.save_state().expect("a state")) == before,
            "changed by a refused state"
        );
    }
}
