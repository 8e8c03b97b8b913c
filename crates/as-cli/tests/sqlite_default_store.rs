//! The default store of the `agentscope` binary: SQLite at `$AGENTSCOPE_HOME/sessions.db`, else
//! `$XDG_DATA_HOME/agentscope/sessions.db`, else `~/.local/share/agentscope/sessions.db`, and
//! `--help` naming it; a `sqlite:` path that is not a database is refused untouched.
//! (The session lifecycle on one SQLite file is `sessions_sqlite.rs`.)

// clippy.toml allows these inside #[test] fns only; the helpers below are test code too.
#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs the binary with a clean storage environment plus `env`.
fn run(args: &[&str], env: &[(&str, &Path)]) -> Output {
    run_in(args, env, Path::new("."))
}

/// [`run`] in the working directory `cwd`.
fn run_in(args: &[&str], env: &[(&str, &Path)], cwd: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentscope"));
    cmd.current_dir(cwd)
        .args(args)
        .env_remove("AGENTSCOPE_STORAGE")
        .env_remove("AGENTSCOPE_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        // `("HOME", "")` stands for HOME unset.
        if *k == "HOME" && v.as_os_str().is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    cmd.output().expect("run agentscope")
}

fn ok(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

const OWNER: [&str; 4] = ["--user", "user-1", "--agent", "agent-1"];

fn sessions(storage: &str, cmd: &[&str], rest: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["--storage".into(), storage.into(), "sessions".into()];
    v.extend(cmd.iter().map(|s| (*s).to_owned()));
    v.extend(OWNER.iter().map(|s| (*s).to_owned()));
    v.extend(rest.iter().map(|s| (*s).to_owned()));
    v
}

fn run_s(storage: &str, cmd: &[&str], rest: &[&str]) -> Output {
    let args = sessions(storage, cmd, rest);
    run(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[])
}

#[test]
fn default_store_follows_agentscope_home_then_xdg_data_home_then_home() {
    let a = tempfile::tempdir().expect("temp dir");
    let x = tempfile::tempdir().expect("temp dir");
    let h = tempfile::tempdir().expect("temp dir");
    let create = ["sessions", "create", "--user", "u", "--agent", "a"];

    ok(&run(&create, &[("AGENTSCOPE_HOME", a.path()), ("XDG_DATA_HOME", x.path()), ("HOME", h.path())]));
    assert!(a.path().join("sessions.db").is_file());
    assert!(!x.path().join("agentscope").exists() && !h.path().join(".local").exists());

    ok(&run(&create, &[("XDG_DATA_HOME", x.path()), ("HOME", h.path())]));
    assert!(x.path().join("agentscope/sessions.db").is_file());

    ok(&run(&create, &[("HOME", h.path())]));
    assert!(h.path().join(".local/share/agentscope/sessions.db").is_file());

    // And --help says so.
    for args in [&["--help"][..], &["sessions", "list", "--help"][..]] {
        let help = ok(&run(args, &[("AGENTSCOPE_HOME", a.path())]));
        let expected = format!("sqlite:{}", a.path().join("sessions.db").display());
        assert!(help.contains(&expected), "{args:?} help names {expected}:\n{help}");
        let help = ok(&run(args, &[("XDG_DATA_HOME", x.path()), ("HOME", h.path())]));
        let expected = format!("sqlite:{}", x.path().join("agentscope/sessions.db").display());
        assert!(help.contains(&expected), "{args:?} help names {expected}:\n{help}");
    }
}

#[test]
fn a_file_that_is_not_a_database_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "my notes\n".repeat(100)).expect("write");
    let o = run_s(&format!("sqlite:{}", notes.display()), &["list"], &[]);
    assert_ne!(code(&o), 0);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not an SQLite database"), "{err}");
    assert_eq!(std::fs::read_to_string(&notes).expect("read"), "my notes\n".repeat(100), "untouched");
}

/// `AGENTSCOPE_STORAGE` exported but empty (or blank) is the default store, as an empty
/// `AGENTSCOPE_HOME` is unset; an empty `--storage ''` typed on the command line stays a usage error.
#[test]
fn an_empty_agentscope_storage_is_the_default_store() {
    let home = tempfile::tempdir().expect("temp dir");
    let create = ["sessions", "create", "--user", "a", "--agent", "b"];
    let out = ok(&run(&create, &[("AGENTSCOPE_STORAGE", Path::new("")), ("AGENTSCOPE_HOME", home.path())]));
    let id = out.split_whitespace().last().expect("a session id").to_owned();
    assert!(home.path().join("sessions.db").is_file());
    let list = ["sessions", "list", "--user", "a", "--agent", "b"];
    let out = ok(&run(&list, &[("AGENTSCOPE_STORAGE", Path::new("  ")), ("AGENTSCOPE_HOME", home.path())]));
    assert!(out.contains(&id), "{out}");
    let o =
        run(&["--storage", "", "sessions", "list", "--user", "a", "--agent", "b"], &[("AGENTSCOPE_HOME", home.path())]);
    assert_eq!(code(&o), 2, "{}", String::from_utf8_lossy(&o.stderr));
}

/// The shell does not expand `~` after `sqlite:`, so the CLI does: `sqlite:~/x.db` is `$HOME/x.db`,
/// not a directory named `~` in the working directory; `~user/…` (and a bare `~`) is a usage error.
#[test]
fn a_leading_tilde_in_a_sqlite_path_is_the_home_directory() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let home = tempfile::tempdir().expect("temp dir");
    let create = |storage: &str| {
        run_in(
            &["--storage", storage, "sessions", "create", "--user", "u", "--agent", "a"],
            &[("HOME", home.path())],
            cwd.path(),
        )
    };
    for (storage, file) in [("sqlite:~/x.db", "x.db"), ("sqlite://~/sub/y.db", "sub/y.db")] {
        if let Some(parent) = home.path().join(file).parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        let id = ok(&create(storage));
        assert!(home.path().join(file).is_file(), "{storage}: no {file} in HOME");
        let list = run_in(
            &["--storage", storage, "sessions", "list", "--user", "u", "--agent", "a"],
            &[("HOME", home.path())],
            cwd.path(),
        );
        assert!(ok(&list).contains(id.split_whitespace().last().expect("an id")), "{storage}");
    }
    for storage in ["sqlite:~other/x.db", "sqlite:~", "sqlite:~x.db"] {
        let o = create(storage);
        assert_eq!(code(&o), 2, "{storage}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains('~'), "{storage}");
    }
    assert_eq!(std::fs::read_dir(cwd.path()).expect("read cwd").count(), 0, "nothing created in the working directory");
}

/// With no home directory known (HOME unset or relative, no AGENTSCOPE_HOME, no XDG_DATA_HOME) there
/// is no platform data directory: a command that needs the default store is a usage error naming
/// the fix, rather than a `./sessions.db` that a command run from another directory would not see.
#[test]
fn without_a_home_directory_the_default_store_is_a_usage_error() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let unset = Path::new("");
    for home in [unset, Path::new("rel/home")] {
        for args in [
            &["sessions", "create", "--user", "u", "--agent", "a"][..],
            &["sessions", "list", "--user", "u", "--agent", "a"],
        ] {
            let o = run_in(args, &[("HOME", home)], cwd.path());
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(code(&o), 2, "HOME {home:?}, {args:?}: {err}");
            assert!(err.contains("--storage") && err.contains("AGENTSCOPE_HOME"), "{err}");
        }
        // --help still works and says there is no default.
        let help = ok(&run_in(&["--help"], &[("HOME", home)], cwd.path()));
        assert!(help.contains("AGENTSCOPE_HOME") && !help.contains("sqlite:sessions.db"), "{help}");
    }
    assert_eq!(std::fs::read_dir(cwd.path()).expect("read cwd").count(), 0, "nothing created in the working directory");
    // AGENTSCOPE_HOME alone is enough.
    let dir = tempfile::tempdir().expect("temp dir");
    ok(&run_in(
        &["sessions", "create", "--user", "u", "--agent", "a"],
        &[("HOME", unset), ("AGENTSCOPE_HOME", dir.path())],
        cwd.path(),
    ));
    assert!(dir.path().join("sessions.db").is_file());
}

/// A relative AGENTSCOPE_HOME would name another default store in every directory a command runs
/// from, as a relative HOME would: a usage error naming the variable (not a fall back to HOME, which
/// would put the sessions where whoever set it did not want them), and nothing is created. `--help`
/// says there is no default; a `--storage` given is not affected.
#[test]
fn a_relative_agentscope_home_is_a_usage_error() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let home = tempfile::tempdir().expect("temp dir");
    let env = [("AGENTSCOPE_HOME", Path::new("rel")), ("HOME", home.path())];
    for args in [
        &["sessions", "create", "--user", "u", "--agent", "a"][..],
        &["sessions", "list", "--user", "u", "--agent", "a"],
    ] {
        let o = run_in(args, &env, cwd.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 2, "{args:?}: {err}");
        assert!(err.contains("AGENTSCOPE_HOME") && err.contains("relative"), "{err}");
    }
    assert_eq!(std::fs::read_dir(cwd.path()).expect("read cwd").count(), 0, "nothing created in the working directory");
    assert!(!home.path().join(".local").exists(), "no fall back to HOME");
    let help = ok(&run_in(&["--help"], &env, cwd.path()));
    assert!(help.contains("AGENTSCOPE_HOME") && !help.contains("sqlite:rel/"), "{help}");
    let db = cwd.path().join("given.db");
    let storage = format!("sqlite:{}", db.display());
    ok(&run_in(&["--storage", &storage, "sessions", "create", "--user", "u", "--agent", "a"], &env, cwd.path()));
    assert!(db.is_file());
}
