//! Writing the lab's files.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("writing {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("drawing {path}: {reason}")]
    Chart { path: PathBuf, reason: String },
}

pub(crate) fn write(path: PathBuf, contents: &str) -> Result<(), ReportError> {
    std::fs::write(&path, contents).map_err(|source| ReportError::Io { path, source })
}
