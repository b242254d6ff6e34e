//! Deterministic parallel loops and reductions.
//!
//! Every CPU stage of eddies gives bit-identical results for any number of threads (Gourlay, part 12, asks that
//! parallel results equal serial ones). The rules that make that true live here:
//!
//! * work is cut into chunks whose size is fixed by the caller, never derived from the pool size;
//! * a reduction computes one partial per chunk and combines the partials sequentially, in chunk order;
//! * there are no float atomics; a scatter is written as a gather, or as passes over disjoint slabs.
//!
//! The loops run on the current rayon pool: wrap a call in [`with_threads`] (or a pool's `install`) to choose the
//! worker count.

use rayon::prelude::*;
use std::cell::UnsafeCell;
use std::ops::Range;

/// Chunk length of the reductions: large enough that scheduling costs vanish, small enough to balance two to
/// sixteen workers on grids of 10⁵ cells and more.
pub const REDUCE_CHUNK: usize = 1 << 14;

/// Runs `f` on a fresh rayon pool of `threads` workers (0: rayon's default, one per core).
///
/// # Panics
/// If the operating system refuses to start the threads.
pub fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("failed to start a thread pool")
        .install(f)
}

/// Number of fixed-length chunks that cover `0..n`.
#[inline]
pub fn chunk_count(n: usize, chunk: usize) -> usize {
    n.div_ceil(chunk.max(1))
}

/// The `c`-th chunk of `0..n` cut into pieces of length `chunk`.
#[inline]
pub fn chunk_range(n: usize, chunk: usize, c: usize) -> Range<usize> {
    let chunk = chunk.max(1);
    let start = c * chunk;
    start..(start + chunk).min(n)
}

/// Calls `f(i)` for every `i` in `0..n`, in parallel. Each index is visited once; `f` must only write to data
/// owned by index `i` (or read shared data), which makes the result independent of the schedule.
pub fn for_each(n: usize, grain: usize, f: impl Fn(usize) + Sync + Send) {
    (0..n)
        .into_par_iter()
        .with_min_len(grain.max(1))
        .for_each(f);
}

/// Calls `f(range)` for each fixed-length chunk of `0..n`, in parallel.
pub fn for_each_chunk(n: usize, chunk: usize, f: impl Fn(Range<usize>) + Sync + Send) {
    (0..chunk_count(n, chunk))
        .into_par_iter()
        .for_each(|c| f(chunk_range(n, chunk, c)));
}

/// Deterministic map-reduce over `0..n`: `map` turns each chunk of length `chunk` into a partial, and the
/// partials are folded with `combine` from left to right in chunk order. The result is bit-identical for any
/// thread count because the chunks and the order of combination depend only on `n` and `chunk`.
pub fn reduce<T: Send>(
    n: usize,
    chunk: usize,
    identity: T,
    map: impl Fn(Range<usize>) -> T + Sync + Send,
    combine: impl Fn(T, T) -> T,
) -> T {
    let partials: Vec<T> = (0..chunk_count(n, chunk))
        .into_par_iter()
        .map(|c| map(chunk_range(n, chunk, c)))
        .collect();
    partials.into_iter().fold(identity, combine)
}

/// Deterministic sum of `f(i)` over `0..n` in f64: sequential within each chunk of [`REDUCE_CHUNK`], partials
/// added in chunk order.
pub fn sum(n: usize, f: impl Fn(usize) -> f64 + Sync + Send) -> f64 {
    reduce(
        n,
        REDUCE_CHUNK,
        0.0,
        |r| r.fold(0.0, |acc, i| acc + f(i)),
        |a, b| a + b,
    )
}

/// Deterministic component-wise sum of a `K`-vector `f(i)` over `0..n` (several sums in one pass).
pub fn sum_n<const K: usize>(n: usize, f: impl Fn(usize) -> [f64; K] + Sync + Send) -> [f64; K] {
    let add = |mut a: [f64; K], b: [f64; K]| {
        for k in 0..K {
            a[k] += b[k];
        }
        a
    };
    reduce(
        n,
        REDUCE_CHUNK,
        [0.0; K],
        |r| r.fold([0.0; K], |acc, i| add(acc, f(i))),
        add,
    )
}

/// The larger of `a` and `b`, NaN when either is (`f64::max` would drop the NaN and hide a blow-up).
pub fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Maximum of `f(i)` over `0..n` (`-inf` when empty; NaN-propagating so that a blow-up is never hidden).
pub fn max(n: usize, f: impl Fn(usize) -> f64 + Sync + Send) -> f64 {
    reduce(
        n,
        REDUCE_CHUNK,
        f64::NEG_INFINITY,
        |r| r.fold(f64::NEG_INFINITY, |acc, i| nan_max(acc, f(i))),
        nan_max,
    )
}

/// A slice that parallel tasks write through at disjoint indices.
///
/// Stages that produce several struct-of-arrays outputs per grid row (one `Vec` per attribute) cannot hand
/// each task a `&mut` row of every array through rayon's splitting APIs; this wrapper lets a task borrow the
/// rows it owns. Soundness rests on the caller: two live borrows must never overlap.
pub struct SharedSlice<'a, T> {
    cells: &'a [UnsafeCell<T>],
}

// SAFETY: access is only through `slice_mut`, whose contract forbids overlapping borrows, so sharing the
// wrapper across threads is as safe as sending disjoint `&mut [T]` pieces.
unsafe impl<T: Send> Sync for SharedSlice<'_, T> {}
unsafe impl<T: Send> Send for SharedSlice<'_, T> {}

impl<'a, T> SharedSlice<'a, T> {
    /// Wraps a mutable slice for disjoint parallel writes.
    pub fn new(slice: &'a mut [T]) -> Self {
        let len = slice.len();
        let ptr = slice.as_mut_ptr() as *const UnsafeCell<T>;
        // SAFETY: `UnsafeCell<T>` has the same layout as `T`, and we hold the unique borrow for `'a`.
        let cells = unsafe { std::slice::from_raw_parts(ptr, len) };
        Self { cells }
    }

    /// Length of the wrapped slice.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether the wrapped slice is empty.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Mutable access to `range`.
    ///
    /// # Safety
    /// No other borrow obtained from this wrapper that overlaps `range` may be alive at the same time.
    ///
    /// # Panics
    /// If `range` is out of bounds.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, range: Range<usize>) -> &mut [T] {
        let cells = &self.cells[range];
        // SAFETY: the caller guarantees exclusivity of this range; UnsafeCell permits mutation through `&`.
        unsafe { std::slice::from_raw_parts_mut(cells.as_ptr() as *mut T, cells.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_range_exactly_once() {
        let n = 10_007;
        let mut seen = vec![0u8; n];
        for c in 0..chunk_count(n, 1000) {
            for i in chunk_range(n, 1000, c) {
                seen[i] += 1;
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
    }

    #[test]
    fn max_propagates_nan() {
        let m = max(100_000, |i| if i == 77_777 { f64::NAN } else { i as f64 });
        assert!(m.is_nan());
        assert_eq!(max(100, |i| i as f64), 99.0);
    }

    #[test]
    fn shared_slice_disjoint_rows() {
        let mut v = vec![0u32; 64 * 8];
        {
            let s = SharedSlice::new(&mut v);
            for_each(64, 1, |row| {
                // SAFETY: each row index owns its 8 elements.
                let r = unsafe { s.slice_mut(row * 8..row * 8 + 8) };
                r.iter_mut().for_each(|x| *x = row as u32);
            });
        }
        assert!(v
            .chunks(8)
            .enumerate()
            .all(|(i, r)| r.iter().all(|&x| x == i as u32)));
    }
}
