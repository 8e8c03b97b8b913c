//! `Grep`: regex search over files (skipping paths the deny rules name: see [`super`]).

use std::path::PathBuf;
use std::time::Duration;

use as_message::{JsonValue, PermissionBehavior, PermissionRule};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::glob::{SEARCH_TIME_LIMIT, SearchStop, paginate, search_suggestion, walk, with_skip_note, within};
use super::{WalkDenials, dir_rule_matches};
use crate::context::ToolCallContext;
use crate::error::ToolError;
use crate::permission::{PermissionCheckContext, PermissionDecision};
use crate::response::ToolStream;
use crate::tool::Tool;

const DESCRIPTION: &str = "A powerful search tool for file contents based on regular expressions.

Usage:
- Supports full regex syntax (e.g., \"log.*Error\", \"function\\s+\\w+\")
- Filter files with the glob parameter (e.g., \"*.js\", \"**/*.tsx\")
- Output modes: \"content\" shows matching lines (with line numbers), \"files_with_matches\" shows only file paths (default), \"count\" shows match counts per file
- Use head_limit to cap the number of results returned.";

const DEFAULT_HEAD_LIMIT: u64 = 250;
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// 2.0.4 runs `rg --max-columns 500`: a matching line of more bytes than this, its line end
/// included, is shown as [`OMITTED_LINE`]. (Lines are measured as decoded: a `\r\n` line end
/// counts one byte, invalid UTF-8 three per replaced sequence.)
const MAX_COLUMNS: usize = 500;

/// What ripgrep prints for such a line when it does not colour its output, as through 2.0.4's pipe.
const OMITTED_LINE: &str = "[Omitted long matching line]";

/// 2.0.4's error when ripgrep does not finish within `limit`.
fn timed_out(limit: Duration) -> ToolError {
    ToolError::execution(format!(
        "Ripgrep search timed out after {} seconds. Try searching a more specific path or pattern.",
        limit.as_secs()
    ))
}

/// What `Grep` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrepOutputMode {
    /// Matching lines as `path:line:text` (`line:text` when the path is one file); a line over 500 bytes
    /// shows as `[Omitted long matching line]`.
    Content,
    /// Paths of files with a match.
    #[default]
    FilesWithMatches,
    /// `path:count` per file (a bare count when the path is one file).
    Count,
}

/// Arguments of `Grep`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// The regular expression pattern to search for in file contents
    pub pattern: String,
    /// File or directory to search in (defaults to current working directory)
    #[serde(default)]
    pub path: Option<String>,
    /// Glob pattern to filter files (e.g. "*.js", "**/*.tsx")
    #[serde(default)]
    pub glob: Option<String>,
    /// Output mode: "content", "files_with_matches" (default) or "count"
    #[serde(default)]
    pub output_mode: GrepOutputMode,
    /// Case insensitive search
    #[serde(default)]
    pub case_insensitive: bool,
    /// Limit output to first N entries. Defaults to 250 when unspecified. Pass 0 for unlimited.
    #[serde(default)]
    pub head_limit: Option<u64>,
}

/// The `Grep` tool (read-only, concurrency-safe).
#[derive(Clone, Copy, Debug, Default)]
pub struct GrepTool;

impl Tool for GrepTool {
    type Args = GrepArgs;

    fn name(&self) -> &str {
        "Grep"
    }
    fn description(&self) -> String {
        DESCRIPTION.to_owned()
    }
    fn parameters(&self) -> JsonValue {
        crate::without_description(crate::parameters_schema::<GrepArgs>())
    }
    fn is_concurrency_safe(&self) -> bool {
        true
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn check_permissions(&self, _: &GrepArgs, _: &PermissionCheckContext<'_>) -> PermissionDecision {
        PermissionDecision::passthrough("Grep search is read-only.")
    }
    /// Matches the path searched (or the working directory), normalised, with and without a
    /// trailing `/`: see `dir_rule_matches`.
    fn match_rule(&self, rule: &str, list: PermissionBehavior, a: &GrepArgs, ctx: &PermissionCheckContext<'_>) -> bool {
        let path = match a.path.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => p.to_owned(),
            None => ctx.cwd.display().to_string(),
        };
        dir_rule_matches(&path, rule, list, ctx)
    }
    fn generate_suggestions(&self, a: &GrepArgs, ctx: &PermissionCheckContext<'_>) -> Vec<PermissionRule> {
        search_suggestion("Grep", a.path.as_deref(), ctx)
    }

    async fn call(&self, a: GrepArgs, ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        self.search(a, ctx, SEARCH_TIME_LIMIT).await
    }
}

impl GrepTool {
    /// `Grep`, ending with 2.0.4's time-out error when it has not finished within `limit`.
    async fn search(&self, a: GrepArgs, ctx: ToolCallContext, limit: Duration) -> Result<ToolStream, ToolError> {
        let base = match a.path.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => ctx.resolve(p),
            None => ctx.working_dir.clone(),
        };
        if !base.exists() {
            return Err(ToolError::execution(format!("Path not found: {}", base.display())));
        }
        let re = regex::RegexBuilder::new(&a.pattern)
            .case_insensitive(a.case_insensitive)
            .build()
            .map_err(|e| ToolError::execution(format!("Error: invalid regex pattern {:?}: {e}", a.pattern)))?;
        let filter = match a.glob.as_deref().filter(|g| !g.is_empty()) {
            Some(g) => Some(
                globset::GlobBuilder::new(g)
                    .literal_separator(g.contains('/'))
                    .build()
                    .map_err(|e| ToolError::execution(format!("Error: invalid glob pattern {g:?}: {e}")))?
                    .compile_matcher(),
            ),
            None => None,
        };
        let mode = a.output_mode;
        let pattern = a.pattern.clone();
        let head_limit = a.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT);
        // One entry past the limit tells pagination that there are more: the search stops there.
        let wanted = match usize::try_from(head_limit) {
            Ok(0) | Err(_) => usize::MAX,
            Ok(n) => n.saturating_add(1),
        };
        let deny = WalkDenials::from_context(&ctx);
        let stop = SearchStop::new(&ctx.cancel, limit);
        let halt = stop.cancel.clone();
        let search = tokio::task::spawn_blocking(move || {
            let mut files: Vec<PathBuf> = Vec::new();
            let mut skipped = 0;
            if base.is_file() {
                // Not a file of /proc, /sys or /dev either (`/proc/<pid>/environ` holds secrets).
                let real = std::fs::canonicalize(&base).ok();
                if deny.denies(&base, real.as_deref(), false) {
                    skipped = 1;
                } else if !super::is_unsearched(real.as_deref().unwrap_or(&base)) {
                    files.push(base.clone());
                }
            } else {
                skipped = walk(&base, &deny, &stop, &mut |p| {
                    let keep = match &filter {
                        None => true,
                        Some(m) => {
                            let rel = p.strip_prefix(&base).unwrap_or(p);
                            m.is_match(rel) || p.file_name().is_some_and(|n| m.is_match(n))
                        }
                    };
                    if keep {
                        files.push(p.to_path_buf());
                    }
                });
            }
            // A single file given as the path is shown without its name, as ripgrep shows it (2.0.4
            // runs `rg … <path>`): `N:line` and a bare count.
            let single = base.is_file();
            let mut out: Vec<String> = Vec::new();
            for f in files {
                if out.len() >= wanted || stop.stopped() {
                    break;
                }
                // Files over the cap are skipped: by their metadata, without reading them, and by
                // reading no more than the cap (the metadata says 0 for `/proc` and `/sys` files).
                if std::fs::metadata(&f).is_ok_and(|m| m.len() > MAX_FILE_BYTES) {
                    continue;
                }
                let Ok(Some(bytes)) = super::read_at_most(&f, MAX_FILE_BYTES) else { continue };
                if bytes.contains(&0) {
                    continue; // binary
                }
                let text = super::decode_text(&bytes);
                let shown = f.display().to_string();
                // Line by line in every mode, so `^`/`$` anchor at each line as in count/content; the
                // time is checked at each line, as one file may hold millions.
                let lines = text.split_inclusive('\n').map(|l| (l.strip_suffix('\n').unwrap_or(l), l.len()));
                match mode {
                    GrepOutputMode::FilesWithMatches => {
                        if lines.take_while(|_| !stop.stopped()).any(|(l, _)| re.is_match(l)) {
                            out.push(shown);
                        }
                    }
                    GrepOutputMode::Count => {
                        let n = lines.take_while(|_| !stop.stopped()).filter(|(l, _)| re.is_match(l)).count();
                        if n > 0 {
                            out.push(if single { n.to_string() } else { format!("{shown}:{n}") });
                        }
                    }
                    GrepOutputMode::Content => {
                        for (i, (l, len)) in lines.enumerate() {
                            if out.len() >= wanted || stop.stopped() {
                                break;
                            }
                            if re.is_match(l) {
                                let l = if len > MAX_COLUMNS { OMITTED_LINE } else { l };
                                out.push(if single {
                                    format!("{}:{l}", i + 1)
                                } else {
                                    format!("{shown}:{}:{l}", i + 1)
                                });
                            }
                        }
                    }
                }
            }
            if stop.timed_out() {
                return None;
            }
            Some((out, skipped))
        });
        let Some((lines, skipped)) =
            within(limit, &halt, search).await.map_err(|e| ToolError::execution(format!("Error: grep failed: {e}")))?
        else {
            return Err(timed_out(limit));
        };
        let text = if lines.is_empty() {
            format!("No matches found for pattern: {pattern}")
        } else {
            paginate(&lines, head_limit, 0)
        };
        Ok(ToolStream::text(with_skip_note(text, skipped)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pattern: &str, mode: GrepOutputMode) -> GrepArgs {
        GrepArgs {
            pattern: pattern.into(),
            path: None,
            glob: None,
            output_mode: mode,
            case_insensitive: false,
            head_limit: None,
        }
    }

    async fn run(dir: &std::path::Path, a: GrepArgs, limit: Duration) -> Result<(), String> {
        let ctx = ToolCallContext::new("call", crate::SharedToolState::default(), dir);
        GrepTool.search(a, ctx, limit).await.map(drop).map_err(|e| e.model_text().to_owned())
    }

    /// Out of time, Grep gives 2.0.4's error (ripgrep killed by its 30 s timeout), not the
    /// matches found so far, in every mode and for a single file too.
    #[tokio::test]
    async fn grep_out_of_time_says_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "needle\n").unwrap();
        let said = "Ripgrep search timed out after 0 seconds. Try searching a more specific path or pattern.";
        for mode in [GrepOutputMode::Content, GrepOutputMode::FilesWithMatches, GrepOutputMode::Count] {
            assert_eq!(run(dir.path(), args("needle", mode), Duration::ZERO).await, Err(said.to_owned()));
            let mut one_file = args("needle", mode);
            one_file.path = Some("a.txt".into());
            assert_eq!(run(dir.path(), one_file, Duration::ZERO).await, Err(said.to_owned()));
            assert!(run(dir.path(), args("needle", mode), SEARCH_TIME_LIMIT).await.is_ok());
        }
        assert_eq!(
            timed_out(SEARCH_TIME_LIMIT).model_text(),
            "Ripgrep search timed out after 30 seconds. Try searching a more specific path or pattern."
        );
    }
}
