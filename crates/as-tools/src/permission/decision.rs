//! `PermissionDecision` and what a tool sees while it is checked.

use std::path::{Path, PathBuf};

use as_message::{JsonMap, PermissionBehavior, PermissionContext, PermissionMode, PermissionRule};

/// The engine's answer for one call (never persisted).
#[derive(Clone, Debug, PartialEq)]
pub struct PermissionDecision {
    /// Allow, deny, ask (or passthrough, from a tool only).
    pub behavior: PermissionBehavior,
    /// The text shown to the user (ASK) or the model (DENY, as the `denied` tool result).
    pub message: String,
    /// Why (e.g. `Rule: rm -rf *`, `Mode: default`).
    pub decision_reason: Option<String>,
    /// The input to run with (an allow rule returns the input unchanged).
    pub updated_input: Option<JsonMap>,
    /// Rules to offer the user with an ASK.
    pub suggested_rules: Option<Vec<PermissionRule>>,
    /// A safety ASK that allow rules cannot override (and `dont_ask` mode denies); named after
    /// 2.0.4's flag, though `bypass` mode still allows it, as in 2.0.4.
    pub bypass_immune: bool,
}

impl PermissionDecision {
    fn with(behavior: PermissionBehavior, message: impl Into<String>) -> Self {
        Self {
            behavior,
            message: message.into(),
            decision_reason: None,
            updated_input: None,
            suggested_rules: None,
            bypass_immune: false,
        }
    }

    /// An ALLOW.
    pub fn allow(message: impl Into<String>) -> Self {
        Self::with(PermissionBehavior::Allow, message)
    }

    /// A DENY.
    pub fn deny(message: impl Into<String>) -> Self {
        Self::with(PermissionBehavior::Deny, message)
    }

    /// An ASK.
    pub fn ask(message: impl Into<String>) -> Self {
        Self::with(PermissionBehavior::Ask, message)
    }

    /// A PASSTHROUGH (the tool has no opinion).
    pub fn passthrough(message: impl Into<String>) -> Self {
        Self::with(PermissionBehavior::Passthrough, message)
    }

    /// Sets the reason.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.decision_reason = Some(reason.into());
        self
    }

    /// Marks the ASK as a safety check: allow rules cannot override it, `dont_ask` mode denies it
    /// (`bypass` mode still allows it, as in 2.0.4).
    pub fn immune(mut self) -> Self {
        self.bypass_immune = true;
        self
    }

    /// Sets the suggestions.
    pub fn suggestions(mut self, rules: Vec<PermissionRule>) -> Self {
        self.suggested_rules = Some(rules);
        self
    }

    /// The agent's decision for a call the user already confirmed (state `allowed`); the engine
    /// is not consulted (2.0.4: `Already allowed by user confirmation.`).
    pub fn already_allowed() -> Self {
        Self::allow("Already allowed by user confirmation.")
    }

    /// True for ALLOW.
    pub fn is_allow(&self) -> bool {
        self.behavior == PermissionBehavior::Allow
    }

    /// True for DENY.
    pub fn is_deny(&self) -> bool {
        self.behavior == PermissionBehavior::Deny
    }

    /// True for ASK or PASSTHROUGH (the agent asks the user for both).
    pub fn needs_confirmation(&self) -> bool {
        matches!(self.behavior, PermissionBehavior::Ask | PermissionBehavior::Passthrough)
    }
}

/// What a tool's permission hooks see: the session's permission context and the process
/// working directory (the first allowed working directory).
#[derive(Clone, Copy, Debug)]
pub struct PermissionCheckContext<'a> {
    /// Mode, rules and extra working directories.
    pub permission: &'a PermissionContext,
    /// The main working directory (2.0.4: `os.getcwd()`).
    pub cwd: &'a Path,
}

impl<'a> PermissionCheckContext<'a> {
    /// Builds one.
    pub fn new(permission: &'a PermissionContext, cwd: &'a Path) -> Self {
        Self { permission, cwd }
    }

    /// The session's mode.
    pub fn mode(&self) -> PermissionMode {
        self.permission.mode
    }

    /// `path` (relative to `cwd` when relative) made absolute, `~` expanded.
    pub fn absolute(&self, path: &str) -> PathBuf {
        let p = expand_user(path);
        if p.is_absolute() { p } else { self.cwd.join(p) }
    }

    /// Whether `path` lies inside `cwd` or one of the extra working directories, after
    /// expanding `~` and resolving `..` and symlinks on both sides (2.0.4
    /// `_path_in_allowed_working_path`). A path that does not exist yet is resolved through its
    /// deepest existing ancestor.
    pub fn is_in_working_dirs(&self, path: &str) -> bool {
        let target = real_path(&self.absolute(path));
        self.working_dirs().iter().any(|d| target.starts_with(d))
    }

    /// Like [`Self::is_in_working_dirs`], but strictly below one: not a working directory itself
    /// (what a removal or a move may take away).
    pub fn is_below_working_dirs(&self, path: &str) -> bool {
        let target = real_path(&self.absolute(path));
        self.working_dirs().iter().any(|d| target != *d && target.starts_with(d))
    }

    /// The working directories, resolved.
    fn working_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![real_path(self.cwd)];
        for key in self.permission.working_directories.keys() {
            dirs.push(real_path(&self.absolute(key)));
        }
        dirs
    }
}

/// `os.path.expanduser`.
pub(crate) fn expand_user(path: &str) -> PathBuf {
    if (path == "~" || path.starts_with("~/"))
        && let Some(home) = std::env::var_os("HOME")
    {
        let mut p = PathBuf::from(home);
        if path.len() > 2 {
            p.push(&path[2..]);
        }
        return p;
    }
    PathBuf::from(path)
}

/// `os.path.realpath`: walks the components, resolving `.`, `..` and every symlink met on the way
/// (also inside a missing tail), like Python's non-strict `realpath`. A relative path is taken
/// from the process's current directory first, as Python does (a relative working directory such
/// as `.` must not resolve to `/`, which would put every path "inside" it).
pub(crate) fn real_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut budget = 40u32;
    if path.is_relative()
        && let Ok(cwd) = std::env::current_dir()
    {
        resolve_into(&mut out, &cwd, &mut budget);
    }
    resolve_into(&mut out, path, &mut budget);
    out
}

fn resolve_into(out: &mut PathBuf, path: &Path, budget: &mut u32) {
    use std::path::Component;
    for comp in path.components() {
        match comp {
            Component::RootDir => *out = PathBuf::from("/"),
            Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if let Ok(target) = std::fs::read_link(&*out) {
                    if *budget == 0 {
                        continue;
                    }
                    *budget -= 1;
                    out.pop();
                    resolve_into(out, &target, budget);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_working_directory_is_not_the_root() {
        let cwd = std::env::current_dir().unwrap();
        let permission = PermissionContext::default();
        for dir in [".", "./", "sub/.."] {
            let ctx = PermissionCheckContext::new(&permission, Path::new(dir));
            assert!(!ctx.is_in_working_dirs("/etc/passwd"), "cwd {dir:?}");
            assert!(!ctx.is_in_working_dirs("../elsewhere/x.rs"), "cwd {dir:?}");
            assert!(ctx.is_in_working_dirs("inside.rs"), "cwd {dir:?}");
            assert!(ctx.is_in_working_dirs(&cwd.join("new/file.rs").to_string_lossy()), "cwd {dir:?}");
        }
        assert_eq!(real_path(Path::new(".")), real_path(&cwd));
    }
}
