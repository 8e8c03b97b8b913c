//! Tidy checks run as ordinary tests: the crate dependency DAG of `docs/architecture.md`.
//!
//! Allowed edges between `as-*` crates (style.md §2):
//! * `as-message` is a leaf; `as-state → as-message`; `as-storage → as-state, as-message`;
//!   `as-model → as-message`; `as-tools → as-state, as-message` (extension: the tool context is state); `as-agent → model, tools, storage, state, message`.
//! * A backend crate `as-<layer>-<backend>` depends on its layer crate (and on what that layer may use).
//! * Only `as-cli`, `as-tests` (the `tests/` package), `xtask` and examples may depend on backend crates
//!   or on `as-agent`; they may depend on anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::project_root;

/// Direct edges allowed for each layer crate.
const LAYERS: &[(&str, &[&str])] = &[
    ("as-message", &[]),
    ("as-state", &["as-message"]),
    ("as-storage", &["as-state", "as-message"]),
    ("as-model", &["as-message"]),
    // Deliberate extension of style.md §2: tools read and write `ToolContext`/`TaskContext`,
    // which are part of `AgentState` (see docs/architecture.md).
    ("as-tools", &["as-state", "as-message"]),
    ("as-agent", &["as-model", "as-tools", "as-storage", "as-state", "as-message"]),
];

/// Packages that may depend on anything.
const APPLICATIONS: &[&str] = &["as-cli", "as-tests", "xtask"];

fn layer_deps(name: &str) -> Option<&'static [&'static str]> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

/// Everything `name` may depend on, transitively.
fn allowed_closure(name: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<String> = layer_deps(name).unwrap_or(&[]).iter().map(|s| (*s).to_owned()).collect();
    while let Some(d) = stack.pop() {
        if out.insert(d.clone()) {
            stack.extend(layer_deps(&d).unwrap_or(&[]).iter().map(|s| (*s).to_owned()));
        }
    }
    out
}

/// The layer crate of a backend crate (`as-storage-redis` → `as-storage`), if `name` is one.
fn backend_layer(name: &str) -> Option<&'static str> {
    LAYERS.iter().map(|(n, _)| *n).find(|layer| name.strip_prefix(layer).is_some_and(|rest| rest.starts_with('-')))
}

/// Why the edge `from → to` is not allowed, or `None` when it is.
pub(crate) fn edge_violation(from: &str, to: &str) -> Option<String> {
    if APPLICATIONS.contains(&from) || from.starts_with("example") {
        return None;
    }
    if !to.starts_with("as-") {
        return None;
    }
    let allowed = if layer_deps(from).is_some() {
        allowed_closure(from)
    } else if let Some(layer) = backend_layer(from) {
        let mut a = allowed_closure(layer);
        a.insert(layer.to_owned());
        a
    } else {
        return Some(format!(
            "{from} is not a known crate of the DAG; add it to xtask/src/tidy.rs and docs/architecture.md"
        ));
    };
    (!allowed.contains(to)).then(|| format!("{from} → {to} is not an allowed edge (allowed: {allowed:?})"))
}

/// The `as-*` dependencies (normal, dev, build, target-specific) declared in a manifest.
pub(crate) fn manifest_deps(text: &str) -> (Option<String>, BTreeSet<String>) {
    let mut name = None;
    let mut deps = BTreeSet::new();
    let mut section = String::new();
    for raw in text.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').trim().to_owned();
            // `[dependencies.as-foo]` form.
            for table in ["dependencies.", "dev-dependencies.", "build-dependencies."] {
                if let Some(idx) = section.find(table) {
                    deps.insert(section[idx + table.len()..].trim_matches('"').to_owned());
                }
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = key.trim();
        if section == "package" && key == "name" {
            name = Some(value.trim().trim_matches('"').to_owned());
        }
        let is_dep_table = section.ends_with("dependencies") && !section.starts_with("workspace");
        if is_dep_table {
            let dep = key.split('.').next().unwrap_or(key).trim().trim_matches('"');
            deps.insert(dep.to_owned());
        }
    }
    deps.retain(|d| d.starts_with("as-"));
    (name, deps)
}

fn member_manifests(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("xtask/Cargo.toml"), root.join("tests/Cargo.toml")];
    if let Ok(read) = std::fs::read_dir(root.join("crates")) {
        let mut crates: Vec<PathBuf> = read.flatten().map(|e| e.path().join("Cargo.toml")).collect();
        crates.sort();
        out.extend(crates);
    }
    out.retain(|p| p.exists());
    out
}

/// Every edge of the workspace, by package name.
pub(crate) fn workspace_edges(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for path in member_manifests(root) {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let (name, deps) = manifest_deps(&text);
        let name = name.unwrap_or_else(|| path.display().to_string());
        out.insert(name, deps);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_dag_has_only_allowed_edges() {
        let edges = workspace_edges(&project_root());
        assert!(edges.contains_key("as-message") && edges.contains_key("as-state"), "found {edges:?}");
        let mut bad = Vec::new();
        for (from, deps) in &edges {
            for to in deps {
                if to == from {
                    continue;
                }
                if let Some(why) = edge_violation(from, to) {
                    bad.push(why);
                }
            }
        }
        assert!(bad.is_empty(), "dependency DAG violations (see docs/architecture.md):\n{}", bad.join("\n"));
    }

    #[test]
    fn edge_rules_examples() {
        let check = |from: &str, to: &str, ok: bool| {
            assert_eq!(edge_violation(from, to).is_none(), ok, "{from} → {to}");
        };
        check("as-state", "as-message", true);
        check("as-message", "as-state", false);
        check("as-storage", "as-message", true);
        check("as-storage", "as-model", false);
        check("as-model", "as-storage", false);
        check("as-tools", "as-state", true);
        check("as-tools", "as-storage", false);
        check("as-agent", "as-storage", true);
        check("as-storage", "as-agent", false);
        check("as-agent", "as-storage-redis", false);
        check("as-storage-redis", "as-storage", true);
        check("as-storage-redis", "as-state", true);
        check("as-storage-redis", "as-model", false);
        check("as-model-openai", "as-model", true);
        check("as-model-openai", "as-storage", false);
        check("as-cli", "as-storage-redis", true);
        check("as-tests", "as-agent", true);
        check("as-mystery", "as-message", false);
        check("as-message", "serde", true);
    }

    #[test]
    fn manifest_parsing() {
        let text = r#"
[package]
name = "as-x"
[dependencies]
as-message.workspace = true
as-state = { workspace = true }
serde.workspace = true # as-fake in a comment
[dev-dependencies]
as-storage = { workspace = true, features = ["conformance"] }
[dependencies.as-tools]
workspace = true
"#;
        let (name, deps) = manifest_deps(text);
        assert_eq!(name.as_deref(), Some("as-x"));
        let want: BTreeSet<String> =
            ["as-message", "as-state", "as-storage", "as-tools"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(deps, want);
    }
}
