//! Built-in tools for a coding CLI: [`ReadTool`], [`WriteTool`], [`EditTool`], [`GlobTool`],
//! [`GrepTool`] and [`BashTool`] (2.0.4 `Read`, `Write`, `Edit`, `Glob`, `Grep`, `Bash`).
//!
//! Paths given to Read/Write/Edit must be absolute (as in 2.0.4); Glob, Grep and Bash resolve
//! relative paths against [`crate::ToolCallContext::working_dir`].
//!
//! Permissions follow 2.0.4: Read/Glob/Grep are read-only (explore mode allows them; Read asks
//! for a process's `environ`); Write and Edit ask for sensitive paths (as written or where a
//! symlink leads; the ask is marked bypass-immune, though `bypass` mode itself allows everything,
//! as in 2.0.4), are allowed inside the working directories in `accept_edits` mode, and otherwise
//! fall through to the rules and finally ASK; Bash allows known read-only commands, asks
//! (bypass-immune) for dangerous or unanalysable ones, and matches deny/ask rules per command
//! segment, also as the shell reads it, failing closed where a program or argument is only known
//! when it runs (`$x`, `{r,}m`, `/bin/r?`; best-effort: code a command makes at run time is not
//! seen). Path rules match the path as written, its normal form and its real path (deny/ask: any;
//! allow: the normal form and the real path), the rule as written, taken from the working directory
//! when relative, and, for the real path, with its literal directory resolved through symlinks
//! (so a symlinked working directory keeps its rules). For Glob and Grep that path is the directory
//! the search starts from (the `path` argument or the working directory, or an absolute Glob
//! pattern's literal prefix), also with a trailing `/` (so `dir/**` covers `dir`).
//!
//! Since the engine sees only that starting directory, the Glob and Grep walks apply the deny
//! rules themselves, to the paths below it: given the session's permission context
//! ([`crate::ToolCallContext::with_permission`], as the agent does for every call), they skip
//! each directory (not entered) and file that a Read, Grep or Glob deny rule with a path matches,
//! matched as for a direct call (as walked, normal form and real path; a directory also with a
//! trailing `/`, so a deny on `dir/**` keeps the walk out of `dir`; also relative to the working
//! directory). In bypass or explore mode, or under an allow rule on `/home/u`, a search of
//! `/home/u` thus finds nothing in a denied `/home/u/.ssh`. The result names no skipped path; it
//! only ends with how many were skipped (`[N paths skipped by deny rules]`). A Read of a single
//! file needs nothing more: the engine checks that path itself.

mod bash;
mod edit;
mod files;
mod glob;
mod grep;
mod read;
mod write;

use std::sync::Arc;

use as_message::{PermissionBehavior, PermissionRule};

pub use bash::{BashArgs, BashTool, HIDDEN_ENV, MAX_COMMAND_BYTES, MAX_TIMEOUT_MS};
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

/// A rule on a file path, matched so that spelling cannot dodge it: a deny or ask rule matches
/// the path as given, its lexically normal form (`//`, `.` and `..` resolved) or its real path
/// (symlinks resolved); an allow rule must match both the normal form and the real path (so
/// `/proj/**` allows neither `/proj/../home/u/.bashrc` nor `/proj/link/.bashrc` where `link` leads
/// to `/home/u`). The rule is matched as written and in the forms of [`RuleForms`]: a relative
/// rule taken from the working directory, and the rule's literal directory resolved through
/// symlinks for the real path (so `/tmp/p/**` allows `/tmp/p/a` where `/tmp` leads to
/// `/private/tmp`).
pub(crate) fn file_rule_matches(
    path: &str,
    rule: &str,
    list: PermissionBehavior,
    ctx: &crate::permission::PermissionCheckContext<'_>,
) -> bool {
    PathForms::new(path, ctx).is_some_and(|f| f.matches(&RuleForms::new(rule, ctx.cwd), list, false))
}

/// A rule on the directory (or file) a search starts from (Glob, Grep): matched like
/// [`file_rule_matches`], each form also with a trailing `/`, so a rule on `dir/**` covers a search
/// of `dir` itself (an allow rule `/srv/**` allows searching `/srv`; a deny rule
/// `/home/u/.ssh/**` denies it).
pub(crate) fn dir_rule_matches(
    dir: &str,
    rule: &str,
    list: PermissionBehavior,
    ctx: &crate::permission::PermissionCheckContext<'_>,
) -> bool {
    PathForms::new(dir, ctx).is_some_and(|f| f.matches(&RuleForms::new(rule, ctx.cwd), list, true))
}

/// A path rule's forms: as written; with its literal directory (the text before the first glob
/// character, up to its last `/`) made absolute (a relative rule from the working directory, `~`
/// expanded) in normal form; and with that directory resolved through symlinks. A rule that starts
/// with a glob (`*.py`, `**/.env`) has only the first form.
pub(crate) struct RuleForms {
    given: String,
    normal: String,
    real: String,
}

impl RuleForms {
    pub(crate) fn new(rule: &str, cwd: &std::path::Path) -> Self {
        let glob_at = rule.find(['*', '?', '[']).unwrap_or(rule.len());
        let dir_end = rule[..glob_at].rfind('/');
        let prefix = dir_end.map_or("", |i| &rule[..i]);
        let tail = match dir_end {
            Some(i) => rule[i..].to_owned(),
            None => format!("/{rule}"),
        };
        let dir = if rule.starts_with('/') {
            (!prefix.is_empty()).then(|| std::path::PathBuf::from(prefix))
        } else if rule.starts_with("~/") {
            Some(crate::permission::expand_user(prefix))
        } else if rule.starts_with(['~', '*', '?', '[']) || rule.is_empty() {
            None
        } else {
            Some(cwd.join(prefix))
        };
        let Some(dir) = dir else {
            return Self { given: rule.to_owned(), normal: rule.to_owned(), real: rule.to_owned() };
        };
        let join = |d: std::path::PathBuf| format!("{}{tail}", d.to_string_lossy().trim_end_matches('/'));
        let absolute = if dir.is_absolute() { dir } else { cwd.join(dir) };
        Self {
            given: rule.to_owned(),
            normal: join(lexical_normal(&absolute)),
            real: join(crate::permission::real_path(&absolute)),
        }
    }
}

/// The forms of a path that [`file_rule_matches`] and [`dir_rule_matches`] match a rule against:
/// as given, lexically normal and real. Built once, matched against any number of rules.
struct PathForms {
    given: String,
    normal: String,
    real: String,
}

impl PathForms {
    /// The forms of `path` (relative to the check's working directory); none for an empty path.
    fn new(path: &str, ctx: &crate::permission::PermissionCheckContext<'_>) -> Option<Self> {
        if path.is_empty() {
            return None;
        }
        let absolute = ctx.absolute(path);
        Some(Self {
            given: path.to_owned(),
            normal: lexical_normal(&absolute).to_string_lossy().into_owned(),
            real: crate::permission::real_path(&absolute).to_string_lossy().into_owned(),
        })
    }

    /// Whether `rule` matches: for a deny or ask rule, any form of the path any form of the rule;
    /// for an allow rule, the normal form the rule as written or in normal form, and the real path
    /// any form of the rule (a symlink-free path below the rule's directory as written is below
    /// it). `as_dir` also tries each form with a trailing `/`.
    fn matches(&self, rule: &RuleForms, list: PermissionBehavior, as_dir: bool) -> bool {
        let one = |p: &str, r: &str| fnmatch(p, r) || (as_dir && fnmatch(&format!("{}/", p.trim_end_matches('/')), r));
        let rules = [&rule.given, &rule.normal, &rule.real];
        match list {
            PermissionBehavior::Allow => {
                rules[..2].iter().any(|r| one(&self.normal, r)) && rules.iter().any(|r| one(&self.real, r))
            }
            _ => [&self.given, &self.normal, &self.real].iter().any(|p| rules.iter().any(|r| one(p, r))),
        }
    }
}

/// The tools whose deny rules a search walk honours for every path it meets.
const WALK_DENY_TOOLS: &[&str] = &["Read", "Grep", "Glob"];

/// The path deny rules a Glob or Grep walk honours ([`crate::ToolCallContext::permission`]): the
/// permission engine sees only the directory a search starts from, so a deny rule on a path below
/// it (`/home/u/.ssh/**` under a search of `/home/u`) is applied here, to each directory before
/// it is entered and to each file before it is read or listed. The rules are the Read, Grep and
/// Glob deny rules with a path (a rule without one denies the tool itself, which the engine does);
/// a path is matched as by [`dir_rule_matches`] (directories) or [`file_rule_matches`] (files),
/// and its normal form and real path also relative to the working directory, as a relative
/// argument would be written (so a relative rule such as `.ssh/**` holds too).
#[derive(Debug, Default)]
pub(crate) struct WalkDenials {
    /// Every form ([`RuleForms`]) of every rule, compiled once for the walk.
    patterns: Vec<crate::permission::CompiledGlob>,
    cwd: std::path::PathBuf,
    /// `cwd` in normal form and real, what paths are made relative to.
    cwd_forms: [std::path::PathBuf; 2],
}

impl WalkDenials {
    /// The deny rules of the call's permission context (none without one).
    pub(crate) fn from_context(ctx: &crate::ToolCallContext) -> Self {
        let Some(permission) = ctx.permission.as_deref() else { return Self::default() };
        let rules: Vec<&str> = WALK_DENY_TOOLS
            .iter()
            .flat_map(|tool| permission.deny_rules.get(*tool).into_iter().flatten())
            .filter_map(|rule| rule.rule_content.as_deref().filter(|c| !c.is_empty()))
            .collect();
        Self::new(&rules, &ctx.working_dir)
    }

    /// The denials of `rules` for a walk from the working directory `cwd`.
    pub(crate) fn new(rules: &[&str], cwd: &std::path::Path) -> Self {
        let mut patterns: Vec<String> = Vec::new();
        for rule in rules {
            let forms = RuleForms::new(rule, cwd);
            for form in [forms.given, forms.normal, forms.real] {
                if !patterns.contains(&form) {
                    patterns.push(form);
                }
            }
        }
        Self {
            patterns: patterns.iter().map(|p| crate::permission::CompiledGlob::new(p)).collect(),
            cwd: cwd.to_owned(),
            cwd_forms: [lexical_normal(cwd), crate::permission::real_path(cwd)],
        }
    }

    /// Whether `path` (a directory when `is_dir`) is denied and must be skipped; `real` is its real
    /// path when the walk knows it (else it is resolved here).
    pub(crate) fn denies(&self, path: &std::path::Path, real: Option<&std::path::Path>, is_dir: bool) -> bool {
        if self.patterns.is_empty() || path.as_os_str().is_empty() {
            return false;
        }
        let absolute = self.cwd.join(path);
        let normal = lexical_normal(&absolute);
        let real = real.map_or_else(|| crate::permission::real_path(&absolute), std::path::Path::to_path_buf);
        let mut forms: Vec<String> =
            [path, normal.as_path(), real.as_path()].iter().map(|p| p.to_string_lossy().into_owned()).collect();
        for form in [&normal, &real] {
            if let Some(relative) = self.cwd_forms.iter().find_map(|cwd| form.strip_prefix(cwd).ok())
                && !relative.as_os_str().is_empty()
            {
                forms.push(relative.to_string_lossy().into_owned());
            }
        }
        if is_dir {
            let dirs: Vec<String> = forms.iter().map(|f| format!("{}/", f.trim_end_matches('/'))).collect();
            forms.extend(dirs);
        }
        self.patterns.iter().any(|p| forms.iter().any(|f| p.is_match(f)))
    }

    /// The note a search adds to its result for `skipped` paths (none for 0); it names no path.
    pub(crate) fn note(skipped: usize) -> Option<String> {
        match skipped {
            0 => None,
            1 => Some("[1 path skipped by deny rules]".to_owned()),
            n => Some(format!("[{n} paths skipped by deny rules]")),
        }
    }
}

/// `path` with `.`, `..` and repeated separators resolved by text alone (no symlinks followed).
pub(crate) fn lexical_normal(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Whether `path` is sensitive as written or where it really leads (a symlink inside the working
/// directory to `.git/config` is as sensitive as `.git/config`).
pub(crate) fn is_dangerous_target(path: &str, ctx: &crate::permission::PermissionCheckContext<'_>) -> bool {
    is_dangerous_path(path) || is_dangerous_path(&crate::permission::real_path(&ctx.absolute(path)).to_string_lossy())
}

/// Replaces `path`'s content all at once: the bytes go to a temporary file in the same directory
/// (created with at most the old file's permissions, synced, then given exactly its mode), which
/// is renamed over the file, so a failed write (a full disk) leaves the old content whole. A
/// symlink is followed (its target is replaced). Where a rename cannot do it, the file is written
/// in place as before: a hard-linked file (the links share it), a dangling symlink (its target is
/// created), a directory the file may be written in but not created in, a bind-mounted file, a
/// name too long for the temporary's suffix. Owner, ACLs and extended attributes of a replaced
/// file are not kept.
pub(crate) async fn write_file_atomically(path: &std::path::Path, bytes: Vec<u8>) -> std::io::Result<()> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::{ErrorKind, Write as _};
        use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
        let target = match std::fs::canonicalize(&path) {
            Ok(t) => t,
            Err(_) if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) => {
                return std::fs::write(&path, &bytes);
            }
            Err(_) => path,
        };
        let old = std::fs::metadata(&target).ok();
        if old.as_ref().is_some_and(|m| m.nlink() > 1) {
            return std::fs::write(&target, &bytes);
        }
        let mode = old.as_ref().map(|m| m.permissions().mode() & 0o7777);
        let dir = target.parent().unwrap_or(std::path::Path::new("/"));
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp-{}", as_message::generate_id()));
        let result = (|| {
            let mut f =
                std::fs::OpenOptions::new().write(true).create_new(true).mode(mode.unwrap_or(0o666)).open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            if let Some(mode) = mode {
                std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
            }
            std::fs::rename(&tmp, &target)
        })();
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                match e.kind() {
                    ErrorKind::CrossesDevices
                    | ErrorKind::ResourceBusy
                    | ErrorKind::PermissionDenied
                    | ErrorKind::InvalidFilename => std::fs::write(&target, &bytes),
                    _ => Err(e),
                }
            }
        }
    })
    .await
    .map_err(std::io::Error::other)?
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

/// At most `max` bytes of the file at `path`: `Ok(None)` when it holds more. The size is found by
/// reading, not from its metadata, which says 0 for `/proc` and `/sys` files however much they
/// hold (`/proc/self/pagemap` holds more than any memory).
///
/// Reads go in whole 64 KiB blocks (some kernel files, such as `pagemap`, refuse reads of other
/// sizes), so up to one block more than `max` may be read before giving up.
pub(crate) fn read_at_most(path: &std::path::Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::{ErrorKind, Read as _};
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let mut file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    let mut block = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut block) {
            Ok(0) => return Ok(Some(bytes)),
            Ok(n) => {
                if bytes.len().saturating_add(n) > max {
                    return Ok(None);
                }
                bytes.extend_from_slice(&block[..n]);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// [`read_at_most`] off the async runtime.
pub(crate) async fn read_at_most_async(path: &std::path::Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || read_at_most(&path, max)).await.map_err(std::io::Error::other)?
}

/// Kernel file systems a search never enters: their files claim a size of 0 but can be endless
/// (`/proc/self/pagemap`), block (`/dev`), or hold other processes' secrets (`/proc/<pid>/environ`).
pub(crate) const UNSEARCHED_ROOTS: &[&str] = &["/proc", "/sys", "/dev"];

/// Whether a resolved path is or lies below one of [`UNSEARCHED_ROOTS`].
pub(crate) fn is_unsearched(real: &std::path::Path) -> bool {
    UNSEARCHED_ROOTS.iter().any(|r| real.starts_with(r))
}

/// Decodes bytes as UTF-8 (lossy) and normalises `\r\n` and `\r` to `\n`.
pub(crate) fn decode_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace("\r\n", "\n").replace('\r', "\n")
}

/// Python's `str.splitlines(keepends=True)`, by which 2.0.4's Read numbers and caches lines: a
/// line ends at `\n`, `\r\n`, `\r`, `\v`, `\f`, `\x1c`, `\x1d`, `\x1e`, `\x85`, U+2028 or
/// U+2029, and keeps its end (`page one\x0cpage two\n` is two lines, as in 2.0.4).
pub(crate) fn split_keep_ends(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' => match chars.next_if(|&(_, n)| n == '\n') {
                Some((j, _)) => j + 1,
                None => i + 1,
            },
            '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                i + c.len_utf8()
            }
            _ => continue,
        };
        lines.push(text[start..end].to_owned());
        start = end;
    }
    if start < text.len() {
        lines.push(text[start..].to_owned());
    }
    lines
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
    fn file_rules_cannot_be_dodged_by_spelling() {
        let perm = as_message::PermissionContext::default();
        let ctx = crate::permission::PermissionCheckContext::new(&perm, std::path::Path::new("/proj"));
        let deny = |p: &str, r: &str| file_rule_matches(p, r, PermissionBehavior::Deny, &ctx);
        let allow = |p: &str, r: &str| file_rule_matches(p, r, PermissionBehavior::Allow, &ctx);
        for p in ["/etc/secret/k", "/etc//secret/k", "/etc/./secret/k", "/etc/x/../secret/k"] {
            assert!(deny(p, "/etc/secret/**"), "{p}");
        }
        assert!(allow("/proj/src/a.rs", "/proj/**"));
        assert!(!allow("/proj/../home/u/.config/x.service", "/proj/**"));
        assert!(!deny("/proj/src/a.rs", "/etc/secret/**"));
        assert!(!allow("", "**"));
    }

    #[test]
    fn allow_rules_hold_where_symlinks_lead() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("proj/src")).unwrap();
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::os::unix::fs::symlink(root.join("home"), root.join("proj/link")).unwrap();
        let perm = as_message::PermissionContext::default();
        let ctx = crate::permission::PermissionCheckContext::new(&perm, &root);
        let rule = format!("{}/proj/**", root.display());
        let p = |rel: &str| root.join(rel).to_string_lossy().into_owned();
        let allow = |path: &str| file_rule_matches(path, &rule, PermissionBehavior::Allow, &ctx);
        let allow_dir = |path: &str| dir_rule_matches(path, &rule, PermissionBehavior::Allow, &ctx);
        assert!(allow(&p("proj/src/a.rs")) && allow(&p("proj/new.rs")));
        assert!(!allow(&p("proj/link/.bashrc")), "the link leads out of the allowed directory");
        assert!(!allow(&p("proj/link/new/file")), "also through a missing tail");
        assert!(allow_dir(&p("proj")) && allow_dir(&p("proj/src")));
        assert!(!allow_dir(&p("proj/link")));
    }

    #[test]
    fn allow_rules_hold_in_a_symlinked_working_directory() {
        // As on macOS, where /tmp leads to /private/tmp: rules are suggested as the paths are
        // written, under the symlinked working directory.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("private/proj/src")).unwrap();
        std::fs::create_dir_all(dir.path().join("private/home")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("private"), dir.path().join("tmp")).unwrap();
        let cwd = dir.path().join("tmp/proj");
        std::os::unix::fs::symlink(dir.path().join("private/home"), cwd.join("link")).unwrap();
        let perm = as_message::PermissionContext::default();
        let ctx = crate::permission::PermissionCheckContext::new(&perm, &cwd);
        let rule = format!("{}/**", cwd.display());
        let p = |rel: &str| cwd.join(rel).to_string_lossy().into_owned();
        let allow = |path: &str, rule: &str| file_rule_matches(path, rule, PermissionBehavior::Allow, &ctx);
        let allow_dir = |path: &str, rule: &str| dir_rule_matches(path, rule, PermissionBehavior::Allow, &ctx);
        assert!(allow(&p("src/a.rs"), &rule) && allow(&p("new.rs"), &rule));
        assert!(allow_dir(&p("src"), &rule) && allow_dir(&cwd.to_string_lossy(), &rule));
        assert!(!allow(&p("link/.bashrc"), &rule), "the link still leads out of the allowed directory");
        assert!(!allow_dir(&p("link"), &rule));
        // Relative rules are taken from the working directory.
        assert!(allow_dir("src/x", "src/**") && allow_dir("src", "src/**") && allow_dir(&p("src"), "src/**"));
        assert!(allow("./src/a.rs", "src/**") && allow(&p("src/a.rs"), "./src/**"));
        assert!(!allow_dir("link/x", "src/**") && !allow("src/../link/x", "src/**"));
    }

    #[test]
    fn relative_deny_rules_hold_for_every_spelling_of_the_path() {
        let perm = as_message::PermissionContext::default();
        let ctx = crate::permission::PermissionCheckContext::new(&perm, std::path::Path::new("/home/u"));
        let deny = |p: &str, r: &str| file_rule_matches(p, r, PermissionBehavior::Deny, &ctx);
        for (path, rule) in [
            ("/home/u/.ssh/id_rsa", ".ssh/**"),
            ("/home/u/x/../.ssh/id_rsa", ".ssh/**"),
            ("/home/u/.ssh/id_rsa", "./.ssh/**"),
            (".ssh/id_rsa", "./.ssh/**"),
            ("./.ssh/id_rsa", ".ssh/**"),
            ("/home/u/notes.txt", "notes.txt"),
        ] {
            assert!(deny(path, rule), "{rule} missed {path}");
        }
        assert!(!deny("/home/v/.ssh/id_rsa", ".ssh/**") && !deny("/home/u/docs/notes.txt", "notes.txt"));
        assert!(dir_rule_matches("/home/u/.ssh", "./.ssh/**", PermissionBehavior::Deny, &ctx));
    }

    #[test]
    fn walk_denials_use_the_real_path_the_walk_tracks() {
        let walk = WalkDenials::new(&["/secret/**", "./.ssh/**"], std::path::Path::new("/home/u"));
        let (public, secret) = (std::path::Path::new("/pub/x"), std::path::Path::new("/secret/x"));
        assert!(walk.denies(public, Some(secret), false));
        assert!(!walk.denies(public, Some(public), false));
        assert!(walk.denies(std::path::Path::new("/home/u/.ssh"), None, true));
        assert!(walk.denies(std::path::Path::new("/home/u/.ssh/id_rsa"), None, false));
        assert!(!walk.denies(std::path::Path::new("/home/u/docs"), None, true));
    }

    #[test]
    fn a_symlink_to_a_sensitive_file_is_sensitive() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::os::unix::fs::symlink("../.git/config", root.join("docs/notes.txt")).unwrap();
        let perm = as_message::PermissionContext::default();
        let ctx = crate::permission::PermissionCheckContext::new(&perm, &root);
        let link = root.join("docs/notes.txt").to_string_lossy().into_owned();
        assert!(!is_dangerous_path(&link));
        assert!(is_dangerous_target(&link, &ctx));
        assert!(!is_dangerous_target(&root.join("docs/other.txt").to_string_lossy(), &ctx));
    }

    #[test]
    fn suggestions() {
        let s = |p: &str| dir_suggestion("Read", p).first().and_then(|r| r.rule_content.clone());
        assert_eq!(s("/a/b/c.txt").as_deref(), Some("/a/b/**"));
        assert_eq!(s("/c.txt").as_deref(), Some("/**"));
        assert_eq!(s("c.txt").as_deref(), Some("**"));
        assert_eq!(s(""), None);
        assert_eq!(split_keep_ends("a\nb"), ["a\n", "b"]);
        // Python 3.11 `s.splitlines(keepends=True)`.
        for (text, expect) in [
            ("", vec![]),
            ("x", vec!["x"]),
            ("a\n", vec!["a\n"]),
            ("\n\n", vec!["\n", "\n"]),
            ("a\r\nb", vec!["a\r\n", "b"]),
            ("a\rb", vec!["a\r", "b"]),
            ("\r\n\r", vec!["\r\n", "\r"]),
            ("a\r\r\nb", vec!["a\r", "\r\n", "b"]),
            (
                "a\u{b}b\u{c}c\u{1c}d\u{1d}e\u{1e}f\u{85}g\u{2028}h\u{2029}i",
                vec!["a\u{b}", "b\u{c}", "c\u{1c}", "d\u{1d}", "e\u{1e}", "f\u{85}", "g\u{2028}", "h\u{2029}", "i"],
            ),
            ("a\u{1f}b\u{e}c", vec!["a\u{1f}b\u{e}c"]),
        ] {
            assert_eq!(split_keep_ends(text), expect, "{text:?}");
        }
        assert_eq!(decode_text(b"a\r\nb\rc"), "a\nb\nc");
    }
}
