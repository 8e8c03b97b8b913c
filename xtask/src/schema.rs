//! `cargo xtask schema [--check]`: the committed JSON Schemas in `docs/schemas/`.
//!
//! The registry is `as_cli::schemas::SCHEMAS` (the `agentscope schema` command prints the same text).
//! Write mode rewrites only stale files; `--check` writes nothing and fails naming each stale,
//! missing or orphan file.

use std::path::Path;

use anyhow::{Context, bail};

use crate::project_root;

/// What to do with a stale file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Rewrite stale files.
    Write,
    /// Only report.
    Check,
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let mode = match args {
        [] => Mode::Write,
        [a] if a == "--check" => Mode::Check,
        _ => bail!("usage: cargo xtask schema [--check]"),
    };
    generate(&project_root().join("docs/schemas"), mode)
}

/// Brings `dir` in line with the registry (or, in check mode, reports how it differs).
pub(crate) fn generate(dir: &Path, mode: Mode) -> anyhow::Result<()> {
    if mode == Mode::Write {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut problems = Vec::new();
    let mut expected_files = Vec::new();
    for entry in as_cli::schemas::SCHEMAS {
        let file = entry.file_name();
        let path = dir.join(&file);
        let want = as_cli::schemas::render(entry);
        let have = std::fs::read_to_string(&path).ok().map(|s| s.replace("\r\n", "\n"));
        expected_files.push(file.clone());
        if have.as_deref() == Some(want.as_str()) {
            eprintln!("Up-to-date: docs/schemas/{file}");
            continue;
        }
        match mode {
            Mode::Write => {
                std::fs::write(&path, &want).with_context(|| format!("cannot write {}", path.display()))?;
                eprintln!("Updating: docs/schemas/{file}");
            }
            Mode::Check => {
                let why = match &have {
                    None => "missing".to_owned(),
                    Some(h) => format!("stale\n{}", first_difference(h, &want)),
                };
                problems.push(format!("docs/schemas/{file}: {why}"));
            }
        }
    }
    if let Ok(read) = std::fs::read_dir(dir) {
        for item in read.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            if name.ends_with(".schema.json") && !expected_files.contains(&name) {
                problems.push(format!("docs/schemas/{name}: orphan (no registry entry produces it)"));
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    bail!("{}\nrun `cargo xtask schema` and commit the result", problems.join("\n"))
}

/// A short diff: the first differing line of each side.
fn first_difference(have: &str, want: &str) -> String {
    for (i, (h, w)) in have.lines().zip(want.lines()).enumerate() {
        if h != w {
            return format!("  line {}:\n  - {h}\n  + {w}", i + 1);
        }
    }
    format!("  length differs: {} lines committed, {} generated", have.lines().count(), want.lines().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_fresh() {
        let mode = if std::env::var_os("UPDATE_SCHEMAS").is_some() { Mode::Write } else { Mode::Check };
        if let Err(e) = generate(&project_root().join("docs/schemas"), mode) {
            panic!("{e:#}\n(or run the tests with UPDATE_SCHEMAS=1)");
        }
    }

    #[test]
    fn check_names_the_stale_file_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), Mode::Write).unwrap();
        let victim = dir.path().join("msg.schema.json");
        std::fs::write(&victim, "{}\n").unwrap();
        std::fs::write(dir.path().join("old.schema.json"), "{}\n").unwrap();
        let err = format!("{:#}", generate(dir.path(), Mode::Check).unwrap_err());
        assert!(err.contains("docs/schemas/msg.schema.json: stale"), "{err}");
        assert!(err.contains("old.schema.json: orphan"), "{err}");
        assert!(!err.contains("agent-state.schema.json"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "{}\n", "check mode wrote nothing");
        std::fs::remove_file(dir.path().join("old.schema.json")).unwrap();
        generate(dir.path(), Mode::Write).unwrap();
        generate(dir.path(), Mode::Check).unwrap();
    }
}
