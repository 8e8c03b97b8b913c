//! `cargo xtask test`: every test of the workspace.
//!
//! Runs `cargo test --workspace --all-targets` (unit, integration, the xtask tidy and schema
//! checks) and then `cargo test --workspace --doc`, both with `--no-fail-fast`; fails if either failed. Tests that need Redis start their own
//! `redis-server` or print that they skipped. Extra arguments are passed to both runs.

use std::process::Command;

use anyhow::{Context, bail};

use crate::project_root;

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    // --no-fail-fast: report every failing test binary, not only the first.
    let all = cargo(&["test", "--workspace", "--all-targets", "--no-fail-fast"], args);
    let doc = cargo(&["test", "--workspace", "--doc", "--no-fail-fast"], args);
    all?;
    doc?;
    eprintln!("xtask test: all tests passed");
    Ok(())
}

/// Runs `cargo <base> <extra>` in the project root (echoing the command); fails when cargo does.
pub(crate) fn cargo(base: &[&str], extra: &[String]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("$ cargo {} {}", base.join(" "), extra.join(" "));
    let status = Command::new(&cargo)
        .args(base)
        .args(extra)
        .current_dir(project_root())
        .status()
        .with_context(|| format!("cannot run {cargo}"))?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", base.join(" "));
    }
    Ok(())
}
