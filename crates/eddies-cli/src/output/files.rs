//! Writing whole files atomically (a temporary name in the same folder, then a rename), checking the output
//! folder before a run writes anything, and removing an earlier run's frames and temporaries from it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::names::is_frame_output;

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("output");
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Whether `name` is a temporary file [`write_atomic`] left behind when a run was interrupted.
fn is_our_temporary(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|n| n.rsplit_once(".tmp-"))
        .is_some_and(|(file, pid)| {
            pid.bytes().all(|b| b.is_ascii_digit())
                && (is_frame_output(file) || file == "scene.toml")
        })
}

/// Why a path cannot be the output folder.
#[derive(Debug, thiserror::Error)]
pub enum OutputFolderError {
    /// The path, or the nearest of its ancestors that exists, is not a folder.
    #[error("{} is not a folder", .0.display())]
    NotAFolder(PathBuf),
    /// A probe file could not be created in that folder.
    #[error("cannot write into {}: {source}", .folder.display())]
    NotWritable {
        /// The folder the probe was tried in.
        folder: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
}

/// Checks, creating nothing that stays, that `dir` can be the output folder: a folder this process can
/// write into, or a path that does not exist yet under a folder it can write into. Writing is tried (a
/// probe file, removed at once), since permission bits do not tell the whole story (a read-only mount; a
/// root user who ignores them). Returns the reason when it cannot.
pub fn check_output_folder(dir: &Path) -> Result<(), OutputFolderError> {
    let mut probe_in = dir;
    while !probe_in.exists() {
        match probe_in.parent() {
            Some(p) if !p.as_os_str().is_empty() => probe_in = p,
            _ => {
                probe_in = Path::new(".");
                break;
            }
        }
    }
    if !probe_in.is_dir() {
        return Err(OutputFolderError::NotAFolder(probe_in.to_path_buf()));
    }
    let probe = probe_in.join(format!(".eddies-probe-{}", std::process::id()));
    match fs::File::create(&probe) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(source) => Err(OutputFolderError::NotWritable {
            folder: probe_in.to_path_buf(),
            source,
        }),
    }
}

/// Removes the per-frame files of an earlier run from `dir`, so that its frames do not mix with this run's,
/// and temporary files an interrupted run left. Other files are left alone. Returns the paths removed.
pub fn remove_stale_outputs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let ours = name
            .to_str()
            .is_some_and(|n| is_frame_output(n) || is_our_temporary(n));
        if ours && entry.file_type()?.is_file() {
            fs::remove_file(entry.path())?;
            removed.push(entry.path());
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn temporaries_are_ours_only() {
        assert!(is_our_temporary(".frame_00003.png.tmp-4242"));
        assert!(is_our_temporary(".scene.toml.tmp-1"));
        assert!(!is_our_temporary(".notes.txt.tmp-1"));
        assert!(!is_our_temporary("frame_00003.png.tmp-1"));
    }
}
