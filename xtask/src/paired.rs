//! `cargo xtask paired [--rounds N]`: Rust against AgentScope Python 2.0.4 in alternating rounds.
//!
//! `cargo xtask bench` measures Python once, minutes away from the Rust figures it is compared
//! with. On a shared VM the machine's speed drifts by 2x in that time, so a ratio taken across
//! that gap can land on either side of a target. Here every round measures Python
//! (`xtask/bench_python.py`) and then Rust on the same states, one right after the other, and
//! the ratio is taken within each round: drift between rounds cancels out. The report gives the
//! median per-round ratio and the lowest and highest round.
//!
//! * Serialize and parse: `examples/wire_timing` (`as-state`), mean time per operation.
//! * Redis turn (`get_session` + `update_session_state`): `examples/turn_timing`
//!   (`as-storage-redis`), mean time per turn, each side against its own private `redis-server`,
//!   plus the bare `GET`+`SET` of the same record in the same process (the floor). About 100 turns
//!   at 1000 messages (10,000 at 10); sessions 5–10 ran 20 at 1000, where a few slow round trips
//!   weigh more in the mean.
//!
//! Every Rust figure is measured twice per round: on the system allocator (what a library user
//! gets by default) and on mimalloc (what the `agentscope` binary uses), each its own row.
//!
//! On a VM, a loopback round trip between two vCPUs is dominated by waking the other vCPU (about
//! 90 µs here, against 15 µs when client and server share one CPU). `taskset -c 0 cargo xtask
//! paired` runs both sides and their `redis-server`s on one CPU, which shows the figures without
//! that cost (and without any parallelism); the report records the CPU count.
//!
//! Needs `AGENTSCOPE_PYTHON` naming an interpreter with `agentscope==2.0.4`. Prints a Markdown
//! table and writes `target/paired-report.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::json;

use crate::bench::{RedisProcess, SIZES, bench_json_lines, build_load_bench, cargo, load_bench};
use crate::project_root;

/// One round of one figure: Python ms, Rust ms, and the floor's ms (Redis turn only).
type Round = (f64, f64, Option<f64>);

/// The Rust side's global allocators, each measured in every round.
const ALLOCATORS: [&str; 2] = ["system", "mimalloc"];

/// Python iterations per figure and round.
const PY_REPEAT: &str = "40";

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let mut rounds = 6usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = it.next().context("--rounds needs a number")?.parse()?,
            other => bail!("unknown argument {other:?} (expected --rounds N)"),
        }
    }
    let python = std::env::var("AGENTSCOPE_PYTHON")
        .context("AGENTSCOPE_PYTHON must name a Python with agentscope==2.0.4 (see docs/benchmarks.md)")?;
    let root = project_root();
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    // Each example twice: on the system allocator and on mimalloc (the `agentscope` binary's).
    let mut variants = Vec::new();
    for alloc in ALLOCATORS {
        let dir = target.join("paired").join(alloc);
        std::fs::create_dir_all(&dir)?;
        for (package, features, example) in
            [("as-state", "test-utils", "wire_timing"), ("as-storage-redis", "test-utils", "turn_timing")]
        {
            let features =
                if alloc == "mimalloc" { format!("{features},timing-mimalloc") } else { features.to_owned() };
            cargo(&root, &["build", "-q", "--release", "-p", package, "--features", &features, "--example", example])?;
            let built = target.join("release/examples").join(example);
            std::fs::copy(&built, dir.join(example)).with_context(|| format!("copying {}", built.display()))?;
        }
        variants.push((alloc, dir));
    }
    let load_exe = build_load_bench(&root, false)?;

    let tmp = std::env::temp_dir().join(format!("agentscope-paired-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let mut files = Vec::new();
    for n in SIZES {
        let path = tmp.join(format!("state-{n}.json"));
        load_bench(&load_exe, &["dump-state", &n.to_string(), &path.to_string_lossy()])?;
        files.push((n, path));
    }
    let redis = RedisProcess::start(&tmp).context("cannot start redis-server for the Python side")?;

    let mut samples: BTreeMap<(String, String, u64), Vec<Round>> = BTreeMap::new();
    for round in 1..=rounds {
        eprintln!("round {round}/{rounds}");
        let py = python_round(&root, &python, redis.port, &files)?;
        for (n, path) in &files {
            let iters = |budget: u64| (budget / n).max(20).to_string();
            for (alloc, dir) in &variants {
                let ser = timing(&dir.join("wire_timing"), &["ser", &n.to_string(), &iters(2_000_000)])?;
                let parse = timing(&dir.join("wire_timing"), &["parse", &n.to_string(), &iters(600_000)])?;
                let turn_out =
                    run_capture(&dir.join("turn_timing"), &[&n.to_string(), &iters(100_000), &path.to_string_lossy()])?;
                let (turn, floor) = turn_figures(&turn_out).with_context(|| format!("turn_timing said: {turn_out}"))?;
                for (figure, rust, floor) in
                    [("serialize", ser, None), ("parse", parse, None), ("turn_redis", turn, Some(floor))]
                {
                    let py_ms = py
                        .get(&(format!("python_{figure}"), *n))
                        .copied()
                        .with_context(|| format!("bench_python.py gave no python_{figure} for {n} messages"))?;
                    samples.entry((figure.to_owned(), (*alloc).to_owned(), *n)).or_default().push((py_ms, rust, floor));
                }
            }
        }
    }
    drop(redis);
    let _ = std::fs::remove_dir_all(&tmp);

    let mut rows = Vec::new();
    println!(
        "| figure | Rust allocator | messages | Python (median of rounds) | Rust (median of rounds) | ratio: median round | lowest–highest round | Rust / floor (median) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for ((figure, alloc, n), v) in &samples {
        let ratios: Vec<f64> = v.iter().map(|(p, r, _)| p / r).collect();
        let over_floor: Vec<f64> = v.iter().filter_map(|(_, r, f)| f.map(|f| r / f)).collect();
        let (lo, hi) = ratios.iter().fold((f64::MAX, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        let py = median(v.iter().map(|s| s.0).collect());
        let rust = median(v.iter().map(|s| s.1).collect());
        let ratio = median(ratios.clone());
        let floor = (!over_floor.is_empty()).then(|| median(over_floor.clone()));
        println!(
            "| {figure} | {alloc} | {n} | {} | {} | {ratio:.1}x | {lo:.1}x–{hi:.1}x | {} |",
            show_ms(py),
            show_ms(rust),
            floor.map_or_else(|| "–".to_owned(), |f| format!("{f:.2}x"))
        );
        rows.push(json!({
            "figure": figure, "allocator": alloc, "messages": n, "python_ms": py, "rust_ms": rust, "ratio_median": ratio,
            "ratios": ratios, "rust_over_floor": over_floor,
            "rounds": v.iter().map(|(p, r, f)| json!({"python_ms": p, "rust_ms": r, "floor_ms": f})).collect::<Vec<_>>(),
        }));
    }
    let out = target.join("paired-report.json");
    // `taskset -c 0 cargo xtask paired` runs everything (both sides and their redis-servers) on one
    // CPU; the report says how many CPUs the run could use.
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let idle = Some(crate::bench::idle_policy()).filter(|s| !s.is_empty()).unwrap_or_else(|| "unknown".into());
    println!("\n{rounds} rounds; CPUs available to the run: {cpus}; idle policy: {idle}.");
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&json!({"rounds": rounds, "cpus": cpus, "idle": idle, "figures": rows}))?,
    )?;
    eprintln!("xtask paired: wrote {}", out.display());
    Ok(())
}

/// One pass of `bench_python.py`: (scenario, messages) -> median ms.
fn python_round(
    root: &Path,
    python: &str,
    port: u16,
    files: &[(u64, PathBuf)],
) -> anyhow::Result<BTreeMap<(String, u64), f64>> {
    let out = Command::new(python)
        .arg(root.join("xtask/bench_python.py"))
        .arg(port.to_string())
        .arg(PY_REPEAT)
        .args(files.iter().map(|(_, p)| p))
        .stderr(Stdio::inherit())
        .output()
        .context("running bench_python.py")?;
    if !out.status.success() {
        bail!("bench_python.py failed ({})", out.status);
    }
    let mut figures = BTreeMap::new();
    for v in bench_json_lines(&String::from_utf8_lossy(&out.stdout)) {
        if let (Some(s), Some(n), Some(ms)) = (v["scenario"].as_str(), v["messages"].as_u64(), v["median_ms"].as_f64())
        {
            figures.insert((s.to_owned(), n), ms);
        }
    }
    Ok(figures)
}

/// Runs an example and returns what it printed on stderr (where the timing examples report).
fn run_capture(exe: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(exe).args(args).output().with_context(|| format!("running {}", exe.display()))?;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        bail!("{} {} failed ({}): {err}", exe.display(), args.join(" "), out.status);
    }
    Ok(err)
}

/// `wire_timing`'s "…: 134.1µs per op (wall)" in ms.
fn timing(exe: &Path, args: &[&str]) -> anyhow::Result<f64> {
    let out = run_capture(exe, args)?;
    out.lines()
        .find_map(|l| l.split(": ").nth(1)?.strip_suffix(" per op (wall)").and_then(duration_ms))
        .with_context(|| format!("wire_timing said: {out}"))
}

/// `turn_timing`'s "N messages: X per turn, bare GET+SET Y (wall), …" as (turn ms, floor ms).
fn turn_figures(out: &str) -> Option<(f64, f64)> {
    let line = out.lines().find(|l| l.contains(" per turn, bare GET+SET "))?;
    let (_, rest) = line.split_once(": ")?;
    let (turn, rest) = rest.split_once(" per turn, bare GET+SET ")?;
    let (floor, _) = rest.split_once(" (wall)")?;
    Some((duration_ms(turn)?, duration_ms(floor)?))
}

/// A `Duration`'s `Debug` form ("1.2ms", "345.6µs", "789ns", "1.5s") in milliseconds.
fn duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let scale = match unit {
        "ns" => 1e-6,
        "µs" | "us" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        _ => return None,
    };
    Some(v * scale)
}

/// Milliseconds, or microseconds below 0.1 ms.
fn show_ms(ms: f64) -> String {
    if ms < 0.1 { format!("{:.2} µs", ms * 1e3) } else { format!("{ms:.3} ms") }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_example_lines_parse() {
        assert_eq!(duration_ms("1.5ms"), Some(1.5));
        assert_eq!(duration_ms("250µs"), Some(0.25));
        assert_eq!(duration_ms("2s"), Some(2000.0));
        assert_eq!(duration_ms("abc"), None);
        let out = "median us: get_session 138\nbare GET alone 136.34µs\n10 messages: 360.5µs per turn, bare GET+SET 261.5µs (wall), ratio 1.38\n";
        assert_eq!(turn_figures(out), Some((0.3605, 0.2615)));
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(show_ms(0.0125), "12.50 µs");
        assert_eq!(show_ms(2.5), "2.500 ms");
    }
}
