//! Every command's `--help` is complete: it has an example, and the top level lists the exit codes.

// Helpers outside `#[test]` fns are test code too (clippy.toml only covers `#[test]`/`cfg(test)` items).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod e2e_support;

use e2e_support::*;

/// The subcommands listed in a `--help` text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_list = false;
    for line in help.lines() {
        if line == "Commands:" {
            in_list = true;
            continue;
        }
        if in_list {
            if line.trim().is_empty() {
                break;
            }
            // Command names start at column 2; wrapped descriptions are indented further.
            if line.starts_with("  ")
                && !line.starts_with("   ")
                && let Some(name) = line.split_whitespace().next()
                && name != "help"
            {
                out.push(name.to_owned());
            }
        }
    }
    out
}

fn walk(path: &mut Vec<String>, seen: &mut Vec<String>) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let o = run(&args);
    let help = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{args:?}");
    assert!(help.contains("Example"), "`agentscope {}` --help has no example:\n{help}", path.join(" "));
    seen.push(path.join(" "));
    for sub in subcommands(&help) {
        path.push(sub);
        walk(path, seen);
        path.pop();
    }
}

#[test]
fn every_command_has_an_example() {
    let mut seen = Vec::new();
    walk(&mut Vec::new(), &mut seen);
    for expected in
        ["chat", "demo", "sessions export", "sessions import", "sessions validate", "sessions show", "state fmt"]
    {
        assert!(seen.iter().any(|s| s == expected), "{expected} walked: {seen:?}");
    }
    assert!(!seen.iter().any(|s| s.contains("demo-step")), "the internal step command stays hidden");
}

#[test]
fn top_level_help_lists_exit_codes() {
    let help = stdout(&run(&["--help"]));
    for code in ["  0 ", "  1 ", "  2 ", "  3 ", "  4 ", "  5 ", "  6 ", "  130 "] {
        assert!(help.contains(code), "{code:?} in\n{help}");
    }
}

#[test]
fn help_never_shows_the_storage_url_from_the_environment() {
    for args in [&["--help"][..], &["sessions", "list", "--help"]] {
        let o = agentscope(args).env("AGENTSCOPE_STORAGE", "redis://:hunter2@127.0.0.1:1").output().unwrap();
        let text = format!("{}{}", stdout(&o), stderr(&o));
        assert!(text.contains("AGENTSCOPE_STORAGE"), "the variable is still named: {text}");
        assert!(!text.contains("hunter2"), "{args:?} shows the password: {text}");
    }
}

#[test]
fn a_closed_stdout_is_exit_1_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let bad = bad.to_string_lossy().into_owned();
    let cases: [&[&str]; 6] = [
        &["schema"],
        &["schema", "agent-state"],
        &["state", "check", &bad],
        &["--storage", "memory", "sessions", "validate", "--user", "alice"],
        &["demo"],
        // Interactive: the session line comes before any prompt or model call.
        &["--storage", "memory", "chat", "--user", "alice", "--agent", "friday", "--model", "ollama:m"],
    ];
    for args in cases {
        // The reader is gone before the command starts: its first write fails (EPIPE).
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = agentscope(args).stdout(writer).stderr(std::process::Stdio::piped()).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        // A reader that went away is no news to whoever piped into `head`: nothing said about it.
        assert!(!stderr(&o).contains("cannot write"), "{args:?}: {}", stderr(&o));
    }
}

/// A full disk behind stdout (`> /dev/full`): exit 1 saying so, not a panic, for the commands that
/// print as they go (the demo's steps, the interactive chat).
#[test]
fn a_full_stdout_is_exit_1_not_a_panic() {
    if let Err(e) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        eprintln!("skipping: no /dev/full to write to ({e})");
        return;
    }
    let cases: [&[&str]; 2] =
        [&["demo"], &["--storage", "memory", "chat", "--user", "alice", "--agent", "friday", "--model", "ollama:m"]];
    for args in cases {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = agentscope(args).stdout(full).stderr(std::process::Stdio::piped()).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot write the output"), "{args:?}: {}", stderr(&o));
    }
}
