//! Built-in tools for a coding CLI: [`ReadTool`], [`WriteTool`], [`EditTool`], [`GlobTool`],
//! [`GrepTool`] and [`BashTool`] (2.0.4 `Read`, `Write`, `Edit`, `Glob`, `Grep`, `Bash`).
//!
//! Paths given to Read/Write/Edit must be absolute (as in 2.0.4); Glob, Grep and Bash resolve
//! relative paths against [`crate::ToolCallContext::working_dir`].
//!
//! Permissions follow 2.0.4: Read/Glob/Grep are read-only (explore mode allows them); Write
//! and Edit ask for sensitive paths even in bypass mode, are allowed inside the working
//! directories in `accept_edits` mode, and otherwise fall through to the rules and finally
//! ASK; Bash allows known read-only commands, asks (bypass-immune) for dangerous or
//! unanalysable ones, and matches deny/ask rules per command segment.

mod bash;
mod edit;
mod files;
mod glob;
mod grep;
mod read;
mod write;

use std::sync::Arc;

use as_message::{PermissionBehavior, PermissionRule};

pub use bash::{BashArgs, BashTool, HIDDEN_ENV, MAX_TIMEOUT_MS};
pub use edit::{EditArgs, EditTool};
pub use glob::{GlobArgs, GlobTool};
pub use grep::{GrepArgs, GrepOutputMode, GrepTool};
pub use read::{ReadArgs, ReadTool};
pub use write::{WriteArgs, WriteTool};

use crate::permission::fnmatch;
use crate::tool::{DynTool, IntoDynTool};

/// Files that always need the user's confirmation to change (matched by basename, or by
/// path suffix for entries with a `/`, case-insensitively).
pub const DANGEROUS_FILES: &[&str] = &[
    ".gitconfig",
    ".gitmodules",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".ssh/config",
    ".ssh/authorized_keys",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".env",
    ".envrc",
    ".env.local",
    ".env.development",
    ".env.development.local",
    ".env.test",
    ".env.test.local",
    ".env.staging",
    ".env.production",
    ".env.production.local",
];

/// Directories whose contents always need the user's confirmation to change (matched when any
/// path segment equals an entry, case-insensitively).
pub const DANGEROUS_DIRECTORIES: &[&str] = &[".git", ".vscode", ".idea", ".ssh"];

/// The six built-in tools, erased, ready to register.
pub fn builtin_tools() -> Vec<Arc<dyn DynTool>> {
    vec![
        ReadTool::default().into_dyn_tool(),
        WriteTool.into_dyn_tool(),
        EditTool.into_dyn_tool(),
        GlobTool.into_dyn_tool(),
        GrepTool.into_dyn_tool(),
        BashTool::default().into_dyn_tool(),
    ]
}

/// Whether `path` names a sensitive file or lies in a sensitive directory.
pub fn is_dangerous_path(path: &str) -> bool {
    let lower = path.to_lowercase();
    let segments: Vec<&str> = lower.split('/').filter(|s| !s.is_empty()).collect();
    let Some(base) = segments.last() else { return false };
    if DANGEROUS_FILES
        .iter()
        .any(|f| if f.contains('/') { lower.ends_with(&format!("/{f}")) || lower == *f } else { base == f })
    {
        return true;
    }
    segments.iter().any(|s| DANGEROUS_DIRECTORIES.contains(s))
}

/// `fnmatch(path, rule)` for tools keyed on a file path; an empty path never matches.
pub(crate) fn path_rule_matches(path: &str, rule: &str) -> bool {
    !path.is_empty() && fnmatch(path, rule)
}

/// 2.0.4's directory suggestion: `dirname(path).rstrip("/") + "/**"`, or `**` without a
/// directory; none for an empty path.
pub(crate) fn dir_suggestion(tool: &str, path: &str) -> Vec<PermissionRule> {
    if path.is_empty() {
        return Vec::new();
    }
    let parent = match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "",
    };
    let pattern = if parent.is_empty() { "**".to_owned() } else { format!("{}/**", parent.trim_end_matches('/')) };
    vec![PermissionRule::new(tool, Some(pattern), PermissionBehavior::Allow, "suggested")]
}

/// Decodes bytes as UTF-8 (lossy) and normalises `\r\n` and `\r` to `\n`.
pub(crate) fn decode_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace("\r\n", "\n").replace('\r', "\n")
}

/// Python's `str.splitlines(keepends=True)` for `\n`-normalised text.
pub(crate) fn split_keep_ends(text: &str) -> Vec<String> {
    text.split_inclusive('\n').map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dangerous_paths() {
        for (p, expect) in [
            ("/home/u/.bashrc", true),
            ("/home/u/.SSH/id_rsa", true),
            ("/repo/.git/config", true),
            ("/repo/.env", true),
            ("/home/u/.ssh/config", true),
            ("/repo/src/env.rs", false),
            ("/repo/.github/workflows/ci.yml", false),
            ("", false),
        ] {
            assert_eq!(is_dangerous_path(p), expect, "{p}");
        }
    }

    #[test]
    fn suggestions() {
        let s = |p: &str| dir_suggestion("Read", p).first().and_then(|r| r.rule_content.clone());
        assert_eq!(s("/a/b/c.txt").as_deref(), Some("/a/b/**"));
        assert_eq!(s("/c.txt").as_deref(), Some("/**"));
        assert_eq!(s("c.txt").as_deref(), Some("**"));
        assert_eq!(s(""), None);
        assert_eq!(split_keep_ends("a\nb"), ["a\n", "b"]);
        assert_eq!(decode_text(b"a\r\nb\rc"), "a\nb\nc");
    }
}
