//! The `eddies` command-line program as a library, so that its parts are testable: the scene format
//! ([`scene`]) and its loading with located errors ([`load`], [`keypath`]), the built-in scenes ([`scenes`]),
//! setting up and running a simulation ([`setup`], [`runner`]) and its outputs ([`render`],
//! [`annotate`], [`animation`], [`output`]), the validation and benchmark tables ([`validate`], [`bench`](mod@bench), one file per
//! family of cases), the live viewer ([`view`]), the error type and exit codes ([`error`]) and the argument parser ([`cli`]).

pub mod animation;
pub mod annotate;
pub mod bench;
pub mod cli;
pub mod error;
pub mod interrupt;
pub mod keypath;
pub mod load;
pub mod output;
pub mod panels;
pub mod plot;
pub mod render;
pub mod render3d;
pub mod runner;
pub mod scene;
pub mod scenes;
pub mod setup;
pub mod validate;
pub mod view;

/// The NPY arrays of `output.npy`, at the crate root as before [`output`] held them.
pub use output::npy;
