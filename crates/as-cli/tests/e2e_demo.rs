//! `agentscope demo` itself: every step passes (each step is a separate process, and the
//! interrupt step sends a real SIGINT), and the output says what each step proved.
// Helpers outside `#[test]` fns are test code too (clippy.toml only covers `#[test]`/`cfg(test)` items).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod e2e_support;

use e2e_support::*;

#[test]
fn demo_passes_every_step() {
    let o = run(&["demo"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{}", stderr(&o));
    assert!(out.contains("\n7 passed, 0 failed\n"), "{out}");
    assert_eq!(out.matches("      PASS").count(), 7, "{out}");
    assert!(!out.contains("FAIL"), "{out}");
    for proof in [
        "the model's input holds turn 1",
        "exited 130 after SIGINT",
        "stored partial answer \"Once upon a time, a small robot \"",
        "note.txt holds \"Ada\\n\"",
        "stored cur_iter = 2",
    ] {
        assert!(out.contains(proof), "missing {proof:?} in\n{out}");
    }
}

#[test]
fn demo_runs_on_a_given_store() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("given.db").display());
    let o = run(&["--storage", &storage, "demo"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains(&format!("storage: {storage}")));
    // The demo session is in that store afterwards.
    let o = run(&["--storage", &storage, "sessions", "list", "--user", "demo-user", "--agent", "friday"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().filter(|l| !l.trim().is_empty()).count(), 1, "{}", stdout(&o));
}

/// An exported AGENTSCOPE_STORAGE (perhaps a real store) is not the demo's: it runs on a temporary
/// SQLite file unless `--storage` is given on its command line, and leaves nothing in that store.
#[test]
fn demo_ignores_an_exported_agentscope_storage() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("exported.db").display());
    let o = agentscope(&["demo"]).env("AGENTSCOPE_STORAGE", &storage).output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    assert!(out.contains("\n7 passed, 0 failed\n"), "{out}");
    assert!(!out.contains(&format!("storage: {storage}")), "{out}");
    assert!(stderr(&o).contains("AGENTSCOPE_STORAGE"), "the demo says it ignored it: {}", stderr(&o));
    let o = run(&["--storage", &storage, "sessions", "list", "--user", "demo-user", "--agent", "friday"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "", "the demo left sessions in the exported store");
}

#[test]
fn demo_on_redis() {
    let Some(redis) = Redis::start() else { return };
    let o = run(&["--storage", &redis.url, "demo"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("\n7 passed, 0 failed\n"));
}

#[test]
fn demo_refuses_a_per_process_store() {
    let o = run(&["--storage", "memory", "demo"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("needs a store they share"), "{}", stderr(&o));
}

/// `demo --help` tells where the demo runs: a temporary store unless --storage is given, never the
/// default store or an exported AGENTSCOPE_STORAGE (which every other command's --help advertises).
#[test]
fn demo_help_says_it_runs_on_a_temporary_store() {
    let o = agentscope(&["demo", "--help"]).env("AGENTSCOPE_STORAGE", "sqlite:/tmp/exported.db").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Words, not lines: clap wraps the help to the width of the terminal.
    let help = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!help.contains("[env: AGENTSCOPE_STORAGE]") && !help.contains("[default: sqlite:"), "{help}");
    assert!(help.contains("[default: a temporary SQLite file; AGENTSCOPE_STORAGE is ignored]"), "{help}");
    let other = stdout(&run(&["sessions", "list", "--help"]));
    assert!(other.contains("[env: AGENTSCOPE_STORAGE]") && other.contains("[default: "), "{other}");
    // Given after `demo` as before it, --storage is the demo's store.
    for args in [&["--storage", "memory", "demo"][..], &["demo", "--storage", "memory"]] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains("needs a store they share"), "{args:?}: {}", stderr(&o));
    }
}
