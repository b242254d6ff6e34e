//! Checkpoint files of a run (`checkpoint_NNNNN.ckpt`, NNNNN the frames done): the library's
//! [`Checkpoint`] with what `eddies run --resume` needs besides the simulation's state: the resolved scene,
//! the frames done and the step at which the frame in progress began (a run interrupted mid-frame resumes
//! mid-frame).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use eddies::checkpoint::CheckpointError;
use eddies::{Checkpoint, SavedState};

use super::names::{checkpoint_number, numbered_name};
use super::write_atomic;

/// Where a run stands in its time line when a checkpoint is written (the start: [`Default`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Frames written.
    pub frames_done: usize,
    /// The step count when the frame in progress began (at a frame's end: the steps taken).
    pub frame_start_step: u64,
}

impl Position {
    /// Where the run stands once the frame in progress is complete, at step `steps`.
    pub fn next_frame(self, steps: u64) -> Self {
        Self {
            frames_done: self.frames_done + 1,
            frame_start_step: steps,
        }
    }
}

/// A checkpoint read back for a resume.
#[derive(Debug)]
pub struct ResumePoint {
    /// The file.
    pub path: PathBuf,
    /// The scene's name (the output folder's default name).
    pub scene_name: String,
    /// The resolved scene, as `scene.toml` holds it.
    pub scene_text: String,
    /// Where the run stood.
    pub progress: Position,
    /// The simulation's state.
    pub state: SavedState,
}

/// Why a checkpoint cannot be resumed from.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The folder holds none.
    #[error("{} holds no checkpoint (checkpoint_NNNNN.ckpt): runs write one every output.checkpoint_every frames and when interrupted", .0.display())]
    None(PathBuf),
    /// The file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// The file is not a checkpoint this build reads.
    #[error("{}: {source}", .path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: CheckpointError,
    },
    /// A metadata entry is missing or unreadable.
    #[error("{}: the checkpoint's `{key}` is missing or not valid", .path.display())]
    Meta {
        /// The file.
        path: PathBuf,
        /// The entry.
        key: &'static str,
    },
}

/// Writes `state` as checkpoint `progress.frames_done` of a run of `scene_name` (its resolved scene
/// `scene_text`) into `dir`, atomically; returns the file.
pub fn write(
    dir: &Path,
    scene_name: &str,
    scene_text: &str,
    progress: Position,
    state: SavedState,
) -> io::Result<PathBuf> {
    let checkpoint = Checkpoint {
        meta: vec![
            ("eddies_version".into(), env!("CARGO_PKG_VERSION").into()),
            ("scene_name".into(), scene_name.into()),
            ("scene".into(), scene_text.into()),
            ("frames_done".into(), progress.frames_done.to_string()),
            (
                "frame_start_step".into(),
                progress.frame_start_step.to_string(),
            ),
        ],
        state,
    };
    let path = dir.join(numbered_name("checkpoint", progress.frames_done, "ckpt"));
    write_atomic(&path, &checkpoint.encode())?;
    Ok(path)
}

/// The checkpoints in `dir`, by frames done.
fn checkpoints(dir: &Path) -> io::Result<Vec<(usize, PathBuf)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(n) = entry.file_name().to_str().and_then(checkpoint_number) {
            if entry.file_type()?.is_file() {
                found.push((n, entry.path()));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Removes all but the `keep` latest checkpoints in `dir`.
pub fn prune(dir: &Path, keep: usize) -> io::Result<()> {
    let all = checkpoints(dir)?;
    for (_, path) in &all[..all.len().saturating_sub(keep.max(1))] {
        fs::remove_file(path)?;
    }
    Ok(())
}

/// Reads the latest checkpoint in `dir`.
pub fn latest(dir: &Path) -> Result<ResumePoint, ReadError> {
    let io = |source| ReadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let (_, path) = checkpoints(dir)
        .map_err(io)?
        .pop()
        .ok_or_else(|| ReadError::None(dir.to_path_buf()))?;
    read(&path)
}

/// Reads checkpoint `path`.
pub fn read(path: &Path) -> Result<ResumePoint, ReadError> {
    let bytes = fs::read(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let c = Checkpoint::decode(&bytes).map_err(|source| ReadError::Format {
        path: path.to_path_buf(),
        source,
    })?;
    let meta = |key: &'static str| {
        c.meta(key).ok_or_else(|| ReadError::Meta {
            path: path.to_path_buf(),
            key,
        })
    };
    let number = |key: &'static str| {
        meta(key)?.parse::<u64>().map_err(|_| ReadError::Meta {
            path: path.to_path_buf(),
            key,
        })
    };
    let progress = Position {
        frames_done: number("frames_done")? as usize,
        frame_start_step: number("frame_start_step")?,
    };
    Ok(ResumePoint {
        path: path.to_path_buf(),
        scene_name: meta("scene_name")?.to_string(),
        scene_text: meta("scene")?.to_string(),
        progress,
        state: c.state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(x: f32) -> SavedState {
        let mut s = SavedState::default();
        s.push("cells.position", vec![x; 4]);
        s
    }

    #[test]
    fn the_latest_checkpoint_is_read_back_and_old_ones_pruned() {
        let dir = tempfile::tempdir().unwrap();
        for frames in [2, 4, 6] {
            let progress = Position {
                frames_done: frames,
                frame_start_step: 10 * frames as u64,
            };
            write(
                dir.path(),
                "dam",
                "method = \"reint\"\n",
                progress,
                state(frames as f32),
            )
            .unwrap();
            prune(dir.path(), 2).unwrap();
        }
        let names: Vec<String> = checkpoints(dir.path())
            .unwrap()
            .into_iter()
            .map(|(_, p)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["checkpoint_00004.ckpt", "checkpoint_00006.ckpt"]);
        let point = latest(dir.path()).unwrap();
        assert_eq!(point.progress.frames_done, 6);
        assert_eq!(point.progress.frame_start_step, 60);
        assert_eq!(
            (point.scene_name.as_str(), point.scene_text.as_str()),
            ("dam", "method = \"reint\"\n")
        );
        assert_eq!(point.state, state(6.0));
    }

    #[test]
    fn missing_truncated_and_foreign_checkpoints_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(latest(dir.path()), Err(ReadError::None(_))));
        let progress = Position {
            frames_done: 1,
            frame_start_step: 3,
        };
        let path = write(dir.path(), "dam", "", progress, state(1.0)).unwrap();
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let err = latest(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("checkpoint_00001.ckpt") && err.contains("truncated"),
            "{err}"
        );
        fs::write(&path, b"GIF89a").unwrap();
        let err = latest(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not an eddies checkpoint"), "{err}");
    }
}
