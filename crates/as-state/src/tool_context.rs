//! The tool context: the read-file cache and the activated tool groups.

use std::path::Path;
use std::time::UNIX_EPOCH;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// A cached file read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "ReadCacheEntry")]
pub struct ReadCacheEntry {
    /// The file's lines as read.
    pub lines: Vec<String>,
    /// The file's mtime in seconds when read.
    #[serde(deserialize_with = "as_message::lax_float::deserialize")]
    pub updated_at: f64,
    /// Size in **kilobytes** (sum of UTF-8 line lengths / 1024), despite the name.
    #[serde(deserialize_with = "as_message::lax_float::deserialize")]
    pub bytes: f64,
    /// The file path.
    pub file_path: String,
}

as_message::map_only!(ReadCacheEntry, "a ReadCacheEntry object", Serialize);

/// Per-session tool state.
///
/// ```
/// let ctx = as_state::ToolContext::default();
/// assert_eq!(ctx.max_cache_files, 100);
/// assert_eq!(as_message::to_json(&ctx), r#"{"max_cache_files":100,"max_cache_bytes":25000.0,"read_file_cache":[],"activated_groups":[]}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(remote = "Self")]
#[schemars(rename = "ToolContext")]
pub struct ToolContext {
    /// Most cached files (must be > 1).
    #[serde(default = "default_max_files", deserialize_with = "max_files")]
    #[schemars(range(min = 2))]
    pub max_cache_files: i64,
    /// Most cached kilobytes (must be > 10000).
    #[serde(default = "default_max_bytes", deserialize_with = "max_bytes")]
    #[schemars(extend("exclusiveMinimum" = 10000))]
    pub max_cache_bytes: f64,
    /// Cache entries, oldest first.
    #[serde(default)]
    pub read_file_cache: Vec<ReadCacheEntry>,
    /// Activated tool groups.
    #[serde(default)]
    pub activated_groups: Vec<String>,
}

as_message::map_only!(ToolContext, "a ToolContext object", Serialize);

fn default_max_files() -> i64 {
    100
}

fn default_max_bytes() -> f64 {
    25000.0
}

fn max_files<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = as_message::lax_int::deserialize(d)?;
    if v > 1 {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!("invalid value: max_cache_files must be greater than 1, got {v}")))
    }
}

fn max_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = as_message::lax_float::deserialize(d)?;
    if v > 10000.0 {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!("invalid value: max_cache_bytes must be greater than 10000, got {v}")))
    }
}

impl Default for ToolContext {
    fn default() -> Self {
        Self {
            max_cache_files: default_max_files(),
            max_cache_bytes: default_max_bytes(),
            read_file_cache: Vec::new(),
            activated_groups: Vec::new(),
        }
    }
}

fn mtime(path: &str) -> Option<f64> {
    let meta = std::fs::metadata(Path::new(path)).ok()?;
    let t = meta.modified().ok()?;
    let d = t.duration_since(UNIX_EPOCH).ok()?;
    Some(d.as_secs_f64())
}

impl ToolContext {
    /// The cached entry for `path` if the file's mtime still equals the cached one;
    /// otherwise (or if the mtime cannot be read) the entry is dropped and `None` returned.
    pub fn get_cache(&mut self, path: &str) -> Option<&ReadCacheEntry> {
        let idx = self.read_file_cache.iter().position(|e| e.file_path == path)?;
        match mtime(path) {
            Some(m) if m == self.read_file_cache[idx].updated_at => self.read_file_cache.get(idx),
            _ => {
                self.read_file_cache.remove(idx);
                None
            }
        }
    }

    /// Caches `lines` for `path` with its current mtime, evicting oldest entries by count and
    /// by size (kilobytes). Does nothing when the mtime cannot be read.
    pub fn cache_file(&mut self, path: &str, lines: Vec<String>) {
        let Some(m) = mtime(path) else { return };
        self.cache_file_with_mtime(path, lines, m);
    }

    /// [`ToolContext::cache_file`] with a known mtime (no filesystem access).
    pub fn cache_file_with_mtime(&mut self, path: &str, lines: Vec<String>, mtime: f64) {
        // Python sums integer lengths (`0` for no lines); an empty `f64` sum is `-0.0`, written as `-0.0`.
        let kb = lines.iter().map(String::len).sum::<usize>() as f64 / 1024.0;
        self.read_file_cache.retain(|e| e.file_path != path);
        let max_files = usize::try_from(self.max_cache_files).unwrap_or(usize::MAX);
        while self.read_file_cache.len() >= max_files && !self.read_file_cache.is_empty() {
            self.read_file_cache.remove(0);
        }
        let mut current = self.read_file_cache.iter().fold(0.0, |acc, e| acc + e.bytes);
        while !self.read_file_cache.is_empty() && current + kb > self.max_cache_bytes {
            let e = self.read_file_cache.remove(0);
            current -= e.bytes;
        }
        self.read_file_cache.push(ReadCacheEntry { lines, updated_at: mtime, bytes: kb, file_path: path.to_owned() });
    }

    /// Keeps only the entries whose path is in `reserved` (`None` keeps nothing).
    pub fn clean_file_cache(&mut self, reserved: Option<&[String]>) {
        match reserved {
            None => self.read_file_cache.clear(),
            Some(keep) => self.read_file_cache.retain(|e| keep.contains(&e.file_path)),
        }
    }
}
