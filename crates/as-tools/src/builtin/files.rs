//! Shared file helpers: mtime and the read cache.

use std::path::Path;
use std::time::UNIX_EPOCH;

/// The file's mtime in seconds (what `ToolContext` compares), or `None`.
pub(crate) fn mtime(path: &Path) -> Option<f64> {
    let meta = std::fs::metadata(path).ok()?;
    meta.modified().ok()?.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs_f64())
}
