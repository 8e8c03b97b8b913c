//! `Read`: numbered lines of a text file, through the session's read-file cache.

use std::path::Path;

use as_message::{JsonValue, PermissionBehavior, PermissionRule};
use schemars::JsonSchema;
use serde::Deserialize;

use super::files::mtime;
use super::{decode_text, dir_suggestion, split_keep_ends};
use crate::context::ToolCallContext;
use crate::error::ToolError;
use crate::permission::{PermissionCheckContext, PermissionDecision};
use crate::response::ToolStream;
use crate::tool::Tool;

const DESCRIPTION: &str = "Reads a file from the local filesystem. You can access any file directly by using this tool.
Assume this tool is able to read all files on the machine. If the User provides a path to a file assume that path is valid. It is okay to read a file that does not exist; an error will be returned.

Usage:
- The file_path parameter must be an absolute path, not a relative path
- By default, it reads up to 2000 lines starting from the beginning of the file
- You can optionally specify a line offset and limit (especially handy for long files), but it's recommended to read the whole file by not providing these parameters
- Results are returned using cat -n format, with line numbers starting at 1";

/// Arguments of `Read`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// The absolute path to the file to read.
    pub file_path: String,
    /// Optional 1-based line number to start reading from (default: 1)
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub offset: i64,
    /// Optional maximum number of lines to read (default: 2000, max: 2000)
    #[serde(default = "two_thousand")]
    #[schemars(range(min = 1, max = 2000))]
    pub limit: i64,
}

fn one() -> i64 {
    1
}

fn two_thousand() -> i64 {
    2000
}

/// The largest file Read loads (the whole file is read and cached, whatever `limit` says).
pub(crate) const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// The `Read` tool: read-only, concurrency-safe, state-aware (it fills the read cache that
/// Write and Edit check).
#[derive(Clone, Debug)]
pub struct ReadTool {
    /// Lines longer than this are cut and marked `[truncated]`.
    pub max_line_characters: usize,
}

impl Default for ReadTool {
    fn default() -> Self {
        Self { max_line_characters: 2000 }
    }
}

impl Tool for ReadTool {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "Read"
    }
    fn description(&self) -> String {
        DESCRIPTION.to_owned()
    }
    fn parameters(&self) -> JsonValue {
        crate::without_description(crate::parameters_schema::<ReadArgs>())
    }
    fn is_concurrency_safe(&self) -> bool {
        true
    }
    fn is_read_only(&self) -> bool {
        true
    }
    /// Read-only, except for a process's environment (see `check_permissions`): the engine allows
    /// read-only calls in `explore` and `accept_edits` before it asks the tool.
    fn check_read_only(&self, a: &ReadArgs) -> bool {
        // A relative path (Read refuses it anyway) would resolve against the process's directory,
        // not the agent's: not read-only, so the engine asks the tool.
        let path = Path::new(&a.file_path);
        path.is_absolute() && !is_process_environ(&crate::permission::real_path(path))
    }
    fn check_permissions(&self, a: &ReadArgs, ctx: &PermissionCheckContext<'_>) -> PermissionDecision {
        // A process's environment (`/proc/<pid>/environ`, the agent's own included) holds the API
        // keys the agent hides from its tools: never read without asking.
        if is_process_environ(&crate::permission::real_path(&ctx.absolute(&a.file_path))) {
            return PermissionDecision::ask(format!("Permission required: {} holds a process's secrets", a.file_path))
                .reason("Safety check: process environment")
                .immune();
        }
        PermissionDecision::passthrough("File reading is read-only.")
    }
    fn match_rule(&self, rule: &str, list: PermissionBehavior, a: &ReadArgs, ctx: &PermissionCheckContext<'_>) -> bool {
        super::file_rule_matches(&a.file_path, rule, list, ctx)
    }
    fn generate_suggestions(&self, a: &ReadArgs, _: &PermissionCheckContext<'_>) -> Vec<PermissionRule> {
        dir_suggestion("Read", &a.file_path)
    }

    async fn call(&self, a: ReadArgs, ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        let path = Path::new(&a.file_path);
        if !path.is_absolute() {
            return Err(ToolError::execution(format!(
                "Error: file_path must be an absolute path, got: {}",
                a.file_path
            )));
        }
        let meta = tokio::fs::metadata(path).await;
        match meta {
            Err(_) => return Err(ToolError::execution(format!("Error: File does not exist: {}", a.file_path))),
            Ok(m) if m.is_dir() => {
                return Err(ToolError::execution(format!("Error: Path is a directory, not a file: {}", a.file_path)));
            }
            // A device, a FIFO or a socket (`/dev/zero`, `/dev/stdin`) never ends or blocks for ever.
            Ok(m) if !m.is_file() => {
                return Err(ToolError::execution(format!("Error: Not a regular file: {}", a.file_path)));
            }
            Ok(m) if m.len() > MAX_READ_BYTES => return Err(too_large(&a.file_path, Some(m.len()))),
            Ok(_) => {}
        }
        let lines = load_lines(&ctx, &a.file_path).await?;
        let start = usize::try_from(a.offset.max(1) - 1).unwrap_or(0);
        let limit = usize::try_from(a.limit.max(0)).unwrap_or(0);
        let formatted: Vec<String> = lines
            .iter()
            .enumerate()
            .skip(start)
            .take(limit)
            .map(|(i, line)| {
                let content = line.trim_end_matches(['\n', '\r']);
                let content = if content.chars().count() > self.max_line_characters {
                    let cut: String = content.chars().take(self.max_line_characters).collect();
                    format!("{cut}[truncated]")
                } else {
                    content.to_owned()
                };
                format!("{:>6}\t{content}", i + 1)
            })
            .collect();
        Ok(ToolStream::text(formatted.join("\n")))
    }
}

/// The error for a file over [`MAX_READ_BYTES`] (its size when known: `/proc` files claim 0).
pub(crate) fn too_large(file_path: &str, len: Option<u64>) -> ToolError {
    let size = len.map_or_else(|| format!("more than {MAX_READ_BYTES} bytes"), |n| format!("{n} bytes"));
    ToolError::execution(format!(
        "Error: File is too large to read ({size}, the limit is {MAX_READ_BYTES}); use Grep or Bash (head, tail, sed \
         -n) to read parts of it: {file_path}"
    ))
}

/// Whether a resolved path is `/proc/<anything>/environ`.
fn is_process_environ(real: &Path) -> bool {
    let mut parts = real.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
    parts.nth(1).as_deref() == Some("proc") && real.file_name().is_some_and(|n| n == "environ")
}

/// The file's lines (with line ends), from the cache when its mtime still matches, otherwise
/// read from disk and cached. The cache is only filled when the mtime did not change while
/// reading, so a cached entry never pairs new content with an old mtime or vice versa.
pub(crate) async fn load_lines(ctx: &ToolCallContext, file_path: &str) -> Result<Vec<String>, ToolError> {
    if let Some(lines) = ctx.state.with(|s| s.tool_context.get_cache(file_path).map(|e| e.lines.clone())) {
        return Ok(lines);
    }
    let path = Path::new(file_path);
    let before = mtime(path);
    let bytes = super::read_at_most_async(path, MAX_READ_BYTES)
        .await
        .map_err(|e| ToolError::execution(format!("Error reading file: {e}")).with_source(e))?
        .ok_or_else(|| too_large(file_path, None))?;
    let lines = split_keep_ends(&decode_text(&bytes));
    if let (Some(b), Some(after)) = (before, mtime(path))
        && b == after
    {
        ctx.state.with(|s| s.tool_context.cache_file_with_mtime(file_path, lines.clone(), b));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_environments_always_ask() {
        let perm = as_message::PermissionContext::default();
        let ctx = PermissionCheckContext::new(&perm, Path::new("/"));
        let tool = ReadTool::default();
        let args = |p: &str| ReadArgs { file_path: p.into(), offset: 1, limit: 10 };
        for p in ["/proc/self/environ", "/proc/1/environ", "/proc//self/./environ"] {
            let d = tool.check_permissions(&args(p), &ctx);
            assert!(d.behavior == PermissionBehavior::Ask && d.bypass_immune, "{p}: {d:?}");
        }
        for p in ["/proc/self/status", "/etc/hostname"] {
            assert_ne!(tool.check_permissions(&args(p), &ctx).behavior, PermissionBehavior::Ask, "{p}");
            assert!(tool.check_read_only(&args(p)), "{p}");
        }
        // Not read-only either: explore and accept_edits allow read-only calls before asking the tool.
        assert!(!tool.check_read_only(&args("/proc/self/environ")));
    }
}
