//! One run per output folder: a run holds an exclusive lock on `DIR/.eddies.lock` (an advisory lock of the
//! operating system, `flock` on Unix and `LockFileEx` on Windows) while it writes, with its process id in the
//! file. A second run into the folder is refused, naming that process. The lock goes with the process: a run
//! that is killed leaves no stale lock behind, only the file (a run that ends removes it).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name in the output folder.
pub const LOCK_NAME: &str = ".eddies.lock";

/// The held lock; dropping it removes the lock file and releases the folder.
#[derive(Debug)]
pub struct OutputLock {
    file: Option<File>,
    path: PathBuf,
}

impl Drop for OutputLock {
    /// Removes the file while still holding the lock, so a run that opens it now either finds it locked
    /// (and is told the folder is in use) or makes a new one after this run is done.
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

/// Why a folder could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error("{} is in use by another eddies run ({holder})", .folder.display())]
    InUse {
        /// The output folder.
        folder: PathBuf,
        /// Who holds it, as its lock file says.
        holder: String,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot lock {}: {source}", .path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
}

impl OutputLock {
    /// Locks `folder` (which exists) for this process.
    pub fn acquire(folder: &Path) -> Result<Self, LockError> {
        let path = folder.join(LOCK_NAME);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let holder = match text.trim().parse::<u32>() {
                    Ok(pid) => format!("process {pid}"),
                    Err(_) => "a process that has not written its id yet".to_string(),
                };
                return Err(LockError::InUse {
                    folder: folder.to_path_buf(),
                    holder,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Self {
            file: Some(file),
            path,
        })
    }
}

/// Creates `folder` (with its parents) and locks it.
pub fn create_and_lock(folder: &Path) -> Result<OutputLock, LockError> {
    fs::create_dir_all(folder).map_err(|source| LockError::Io {
        path: folder.to_path_buf(),
        source,
    })?;
    OutputLock::acquire(folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_a_folder_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = OutputLock::acquire(dir.path()).unwrap();
        let err = OutputLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("in use by another eddies run")
                && err.contains(&format!("process {}", std::process::id())),
            "{err}"
        );
        drop(held);
        OutputLock::acquire(dir.path()).expect("released when dropped");
    }
}
