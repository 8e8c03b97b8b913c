//! `cargo xtask test`: every test of the workspace.
//!
//! Runs `cargo test --workspace --all-targets` (unit, integration, the xtask tidy and schema
//! checks) and then `cargo test --workspace --doc`. Tests that need Redis start their own
//! `redis-server` or print that they skipped. Extra arguments are passed to both runs.

use std::process::Command;

use anyhow::{Context, bail};

use crate::project_root;

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    cargo(&["test", "--workspace", "--all-targets"], args)?;
    cargo(&["test", "--workspace", "--doc"], args)?;
    eprintln!("xtask test: all tests passed");
    Ok(())
}

fn cargo(base: &[&str], extra: &[String]) -> anyhow::Result<()> {
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
