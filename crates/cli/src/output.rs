//! The local output (`--output`): opened before sampling starts, so that a
//! path that cannot be written fails the run at once instead of after it,
//! and written once at the end.

use anyhow::{Context, Result};
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

/// Where the run's profile goes.
pub enum Output {
    Stdout,
    /// Opened for writing; truncated only when the profile is written, so
    /// a run that fails on the way leaves an earlier file as it was.
    File {
        file: File,
        path: PathBuf,
    },
}

impl Output {
    /// `-` is standard output; anything else a file, created if missing.
    pub fn open(path: &Path) -> Result<Output> {
        if path == Path::new("-") {
            return Ok(Output::Stdout);
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("cannot write the output {}", path.display()))?;
        Ok(Output::File { file, path: path.to_owned() })
    }

    /// Writes the profile with `write`.
    pub fn write(&mut self, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
        match self {
            Output::Stdout => {
                let mut out = std::io::stdout().lock();
                write(&mut out).and_then(|()| out.flush()).context("writing to standard output")
            }
            Output::File { file, path } => {
                // A device or pipe (/dev/null, a FIFO) has nothing to cut.
                if file.metadata().is_ok_and(|m| m.is_file()) {
                    file.set_len(0)
                        .and_then(|()| file.rewind())
                        .with_context(|| format!("truncating {}", path.display()))?;
                }
                let mut out = BufWriter::new(&*file);
                write(&mut out).and_then(|()| out.flush()).with_context(|| format!("writing {}", path.display()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("ep-cli-output-{}-{name}", std::process::id()))
    }

    #[test]
    fn unwritable_paths_fail_at_open_with_the_path_in_the_message() {
        let e = Output::open(Path::new("/nonexistent-ep-dir/profile.folded")).err().unwrap();
        assert_eq!(
            format!("{e:#}"),
            "cannot write the output /nonexistent-ep-dir/profile.folded: No such file or directory (os error 2)"
        );
        let dir = std::env::temp_dir();
        let e = Output::open(&dir).err().unwrap();
        assert!(format!("{e:#}").contains("Is a directory"), "{e:#}");
    }

    #[test]
    fn an_existing_file_is_kept_until_written_then_replaced() {
        let path = scratch("replace");
        std::fs::write(&path, "an older, longer profile\n").unwrap();
        let mut out = Output::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "an older, longer profile\n");
        out.write(|w| w.write_all(b"new\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        std::fs::remove_file(&path).unwrap();
    }
}
