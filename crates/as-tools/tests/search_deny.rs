//! Glob and Grep walks honour the Read, Grep and Glob deny rules below the directory they search:
//! the permission engine allows a search of `/home/u` (bypass or explore mode, or an allow rule on
//! it), yet nothing under a denied `/home/u/.ssh` (or a denied single file) comes back, and the
//! result names none of the skipped paths.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use as_message::{PermissionBehavior, PermissionContext, PermissionMode, PermissionRule, ToolResultState};
use as_tools::builtin::builtin_tools;
use as_tools::{PermissionEngine, SharedToolState, ToolCallContext, ToolOutput, Toolkit};
use futures::StreamExt;
use serde_json::{Value, json};

/// A home directory with a private key under `.ssh`, a secret file, a link to the key, and notes.
struct Home {
    _dir: tempfile::TempDir,
    root: PathBuf,
    toolkit: Toolkit,
}

impl Home {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".ssh/old")).unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join(".ssh/id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
        std::fs::write(root.join(".ssh/old/id_dsa"), "-----BEGIN DSA PRIVATE KEY-----\n").unwrap();
        std::fs::write(root.join("secret.txt"), "BEGIN secret\n").unwrap();
        std::fs::write(root.join("docs/notes.txt"), "BEGIN notes\n").unwrap();
        std::os::unix::fs::symlink("../.ssh/id_rsa", root.join("docs/key.txt")).unwrap();
        let toolkit = builtin_tools().into_iter().fold(Toolkit::new(), |k, t| k.with(t));
        Self { _dir: dir, root, toolkit }
    }

    fn top(&self) -> String {
        self.root.display().to_string()
    }

    fn p(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// Deny rules under `tool` on `.ssh/**` and `secret.txt`.
    fn denying(&self, tool: &str, mode: PermissionMode) -> PermissionContext {
        let mut perm = PermissionContext { mode, ..PermissionContext::default() };
        for path in [format!("{}/**", self.p(".ssh")), self.p("secret.txt")] {
            PermissionEngine::add_rule(
                &mut perm,
                PermissionRule::new(tool, Some(path), PermissionBehavior::Deny, "userSettings"),
            );
        }
        perm
    }

    /// The engine's decision (which must allow), then the call's text.
    async fn run(&self, perm: Option<&PermissionContext>, name: &str, input: Value) -> String {
        let tool = self.toolkit.get_tool(name).unwrap();
        if let Some(perm) = perm {
            let decision = PermissionEngine::new(&self.root)
                .check_permission(perm, tool.as_ref(), input.as_object().unwrap())
                .await;
            assert_eq!(decision.behavior, PermissionBehavior::Allow, "{name} {input}: {}", decision.message);
        }
        let mut ctx = ToolCallContext::new("call", SharedToolState::default(), &self.root);
        if let Some(perm) = perm {
            ctx = ctx.with_permission(Arc::new(perm.clone()));
        }
        let out: Vec<ToolOutput> = self.toolkit.call(name, &input.to_string(), ctx).collect().await;
        match out.last() {
            Some(ToolOutput::Response(r)) => {
                assert_eq!(r.state, ToolResultState::Success, "{}", r.text());
                r.text()
            }
            other => panic!("no final response: {other:?}"),
        }
    }
}

fn allow_on(perm: &mut PermissionContext, tool: &str, rule: String) {
    PermissionEngine::add_rule(perm, PermissionRule::new(tool, Some(rule), PermissionBehavior::Allow, "session"));
}

#[tokio::test]
async fn without_deny_rules_the_searches_find_everything() {
    let home = Home::new();
    let grep = json!({"pattern": "BEGIN", "path": home.top(), "output_mode": "content"});
    let everything = [
        format!("{}:1:-----BEGIN OPENSSH PRIVATE KEY-----", home.p(".ssh/id_rsa")),
        format!("{}:1:-----BEGIN DSA PRIVATE KEY-----", home.p(".ssh/old/id_dsa")),
        format!("{}:1:-----BEGIN OPENSSH PRIVATE KEY-----", home.p("docs/key.txt")),
        format!("{}:1:BEGIN notes", home.p("docs/notes.txt")),
        format!("{}:1:BEGIN secret", home.p("secret.txt")),
    ]
    .join("\n");
    assert_eq!(home.run(None, "Grep", grep.clone()).await, everything, "no permission context");
    let bypass = PermissionContext { mode: PermissionMode::Bypass, ..PermissionContext::default() };
    assert_eq!(home.run(Some(&bypass), "Grep", grep).await, everything, "no deny rules");
    let glob = home.run(Some(&bypass), "Glob", json!({"pattern": "**/*", "path": home.top()})).await;
    let mut listed: Vec<&str> = glob.lines().collect();
    listed.sort_unstable();
    let mut expected = [
        home.p(".ssh/id_rsa"),
        home.p(".ssh/old/id_dsa"),
        home.p("docs/key.txt"),
        home.p("docs/notes.txt"),
        home.p("secret.txt"),
    ];
    expected.sort_unstable();
    assert_eq!(listed, expected);
}

#[tokio::test]
async fn searches_skip_what_a_deny_rule_names_in_every_mode_that_allows_them() {
    let home = Home::new();
    let note = "\n\n[3 paths skipped by deny rules]"; // .ssh, secret.txt, docs/key.txt (-> .ssh/id_rsa)
    for rule_tool in ["Read", "Grep", "Glob"] {
        let mut setups = Vec::new();
        for mode in [PermissionMode::Bypass, PermissionMode::Explore] {
            setups.push((format!("{mode:?}"), home.denying(rule_tool, mode)));
        }
        let mut allowed = home.denying(rule_tool, PermissionMode::Default);
        allow_on(&mut allowed, "Grep", format!("{}/**", home.top()));
        allow_on(&mut allowed, "Glob", format!("{}/**", home.top()));
        setups.push(("allow rule on the root".to_owned(), allowed));
        for (what, perm) in &setups {
            let why = format!("{rule_tool} deny rules, {what}");
            let grep = json!({"pattern": "BEGIN", "path": home.top(), "output_mode": "content"});
            assert_eq!(
                home.run(Some(perm), "Grep", grep).await,
                format!("{}:1:BEGIN notes{note}", home.p("docs/notes.txt")),
                "{why}"
            );
            for mode in ["files_with_matches", "count"] {
                let grep = json!({"pattern": "PRIVATE|secret", "path": home.top(), "output_mode": mode});
                assert_eq!(
                    home.run(Some(perm), "Grep", grep).await,
                    format!("No matches found for pattern: PRIVATE|secret{note}"),
                    "{why}, {mode}"
                );
            }
            let glob = home.run(Some(perm), "Glob", json!({"pattern": "**/*", "path": home.top()})).await;
            assert_eq!(glob, format!("{}{note}", home.p("docs/notes.txt")), "{why}");
            // Spelled with `..`: matched in normal form.
            let dotted = format!("{}/..", home.p("docs"));
            let glob = home.run(Some(perm), "Glob", json!({"pattern": "**/id_*", "path": dotted})).await;
            assert_eq!(glob, format!("No files found matching pattern: **/id_*{note}"), "{why}");
        }
    }
}

#[tokio::test]
async fn a_search_starting_at_a_denied_path_finds_nothing() {
    let home = Home::new();
    // Read deny rules are not the engine's business for Grep and Glob: the walk applies them.
    let perm = home.denying("Read", PermissionMode::Bypass);
    let one = "\n\n[1 path skipped by deny rules]";
    for (path, pattern) in [(home.p(".ssh"), "BEGIN"), (home.p(".ssh/old"), "BEGIN"), (home.p("secret.txt"), "secret")]
    {
        let grep = json!({"pattern": pattern, "path": path, "output_mode": "content"});
        assert_eq!(home.run(Some(&perm), "Grep", grep).await, format!("No matches found for pattern: {pattern}{one}"));
    }
    let glob = home.run(Some(&perm), "Glob", json!({"pattern": format!("{}/*", home.p(".ssh"))})).await;
    assert_eq!(glob, format!("No files found matching pattern: {}/*{one}", home.p(".ssh")));
    let grep = json!({"pattern": "BEGIN", "path": home.p("docs/key.txt"), "output_mode": "content"});
    assert_eq!(home.run(Some(&perm), "Grep", grep).await, format!("No matches found for pattern: BEGIN{one}"));
}

#[tokio::test]
async fn relative_deny_rules_hold_for_the_walk_from_the_working_directory() {
    let home = Home::new();
    let mut perm = PermissionContext { mode: PermissionMode::Bypass, ..PermissionContext::default() };
    PermissionEngine::add_rule(
        &mut perm,
        PermissionRule::new("Grep", Some(".ssh/**".into()), PermissionBehavior::Deny, "userSettings"),
    );
    // A direct search of `.ssh` is denied by the engine; a search of the working directory skips
    // it, and the link into it (whose real path, made relative, is `.ssh/id_rsa`).
    let grep = json!({"pattern": "PRIVATE", "output_mode": "files_with_matches"});
    let text = home.run(Some(&perm), "Grep", grep).await;
    assert_eq!(text, "No matches found for pattern: PRIVATE\n\n[2 paths skipped by deny rules]");
}
