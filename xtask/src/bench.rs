//! `cargo xtask bench [--quick] [--no-python]`: every benchmark, one report.
//!
//! 1. Runs the criterion benches of every crate (`--quick` passes criterion's `--quick`).
//! 2. Runs the load bench (`tests/benches/load.rs`) once per figure, each in a fresh process:
//!    turns/second at 1/16/64/256 concurrent sessions on SQLite and Redis, a full runner turn on
//!    each store, peak RSS of 1000 parked sessions and of one reply over a 1000-message state.
//! 3. With `AGENTSCOPE_PYTHON` naming an interpreter that has `agentscope==2.0.4`
//!    (`pip install agentscope==2.0.4 apscheduler redis`), measures the same state shapes in
//!    Python (`xtask/bench_python.py`) against the same kind of private Redis; otherwise the
//!    report says the comparison was skipped.
//! 4. Writes `docs/benchmarks.md` (tables with medians, spread and ratios) and
//!    `target/bench-report.json` (everything, machine-readable).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::project_root;

/// The criterion benches: (package, bench target).
const CRITERION: &[(&str, &str)] = &[
    ("as-state", "state"),
    ("as-storage", "memory_turn"),
    ("as-storage-sqlite", "turn"),
    ("as-storage-redis", "turn"),
    ("as-tools", "tools"),
    ("as-agent", "agent"),
    ("as-model-openai", "stream_overhead"),
    ("as-tests", "agent_turn"),
];

pub(crate) const SIZES: [u64; 3] = [10, 100, 1000];

/// Python 2.0.4 figures measured on this kind of machine (from the issues), used when no live
/// Python is available: (scenario, messages) -> ms.
const PY_REFERENCE: &[(&str, u64, f64)] = &[
    ("python_serialize", 1000, 1.4),
    ("python_parse", 1000, 9.4),
    ("python_turn_redis", 10, 0.72),
    ("python_turn_redis", 100, 2.75),
    ("python_turn_redis", 1000, 23.0),
];

struct Opts {
    quick: bool,
    python: bool,
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let mut opts = Opts { quick: false, python: true };
    for a in args {
        match a.as_str() {
            "--quick" => opts.quick = true,
            "--no-python" => opts.python = false,
            other => bail!("unknown argument {other:?} (expected --quick, --no-python)"),
        }
    }
    let started = Instant::now();
    let since = SystemTime::now();
    let root = project_root();

    for (pkg, bench) in CRITERION {
        let mut a = vec!["bench", "-q", "-p", pkg, "--bench", bench, "--"];
        if opts.quick {
            a.push("--quick");
        }
        cargo(&root, &a).with_context(|| format!("criterion bench {pkg}/{bench}"))?;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let criterion = collect_criterion(&target.join("criterion"), since)?;

    // Every load figure on both allocators: the system one (a library user's default) and
    // mimalloc (the `agentscope` binary's). Both builds first, so no build runs between figures.
    let load_exe = build_load_bench(&root, false)?;
    let load_exes = [load_exe.clone(), build_load_bench(&root, true)?];
    let mut load = Vec::new();
    let secs = if opts.quick { "0.5" } else { "2" };
    let levels: &[&str] = if opts.quick { &["1", "64"] } else { &["1", "16", "64", "256"] };
    let iters = if opts.quick { "10" } else { "40" };
    for exe in &load_exes {
        for store in ["sqlite", "redis"] {
            for sessions in levels {
                for n in SIZES {
                    load.extend(load_bench(exe, &["throughput", store, sessions, &n.to_string(), secs])?);
                }
            }
        }
        for store in ["memory", "sqlite", "redis"] {
            for n in SIZES {
                load.extend(load_bench(exe, &["runner", store, &n.to_string(), iters])?);
            }
        }
        load.extend(load_bench(exe, &["rss-parked", "1000"])?);
        load.extend(load_bench(exe, &["rss-reply", "1000"])?);
    }

    let python = if opts.python {
        python_side(&root, &load_exe, opts.quick)?
    } else {
        Err("disabled with --no-python".to_owned())
    };

    let report = json!({
        "command": format!("cargo xtask bench{}", if opts.quick { " --quick" } else { "" }),
        "machine": machine(),
        "duration_s": started.elapsed().as_secs_f64(),
        "criterion": criterion,
        "load": load,
        "python": match &python { Ok(v) => json!({"ran": true, "figures": v}), Err(why) => json!({"ran": false, "why": why}) },
    });
    let out = target.join("bench-report.json");
    std::fs::write(&out, serde_json::to_string_pretty(&report)?)?;
    let doc = root.join("docs/benchmarks.md");
    let analysis = std::fs::read_to_string(&doc).ok().and_then(|old| kept_analysis(&old));
    let md = with_analysis(render(&report), analysis.as_deref());
    std::fs::write(&doc, md)?;
    eprintln!("xtask bench: wrote docs/benchmarks.md and {} in {:.0?}", out.display(), started.elapsed());
    Ok(())
}

pub(crate) fn cargo(root: &Path, args: &[&str]) -> anyhow::Result<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("$ cargo {}", args.join(" "));
    let out = Command::new(&cargo)
        .args(args)
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {cargo}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!("`cargo {}` failed ({})\n{stdout}", args.join(" "), out.status);
    }
    Ok(stdout)
}

pub(crate) fn bench_json_lines(stdout: &str) -> Vec<Value> {
    stdout.lines().filter_map(|l| l.strip_prefix("BENCH_JSON ")).filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Builds the load bench and returns its executable (run directly: no cargo lock held while measuring).
/// `mimalloc` builds it with `--features timing-mimalloc` (the `agentscope` binary's allocator);
/// the two builds are different executables, so both can be kept and run.
pub(crate) fn build_load_bench(root: &Path, mimalloc: bool) -> anyhow::Result<PathBuf> {
    let mut args = vec!["bench", "-q", "-p", "as-tests", "--bench", "load", "--no-run", "--message-format=json"];
    if mimalloc {
        args.extend(["--features", "timing-mimalloc"]);
    }
    let out = cargo(root, &args)?;
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == "load")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .context("cargo did not report the load bench executable")
}

pub(crate) fn load_bench(exe: &Path, args: &[&str]) -> anyhow::Result<Vec<Value>> {
    eprintln!("$ load {}", args.join(" "));
    let out = Command::new(exe)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        bail!("load bench {} failed ({})", args.join(" "), out.status);
    }
    let figures = bench_json_lines(&String::from_utf8_lossy(&out.stdout));
    for f in &figures {
        eprintln!("  {f}");
    }
    Ok(figures)
}

/// Every criterion result written since `since`: group, function, value, median and spread (ns).
fn collect_criterion(dir: &Path, since: SystemTime) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == "new") {
                    if let Some(v) = read_result(&p, since) {
                        out.push(v);
                    }
                } else {
                    stack.push(p);
                }
            }
        }
    }
    out.sort_by_key(|v| v["id"].as_str().unwrap_or_default().to_owned());
    Ok(out)
}

fn read_result(new_dir: &Path, since: SystemTime) -> Option<Value> {
    let est_path = new_dir.join("estimates.json");
    let modified = std::fs::metadata(&est_path).ok()?.modified().ok()?;
    if modified < since {
        return None;
    }
    let bench: Value = serde_json::from_str(&std::fs::read_to_string(new_dir.join("benchmark.json")).ok()?).ok()?;
    let est: Value = serde_json::from_str(&std::fs::read_to_string(est_path).ok()?).ok()?;
    Some(json!({
        "id": bench["full_id"],
        "group": bench["group_id"],
        "function": bench["function_id"],
        "value": bench["value_str"],
        "throughput": bench["throughput"],
        "median_ns": est["median"]["point_estimate"],
        "median_ci_ns": [est["median"]["confidence_interval"]["lower_bound"], est["median"]["confidence_interval"]["upper_bound"]],
        "mad_ns": est["median_abs_dev"]["point_estimate"],
    }))
}

fn python_side(root: &Path, load_exe: &Path, quick: bool) -> anyhow::Result<Result<Vec<Value>, String>> {
    let Ok(python) = std::env::var("AGENTSCOPE_PYTHON") else {
        return Ok(Err("AGENTSCOPE_PYTHON is not set (see docs/benchmarks.md for the pip line)".to_owned()));
    };
    let check = Command::new(&python)
        .args(["-c", "import agentscope; assert agentscope.__version__ == '2.0.4', agentscope.__version__"])
        .output();
    match check {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return Ok(Err(format!("{python} has no agentscope 2.0.4: {}", String::from_utf8_lossy(&o.stderr).trim())));
        }
        Err(e) => return Ok(Err(format!("cannot run {python}: {e}"))),
    }
    let tmp = std::env::temp_dir().join(format!("agentscope-bench-python-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let mut files = Vec::new();
    for n in SIZES {
        let path = tmp.join(format!("state-{n}.json"));
        let p = path.to_string_lossy().into_owned();
        load_bench(load_exe, &["dump-state", &n.to_string(), &p])?;
        files.push(p);
    }
    let server = RedisProcess::start(&tmp);
    let port = server.as_ref().map_or(0, |s| s.port);
    let repeat = if quick { "20" } else { "100" };
    let mut cmd = Command::new(&python);
    cmd.arg(root.join("xtask/bench_python.py")).arg(port.to_string()).arg(repeat).args(&files);
    let out = cmd.stderr(Stdio::inherit()).output().context("running bench_python.py")?;
    drop(server);
    if !out.status.success() {
        bail!("bench_python.py failed ({})", out.status);
    }
    let figures = bench_json_lines(&String::from_utf8_lossy(&out.stdout));
    for f in &figures {
        eprintln!("  python {f}");
    }
    Ok(Ok(figures))
}

/// A private redis-server for the Python side, killed on drop.
pub(crate) struct RedisProcess {
    child: Child,
    pub(crate) port: u16,
}

impl RedisProcess {
    pub(crate) fn start(dir: &Path) -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(Self { child, port });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    json!({"cpu": cpu, "cores": cores, "loadavg_at_end": load.trim(), "idle": idle_policy()})
}

/// How an idle CPU waits, which sets the cost of a loopback round trip between two CPUs: a
/// guest whose `haltpoll` cpuidle driver has `guest_halt_poll_ns = 0` halts at once, and each
/// wake-up is then a VM exit (about 90 µs per round trip on the 2-vCPU VMs here, against 15 µs
/// with the kernel's default of 200 µs of polling). Empty when the files are not there.
pub(crate) fn idle_policy() -> String {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let Some(driver) = read("/sys/devices/system/cpu/cpuidle/current_driver") else { return String::new() };
    match read("/sys/module/haltpoll/parameters/guest_halt_poll_ns") {
        Some(ns) if driver == "haltpoll" => format!("cpuidle {driver}, guest_halt_poll_ns {ns}"),
        _ => format!("cpuidle {driver}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Rendering

fn ms(ns: f64) -> String {
    let v = ns / 1e6;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else if v >= 0.01 {
        format!("{v:.3} ms")
    } else {
        format!("{:.2} µs", ns / 1e3)
    }
}

/// Median (ns) of the criterion result whose id matches `pred`.
fn find(report: &Value, pred: impl Fn(&str) -> bool) -> Option<&Value> {
    report["criterion"].as_array()?.iter().find(|v| pred(v["id"].as_str().unwrap_or_default()))
}

fn median(v: Option<&Value>) -> Option<f64> {
    v.and_then(|v| v["median_ns"].as_f64())
}

fn python_ms(report: &Value, scenario: &str, n: u64) -> (Option<f64>, &'static str) {
    let live = report["python"]["figures"].as_array().and_then(|a| {
        a.iter()
            .find(|f| f["scenario"] == scenario && f["messages"].as_u64() == Some(n))
            .and_then(|f| f["median_ms"].as_f64())
    });
    if live.is_some() {
        return (live, "live");
    }
    let reference = PY_REFERENCE.iter().find(|(s, m, _)| *s == scenario && *m == n).map(|r| r.2);
    (reference, if reference.is_some() { "issue reference" } else { "" })
}

fn ratio_cell(py_ms: Option<f64>, rust_ns: Option<f64>, target: f64) -> String {
    match (py_ms, rust_ns) {
        (Some(p), Some(r)) if r > 0.0 => {
            let x = p * 1e6 / r;
            format!("{x:.1}x {}", if x >= target { "(meets)" } else { "(MISSES)" })
        }
        _ => "n/a".to_owned(),
    }
}

fn spread(v: Option<&Value>) -> String {
    match (v.and_then(|v| v["median_ns"].as_f64()), v.and_then(|v| v["mad_ns"].as_f64())) {
        (Some(m), Some(d)) if m > 0.0 => format!("±{:.0}%", d / m * 100.0),
        _ => "".to_owned(),
    }
}

const ANALYSIS_START: &str = "<!-- analysis: written by people, kept by cargo xtask bench -->";
const ANALYSIS_END: &str = "<!-- /analysis -->";

/// The hand-written analysis block of an earlier report (between the markers), if any.
fn kept_analysis(old: &str) -> Option<String> {
    let start = old.find(ANALYSIS_START)?;
    let end = old[start..].find(ANALYSIS_END)? + start + ANALYSIS_END.len();
    Some(old[start..end].to_owned())
}

/// Puts the analysis block after the report's opening paragraphs (before the first table section).
fn with_analysis(md: String, analysis: Option<&str>) -> String {
    let Some(analysis) = analysis else { return md };
    match md.find("\n## ") {
        Some(at) => format!("{}\n{analysis}\n{}", &md[..at], &md[at..]),
        None => format!("{md}\n{analysis}\n"),
    }
}

fn render(r: &Value) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Benchmarks\n");
    let _ = writeln!(
        s,
        "Made by `{}` in {:.0} s on {} ({} cores; idle policy: {}; load average at the end: {}). Figures are \
         medians of repeated runs; spread is the median absolute deviation as a share of the median. Machines \
         here are noisy (other jobs share the 2 cores), so read ratios, not absolute times.\n",
        r["command"].as_str().unwrap_or_default(),
        r["duration_s"].as_f64().unwrap_or(0.0),
        r["machine"]["cpu"].as_str().unwrap_or("?"),
        r["machine"]["cores"],
        r["machine"]["idle"].as_str().filter(|s| !s.is_empty()).unwrap_or("unknown"),
        r["machine"]["loadavg_at_end"].as_str().unwrap_or("?"),
    );
    match r["python"]["ran"].as_bool() {
        Some(true) => {
            let _ = writeln!(s, "Python: AgentScope 2.0.4 measured live in the same run (`xtask/bench_python.py`).\n");
        }
        _ => {
            let _ = writeln!(
                s,
                "Python: the live comparison was skipped ({}). Ratios below use the Python figures from the issues \
                 (same machine kind). To run it: `python3 -m venv /opt/as-py && /opt/as-py/bin/pip install \
                 agentscope==2.0.4 apscheduler redis`, then `AGENTSCOPE_PYTHON=/opt/as-py/bin/python cargo xtask bench`.\n",
                r["python"]["why"].as_str().unwrap_or("?")
            );
        }
    }

    // AgentState serialize / parse.
    let _ = writeln!(s, "## AgentState serialize and parse\n");
    let _ = writeln!(
        s,
        "| messages | serialize | spread | Python | ratio (target 10x) | parse | spread | Python | ratio (target 10x) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for n in SIZES {
        let ser = find(r, |id| id == format!("agent_state/serialize/{n}"));
        let par = find(r, |id| id == format!("agent_state/parse/{n}"));
        let (pys, srcs) = python_ms(r, "python_serialize", n);
        let (pyp, _) = python_ms(r, "python_parse", n);
        let _ = writeln!(
            s,
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} |",
            median(ser).map(ms).unwrap_or_default(),
            spread(ser),
            pys.map(|p| format!("{p:.3} ms ({srcs})")).unwrap_or_else(|| "n/a".into()),
            ratio_cell(pys, median(ser), 10.0),
            median(par).map(ms).unwrap_or_default(),
            spread(par),
            pyp.map(|p| format!("{p:.3} ms")).unwrap_or_else(|| "n/a".into()),
            ratio_cell(pyp, median(par), 10.0),
        );
    }

    // Redis turn vs floor vs Python.
    let _ = writeln!(s, "\n## A turn (get_session + update_session_state)\n");
    let _ = writeln!(s, "Redis, with the bare `GET`+`SET` of the same bytes measured in the same run (the floor):\n");
    let _ = writeln!(
        s,
        "| messages | Redis turn | spread | bare GET+SET | turn / floor (target ≤ 3x) | Python | ratio (target 10x; 4x at 10) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for n in SIZES {
        let turn = find(r, |id| id == format!("turn/get_update/{n}"));
        let floor = find(r, |id| id == format!("turn/bare_get_set/{n}"));
        let (py, src) = python_ms(r, "python_turn_redis", n);
        let target = if n == 10 { 4.0 } else { 10.0 };
        let over = match (median(turn), median(floor)) {
            (Some(t), Some(f)) if f > 0.0 => {
                let x = t / f;
                format!("{x:.2}x {}", if x <= 3.0 { "(meets)" } else { "(MISSES)" })
            }
            _ => "n/a".into(),
        };
        let _ = writeln!(
            s,
            "| {n} | {} | {} | {} | {over} | {} | {} |",
            median(turn).map(ms).unwrap_or_else(|| "skipped".into()),
            spread(turn),
            median(floor).map(ms).unwrap_or_default(),
            py.map(|p| format!("{p:.3} ms ({src})")).unwrap_or_else(|| "n/a".into()),
            ratio_cell(py, median(turn), target),
        );
    }
    let _ = writeln!(s, "\nOther stores (same turn):\n");
    let _ = writeln!(s, "| messages | memory | SQLite (plain, synchronous=NORMAL) | SQLite (tools) |");
    let _ = writeln!(s, "|---|---|---|---|");
    for n in SIZES {
        let mem = find(r, |id| id.starts_with("memory_turn/get+update_cas/") && id.contains(&format!("/{n} msgs")));
        let sq = find(r, |id| id == format!("sqlite_turn/get_update/plain/sync_normal/{n}"));
        let sqt = find(r, |id| id == format!("sqlite_turn/get_update/tools/sync_normal/{n}"));
        let _ = writeln!(
            s,
            "| {n} | {} {} | {} {} | {} {} |",
            median(mem).map(ms).unwrap_or_default(),
            spread(mem),
            median(sq).map(ms).unwrap_or_default(),
            spread(sq),
            median(sqt).map(ms).unwrap_or_default(),
            spread(sqt)
        );
    }

    // Load figures.
    let load: Vec<&Value> = r["load"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    let _ = writeln!(s, "\n## Turns per second with concurrent sessions\n");
    let _ = writeln!(
        s,
        "Each session is driven by its own task doing get + conditional update in a loop (one process, 2 worker threads).\n"
    );
    let _ = writeln!(s, "| store | allocator | sessions | messages | turns/s | errors |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for f in load.iter().filter(|f| f["mode"] == "throughput") {
        if f.get("skipped").is_some() {
            let _ = writeln!(
                s,
                "| {} | {} | skipped: {} | | | |",
                f["store"].as_str().unwrap_or(""),
                allocator(f),
                f["skipped"]
            );
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.0} | {} |",
            f["store"].as_str().unwrap_or(""),
            allocator(f),
            f["sessions"],
            f["messages"],
            f["turns_per_sec"].as_f64().unwrap_or(0.0),
            f["errors"]
        );
    }
    let _ =
        writeln!(s, "\n## A full runner turn (load, reply with a constant model, conditional write, message log)\n");
    let _ = writeln!(s, "| store | allocator | messages | median | quartiles |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for f in load.iter().filter(|f| f["mode"] == "runner") {
        if f.get("skipped").is_some() {
            let _ = writeln!(s, "| {} | {} | skipped | | |", f["store"].as_str().unwrap_or(""), allocator(f));
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3} ms | {:.3}–{:.3} ms |",
            f["store"].as_str().unwrap_or(""),
            allocator(f),
            f["messages"],
            f["median_ms"].as_f64().unwrap_or(0.0),
            f["q1_ms"].as_f64().unwrap_or(0.0),
            f["q3_ms"].as_f64().unwrap_or(0.0)
        );
    }
    let _ = writeln!(s, "\n## Memory (peak RSS, one process per figure)\n");
    for f in &load {
        if f["mode"] == "rss-parked" {
            let _ = writeln!(
                s,
                "* {}: {} parked sessions loaded at once: peak RSS {:.1} MiB; {:.1} KiB per loaded session ({:.1} KiB of JSON each).",
                allocator(f),
                f["sessions"],
                f["peak_rss_kib"].as_f64().unwrap_or(0.0) / 1024.0,
                f["kib_per_session"].as_f64().unwrap_or(0.0),
                f["json_bytes"].as_f64().unwrap_or(0.0) / 1024.0 / f["sessions"].as_f64().unwrap_or(1.0),
            );
        }
        if f["mode"] == "rss-reply" {
            let _ = writeln!(
                s,
                "* {}: one reply over a {}-message state ({:.0} KiB of JSON): peak RSS {:.1} MiB (RSS before the turn {:.1} MiB).",
                allocator(f),
                f["messages"],
                f["state_bytes"].as_f64().unwrap_or(0.0) / 1024.0,
                f["peak_rss_kib"].as_f64().unwrap_or(0.0) / 1024.0,
                f["rss_before_kib"].as_f64().unwrap_or(0.0) / 1024.0,
            );
        }
    }

    // Everything criterion measured.
    let _ = writeln!(s, "\n## Every criterion result\n");
    let _ = writeln!(s, "| benchmark | median | 95% CI of the median | spread |");
    let _ = writeln!(s, "|---|---|---|---|");
    let mut groups: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for v in r["criterion"].as_array().into_iter().flatten() {
        groups.entry(v["group"].as_str().unwrap_or_default().to_owned()).or_default().push(v);
    }
    for (_, items) in groups {
        for v in items {
            let ci = &v["median_ci_ns"];
            let _ = writeln!(
                s,
                "| `{}` | {} | {}–{} | {} |",
                v["id"].as_str().unwrap_or_default(),
                median(Some(v)).map(ms).unwrap_or_default(),
                ci[0].as_f64().map(ms).unwrap_or_default(),
                ci[1].as_f64().map(ms).unwrap_or_default(),
                spread(Some(v)),
            );
        }
    }
    let _ = writeln!(s, "\nRaw data: `target/bench-report.json` (not committed).");
    s
}

/// The allocator a load figure ran on (reports made before figures named it were all `system`).
fn allocator(figure: &Value) -> &str {
    figure["allocator"].as_str().unwrap_or("system")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_analysis_block_survives_a_new_report() {
        let old =
            format!("# Benchmarks\n\nold intro\n\n{ANALYSIS_START}\n## Targets\nwhy\n{ANALYSIS_END}\n\n## Tables\nold");
        let kept = kept_analysis(&old).unwrap();
        assert!(kept.starts_with(ANALYSIS_START) && kept.ends_with(ANALYSIS_END), "{kept}");
        let new = with_analysis("# Benchmarks\n\nnew intro\n\n## Tables\nnew".to_owned(), Some(&kept));
        assert_eq!(new, format!("# Benchmarks\n\nnew intro\n\n{kept}\n\n## Tables\nnew"));
        assert_eq!(kept_analysis("no markers"), None);
        assert_eq!(with_analysis("x".to_owned(), None), "x");
    }
}
