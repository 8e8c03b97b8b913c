//! `cargo xtask interop`: a live two-way check that Rust and AgentScope Python 2.0.4 share
//! sessions in one Redis (keys, bytes, TTLs, updates and deletes in both directions).
//!
//! Needs `redis-server` on `PATH` and a Python that imports `agentscope==2.0.4`: set
//! `AGENTSCOPE_PYTHON` to it (default `python3`). Set one up with
//!
//! ```text
//! python3 -m venv .venv-agentscope
//! .venv-agentscope/bin/pip install agentscope==2.0.4 apscheduler redis
//! AGENTSCOPE_PYTHON=.venv-agentscope/bin/python cargo xtask interop
//! ```
//!
//! Without them it prints that it was skipped and succeeds. It runs the `live_interop` test of
//! `as-storage-redis` (which drives `tests/live_interop.py`) and the recorded-fixture `interop`
//! test, so a filter can never select zero tests.

use std::process::Command;

use anyhow::{Context, bail};

use crate::project_root;

const SETUP: &str = "pip install agentscope==2.0.4 apscheduler redis, then set AGENTSCOPE_PYTHON to that python";

fn python() -> String {
    std::env::var("AGENTSCOPE_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".to_owned())
}

/// `Ok(())` when `python` imports agentscope 2.0.4 and redis, else why not.
fn probe(python: &str) -> Result<(), String> {
    let code = "import importlib.metadata as m, redis, agentscope.app.storage; \
                v = m.version('agentscope'); assert v == '2.0.4', 'agentscope ' + v + ' is installed, not 2.0.4'";
    match Command::new(python).args(["-c", code]).output() {
        Err(e) => Err(format!("cannot run {python}: {e}")),
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            Err(err.lines().last().unwrap_or("import failed").to_owned())
        }
    }
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let python = python();
    if let Err(why) = probe(&python) {
        println!("interop: skipped: {python} has no agentscope==2.0.4 ({why}); {SETUP}");
        return Ok(());
    }
    if !on_path("redis-server") {
        println!("interop: skipped: redis-server not found (apt-get install redis-server)");
        return Ok(());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let base = ["test", "-p", "as-storage-redis", "--test", "live_interop", "--test", "interop"];
    eprintln!("$ AGENTSCOPE_PYTHON={python} cargo {} {}", base.join(" "), args.join(" "));
    let status = Command::new(&cargo)
        .args(base)
        .args(args)
        .args(["--", "--nocapture"])
        .env("AGENTSCOPE_PYTHON", &python)
        .current_dir(project_root())
        .status()
        .with_context(|| format!("cannot run {cargo}"))?;
    if !status.success() {
        bail!("the live interop check failed ({status})");
    }
    println!("interop: Rust and AgentScope Python 2.0.4 ({python}) share sessions both ways");
    Ok(())
}
