//! Value traits for grid data: what sampling and stencils need from a cell value.

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

/// A value that can be interpolated: a vector space over f64 weights (scalars, fixed-size vectors).
///
/// Sampling forms `Σ wᵢ vᵢ` from the corner values; this trait is that operation and nothing more, so that
/// scalar and vector grids share one sampler.
pub trait Linear: Copy {
    /// The additive identity.
    fn zero() -> Self;
    /// `self + w · other`, with the weight `w` converted to the value's precision.
    fn add_scaled(self, w: f64, other: Self) -> Self;
}

/// A floating-point scalar (f32 or f64) stored in a grid.
///
/// Stencils compute in the grid's own precision; positions, spacings and interpolation weights stay f64.
pub trait Real:
    Linear
    + Copy
    + Send
    + Sync
    + Debug
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + 'static
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Conversion from f64 (rounded to nearest for f32).
    fn from_f64(x: f64) -> Self;
    /// Conversion to f64 (exact).
    fn to_f64(self) -> f64;
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Linear for $t {
            #[inline]
            fn zero() -> Self {
                0.0
            }
            #[inline]
            fn add_scaled(self, w: f64, other: Self) -> Self {
                self + (w as $t) * other
            }
        }
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

impl_real!(f32);
impl_real!(f64);

impl<T: Linear, const K: usize> Linear for [T; K] {
    #[inline]
    fn zero() -> Self {
        [T::zero(); K]
    }
    #[inline]
    fn add_scaled(mut self, w: f64, other: Self) -> Self {
        for (a, b) in self.iter_mut().zip(other) {
            *a = a.add_scaled(w, b);
        }
        self
    }
}
