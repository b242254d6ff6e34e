//! The files `eddies run` writes, in the formats the README's "Outputs" section documents: the per-frame file
//! names ([`names`]), `stats.jsonl` lines ([`stats`]), the resolved `scene.toml` ([`resolved`]) and NPY arrays
//! ([`npy`]). Every whole file is written to a temporary name in the same folder and renamed ([`files`]), so a
//! reader never sees half a file and an interrupted run loses at most the file in flight.

pub mod checkpoint;
pub mod exports;
pub mod files;
pub mod lock;
pub mod names;
pub mod npy;
pub mod pictures;
pub mod resolved;
pub mod stats;

pub use files::{check_output_folder, remove_stale_outputs, write_atomic, OutputFolderError};
pub use names::{
    checkpoint_number, field_name, frame_name, numbered_name, particles_name, GIF_NAME, MP4_NAME,
    SERIES_NAME,
};
pub use resolved::{scene_toml, ResolvedSceneError};
pub use stats::stats_line;
