//! `Glob`: files matching a glob pattern, newest first (skipping paths the deny rules name: see
//! [`super`]).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use as_message::{JsonValue, PermissionBehavior, PermissionRule};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{WalkDenials, dir_rule_matches, path_rule_matches};
use crate::context::ToolCallContext;
use crate::error::ToolError;
use crate::permission::{PermissionCheckContext, PermissionDecision};
use crate::response::ToolStream;
use crate::tool::Tool;

const DESCRIPTION: &str = "Fast file pattern matching tool that works with
any codebase size.

Supports glob patterns like \"**/*.js\" or \"src/**/*.ts\" and returns
matching file paths sorted by modification time (newest first).

Use this tool when you need to find files by pattern across the
codebase.

Use head_limit to cap the number of results returned.";

const DEFAULT_HEAD_LIMIT: u64 = 250;

/// How long a Glob or Grep search may run: 2.0.4 runs its glob helper and ripgrep under 30 s
/// timeouts.
pub(crate) const SEARCH_TIME_LIMIT: Duration = Duration::from_secs(30);

/// 2.0.4's text when its glob helper times out (`exec_shell` reports `timed out` on stderr).
const GLOB_TIMED_OUT: &str = "Glob helper failed: timed out";

/// Arguments of `Glob`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// The glob pattern to match against (e.g., '**/*.py', 'src/**/*.ts')
    pub pattern: String,
    /// The base directory to search from (defaults to current working directory)
    #[serde(default)]
    pub path: Option<String>,
    /// Limit output to first N paths. Defaults to 250 when unspecified. Pass 0 for unlimited.
    #[serde(default)]
    pub head_limit: Option<u64>,
    /// Number of matching files to skip before returning results
    #[serde(default)]
    pub offset: u64,
}

/// The `Glob` tool (read-only, concurrency-safe).
#[derive(Clone, Copy, Debug, Default)]
pub struct GlobTool;

impl Tool for GlobTool {
    type Args = GlobArgs;

    fn name(&self) -> &str {
        "Glob"
    }
    fn description(&self) -> String {
        DESCRIPTION.to_owned()
    }
    fn parameters(&self) -> JsonValue {
        crate::without_description(crate::parameters_schema::<GlobArgs>())
    }
    fn is_concurrency_safe(&self) -> bool {
        true
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn check_permissions(&self, _: &GlobArgs, _: &PermissionCheckContext<'_>) -> PermissionDecision {
        PermissionDecision::passthrough("Glob pattern matching is read-only.")
    }
    /// Matches the directory the search really starts from (an absolute pattern's literal prefix,
    /// else the path or the working directory), normalised, with and without a trailing `/` (see
    /// `dir_rule_matches`). The pattern as written also matches a deny or ask rule, and an
    /// allow rule when it is relative and searched from the working directory (2.0.4's `src/*`).
    fn match_rule(&self, rule: &str, list: PermissionBehavior, a: &GlobArgs, ctx: &PermissionCheckContext<'_>) -> bool {
        let path = a.path.as_deref().filter(|p| !p.is_empty());
        let root = match split_absolute_pattern(&a.pattern) {
            Some((base, _)) => base.display().to_string(),
            None => path.map_or_else(|| ctx.cwd.display().to_string(), str::to_owned),
        };
        if dir_rule_matches(&root, rule, list, ctx) {
            return true;
        }
        let from_cwd = path.is_none() && !a.pattern.starts_with('/') && !a.pattern.split('/').any(|c| c == "..");
        match list {
            PermissionBehavior::Allow => from_cwd && path_rule_matches(&a.pattern, rule),
            _ => path_rule_matches(&a.pattern, rule),
        }
    }
    fn generate_suggestions(&self, a: &GlobArgs, ctx: &PermissionCheckContext<'_>) -> Vec<PermissionRule> {
        search_suggestion("Glob", a.path.as_deref(), ctx)
    }

    async fn call(&self, a: GlobArgs, ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        self.search(a, ctx, SEARCH_TIME_LIMIT).await
    }
}

impl GlobTool {
    /// `Glob`, ending with 2.0.4's time-out error when it has not finished within `limit`.
    async fn search(&self, a: GlobArgs, ctx: ToolCallContext, limit: Duration) -> Result<ToolStream, ToolError> {
        let base = match a.path.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => ctx.resolve(p),
            None => ctx.working_dir.clone(),
        };
        if !base.is_dir() {
            return Err(ToolError::execution(format!("Directory not found: {}", base.display())));
        }
        // An absolute pattern searches from its literal directory prefix.
        let (base, rel_pattern) = split_absolute_pattern(&a.pattern).unwrap_or((base, a.pattern.clone()));
        let matcher = globset::GlobBuilder::new(&rel_pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::execution(format!("Error: invalid glob pattern {:?}: {e}", a.pattern)))?
            .compile_matcher();
        let pattern = a.pattern.clone();
        let deny = WalkDenials::from_context(&ctx);
        let stop = SearchStop::new(&ctx.cancel, limit);
        let halt = stop.cancel.clone();
        let search = tokio::task::spawn_blocking(move || {
            let mut out: Vec<(f64, PathBuf)> = Vec::new();
            let skipped = walk(&base, &deny, &stop, &mut |p| {
                if let Ok(rel) = p.strip_prefix(&base)
                    && matcher.is_match(rel)
                {
                    out.push((super::files::mtime(p).unwrap_or(0.0), p.to_path_buf()));
                }
            });
            if stop.timed_out() {
                return None;
            }
            out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            Some((out.into_iter().map(|(_, p)| p.display().to_string()).collect::<Vec<_>>(), skipped))
        });
        let Some((found, skipped)) =
            within(limit, &halt, search).await.map_err(|e| ToolError::execution(format!("Error: glob failed: {e}")))?
        else {
            return Err(ToolError::execution(GLOB_TIMED_OUT));
        };
        let text = if found.is_empty() {
            format!("No files found matching pattern: {pattern}")
        } else {
            paginate(&found, a.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT), a.offset)
        };
        Ok(ToolStream::text(with_skip_note(text, skipped)))
    }
}

/// When a search stops early: its call is cancelled, or its time is up (see [`SearchStop::stopped`]).
pub(crate) struct SearchStop {
    /// Cancelled with the call, or by [`within`] when the time is up.
    pub(crate) cancel: CancellationToken,
    /// `None` when the limit reaches past what an `Instant` holds: never.
    deadline: Option<Instant>,
    timed_out: Cell<bool>,
}

impl SearchStop {
    /// A stop for a search that may run for `limit` from now, or until `cancel` is cancelled.
    pub(crate) fn new(cancel: &CancellationToken, limit: Duration) -> Self {
        Self { cancel: cancel.child_token(), deadline: Instant::now().checked_add(limit), timed_out: Cell::new(false) }
    }

    /// Whether the search must stop now. A stop for want of time is remembered (see
    /// [`Self::timed_out`]): a limit of zero stops at the first check.
    pub(crate) fn stopped(&self) -> bool {
        if !self.timed_out.get() && self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.timed_out.set(true);
        }
        self.timed_out.get() || self.cancel.is_cancelled()
    }

    /// Whether [`Self::stopped`] found the time up: the search's results are incomplete.
    pub(crate) fn timed_out(&self) -> bool {
        self.timed_out.get()
    }
}

/// The result of a blocking search, or `None` when it has not finished within `limit` (the
/// search checks its [`SearchStop`] between files and lines; this also covers one long step):
/// `halt` then tells it to stop, as it does when the call is dropped.
pub(crate) async fn within<T>(
    limit: Duration,
    halt: &CancellationToken,
    search: tokio::task::JoinHandle<Option<T>>,
) -> Result<Option<T>, tokio::task::JoinError> {
    let _halt_when_dropped = halt.clone().drop_guard();
    match tokio::time::timeout(limit, search).await {
        Ok(done) => done,
        Err(_) => {
            halt.cancel();
            Ok(None)
        }
    }
}

/// 2.0.4's pagination text.
pub(crate) fn paginate(items: &[String], limit: u64, offset: u64) -> String {
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let rest = items.get(offset..).unwrap_or(&[]);
    let shown = if limit == 0 { rest } else { &rest[..limit.min(rest.len())] };
    let mut out = shown.join("\n");
    if limit != 0 && rest.len() > limit {
        out.push_str(&format!("\n\n[Showing results with pagination = limit: {limit}"));
        if offset > 0 {
            out.push_str(&format!(", offset: {offset}"));
        }
        out.push(']');
    }
    out
}

/// `text`, followed by [`WalkDenials::note`] when paths were skipped.
pub(crate) fn with_skip_note(mut text: String, skipped: usize) -> String {
    if let Some(note) = WalkDenials::note(skipped) {
        text.push_str("\n\n");
        text.push_str(&note);
    }
    text
}

/// `abspath(path or cwd) + "/**"` (Glob and Grep suggestions).
pub(crate) fn search_suggestion(
    tool: &str,
    path: Option<&str>,
    ctx: &PermissionCheckContext<'_>,
) -> Vec<PermissionRule> {
    let abs = match path.filter(|p| !p.is_empty()) {
        Some(p) => ctx.absolute(p),
        None => ctx.cwd.to_path_buf(),
    };
    let abs = abs.display().to_string();
    vec![PermissionRule::new(
        tool,
        Some(format!("{}/**", abs.trim_end_matches('/'))),
        PermissionBehavior::Allow,
        "suggested",
    )]
}

/// `/a/b/**/*.rs` becomes (`/a/b`, `**/*.rs`): the components before the first one with a glob
/// metacharacter form the base directory.
fn split_absolute_pattern(pattern: &str) -> Option<(PathBuf, String)> {
    if !pattern.starts_with('/') {
        return None;
    }
    let parts: Vec<&str> = pattern.split('/').collect();
    let first_glob = parts.iter().position(|p| p.contains(['*', '?', '[', '{']))?;
    let base = parts[..first_glob].join("/");
    let base = if base.is_empty() { "/".to_owned() } else { base };
    Some((PathBuf::from(base), parts[first_glob..].join("/")))
}

/// Visits every regular file under `dir`, in name order, until `stop` says to stop, and returns
/// how many paths `deny` made it skip. Symlinked directories, `.git`, [`super::UNSEARCHED_ROOTS`]
/// (where `dir` really leads there too) and what `deny` denies (`dir` itself, a directory below
/// it, which is then not entered, or a file) are not visited.
pub(crate) fn walk(dir: &Path, deny: &WalkDenials, stop: &SearchStop, visit: &mut dyn FnMut(&Path)) -> usize {
    if deny.denies(dir, None, true) {
        return 1;
    }
    let real = std::fs::canonicalize(dir).unwrap_or_else(|_| crate::permission::real_path(dir));
    let mut skipped = 0;
    walk_in(dir, &real, deny, stop, visit, &mut skipped);
    skipped
}

/// [`walk`] below `dir`, whose symlink-free path is `real` (entered directories are never
/// symlinks, so a child's real path is `real` plus its name).
fn walk_in(
    dir: &Path,
    real: &Path,
    deny: &WalkDenials,
    stop: &SearchStop,
    visit: &mut dyn FnMut(&Path),
    skipped: &mut usize,
) {
    if stop.stopped() || super::is_unsearched(real) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if stop.stopped() {
            return;
        }
        let Ok(ft) = entry.file_type() else { continue };
        let path = entry.path();
        if ft.is_dir() {
            if entry.file_name() == ".git" {
                continue;
            }
            let child = real.join(entry.file_name());
            if deny.denies(&path, Some(&child), true) {
                *skipped += 1;
            } else {
                walk_in(&path, &child, deny, stop, visit, skipped);
            }
        } else if ft.is_file() || (ft.is_symlink() && path.is_file()) {
            // A regular file's real path is known; a symlink's is where it leads.
            let child = ft.is_file().then(|| real.join(entry.file_name()));
            if deny.denies(&path, child.as_deref(), false) {
                *skipped += 1;
            } else {
                visit(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(cancel: &CancellationToken) -> SearchStop {
        SearchStop::new(cancel, SEARCH_TIME_LIMIT)
    }

    #[test]
    fn walks_stop_when_cancelled_and_skip_kernel_file_systems() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["a", "b", "c"] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let cancel = CancellationToken::new();
        let mut seen = Vec::new();
        walk(dir.path(), &WalkDenials::default(), &stop(&cancel), &mut |p| {
            seen.push(p.to_path_buf());
            cancel.cancel();
        });
        assert_eq!(seen, [dir.path().join("a")], "the walk stops at the first check after the cancel");
        let mut none = 0;
        walk(dir.path(), &WalkDenials::default(), &stop(&cancel), &mut |_| none += 1);
        assert_eq!(none, 0);
        let fresh = CancellationToken::new();
        for root in ["/proc/self", "/sys/kernel", "/dev"] {
            let mut n = 0;
            walk(Path::new(root), &WalkDenials::default(), &stop(&fresh), &mut |_| n += 1);
            assert_eq!(n, 0, "{root}");
        }
    }

    #[test]
    fn walks_stop_when_the_time_is_up() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "x").unwrap();
        let cancel = CancellationToken::new();
        let out_of_time = SearchStop::new(&cancel, Duration::ZERO);
        let mut n = 0;
        walk(dir.path(), &WalkDenials::default(), &out_of_time, &mut |_| n += 1);
        assert_eq!(n, 0);
        assert!(out_of_time.timed_out());
        assert!(!cancel.is_cancelled(), "the call itself is not cancelled");
        let in_time = stop(&cancel);
        walk(dir.path(), &WalkDenials::default(), &in_time, &mut |_| n += 1);
        assert_eq!(n, 1);
        assert!(!in_time.timed_out());
    }

    /// Out of time, Glob gives 2.0.4's error (its helper killed by `exec_shell`'s 30 s timeout),
    /// not the files found so far.
    #[tokio::test]
    async fn glob_out_of_time_says_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.rs"), "x").unwrap();
        let ctx = || ToolCallContext::new("call", crate::SharedToolState::default(), dir.path());
        let args = || GlobArgs { pattern: "*.rs".into(), path: None, head_limit: None, offset: 0 };
        let e = GlobTool.search(args(), ctx(), Duration::ZERO).await.err().unwrap();
        assert_eq!(e.model_text(), "Glob helper failed: timed out");
        assert!(GlobTool.search(args(), ctx(), SEARCH_TIME_LIMIT).await.is_ok());
    }
}
