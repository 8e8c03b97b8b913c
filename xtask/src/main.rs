//! Project automation (`cargo xtask …`).
//!
//! Each task is a module with a `run(args)` function; add a line to [`TASKS`] and a `mod` to add one.

mod bench;
mod interop;
mod paired;
mod reliability;
mod schema;
mod test;
#[cfg(test)]
mod tidy;
// Other tasks (`bench`, `interop`, `reliability`) add `mod <task>;` here and a line in `TASKS`.

use std::path::PathBuf;
use std::process::ExitCode;

/// A task: name, one-line help, entry point (receives the arguments after the task name).
type Task = (&'static str, &'static str, fn(&[String]) -> anyhow::Result<()>);

/// Every task, in `cargo xtask` listing order.
const TASKS: &[Task] = &[
    ("test", "run every workspace test (unit, integration, doc); Redis tiers start their own server", test::run),
    ("schema", "write docs/schemas/*.schema.json; `--check` only verifies they are fresh", schema::run),
    ("interop", "live two-way Redis check with AgentScope Python 2.0.4 (AGENTSCOPE_PYTHON)", interop::run),
    ("bench", "run every benchmark and write docs/benchmarks.md (`--quick`: < 5 min; `--no-python`)", bench::run),
    ("paired", "Rust vs AgentScope Python 2.0.4 in alternating rounds (AGENTSCOPE_PYTHON); `--rounds N`", paired::run),
    (
        "reliability",
        "concurrency, faults, cancellation, hostile input, isolation figures; `--full` writes docs/reliability.md",
        reliability::run,
    ),
    // ---- new tasks go here ----
];

/// The workspace root.
pub(crate) fn project_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

fn usage() {
    eprintln!("usage: cargo xtask <task> [args]\n\ntasks:");
    for (name, help, _) in TASKS {
        eprintln!("  {name:<14}{help}");
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first() else {
        usage();
        return ExitCode::from(2);
    };
    if name == "help" || name == "--help" || name == "-h" {
        usage();
        return ExitCode::SUCCESS;
    }
    let Some((_, _, run)) = TASKS.iter().find(|(n, _, _)| n == name) else {
        eprintln!("unknown task {name:?}");
        usage();
        return ExitCode::from(2);
    };
    match run(&args[1..]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
