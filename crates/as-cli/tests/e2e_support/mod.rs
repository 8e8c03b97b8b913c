//! Helpers of the end-to-end tests: run the built `agentscope`, in a pseudo-terminal when the
//! test is interactive, and start private servers (the OpenAI mock, redis-server).

#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use as_model_openai::test_server::{MockReply, chunk};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentscope")
}

/// A command for the binary with a clean environment (no provider keys, no colours).
pub fn agentscope(args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args);
    for var in ["OPENAI_API_KEY", "OPENAI_BASE_URL", "DASHSCOPE_API_KEY", "DEEPSEEK_API_KEY", "AGENTSCOPE_STORAGE"] {
        c.env_remove(var);
    }
    c.env("NO_COLOR", "1").stdin(Stdio::null());
    c
}

/// Runs it to the end.
pub fn run(args: &[&str]) -> Output {
    agentscope(args).output().expect("run agentscope")
}

/// `agentscope --storage STORAGE sessions show --user alice --agent friday --session ID --summary`.
pub fn show_summary(storage: &str, session: &str) -> Output {
    show(storage, session, &["--summary"])
}

/// `agentscope --storage STORAGE sessions show --user alice --agent friday --session ID [EXTRA…]`.
pub fn show(storage: &str, session: &str, extra: &[&str]) -> Output {
    let mut args = vec!["--storage", storage, "sessions", "show", "--user", "alice", "--agent", "friday", "--session"];
    args.push(session);
    args.extend_from_slice(extra);
    run(&args)
}

/// stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The session id from `chat`'s "new session <id> …" line.
pub fn new_session_id(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("new session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no new session line in {stderr:?}"))
        .to_owned()
}

/// A runtime (one worker thread) to host the mock server in.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

/// A streamed text reply: `parts` as text chunks, then finish reason `stop` and usage 10/2.
pub fn text_reply(parts: &[&str]) -> MockReply {
    let mut chunks: Vec<serde_json::Value> = parts.iter().map(|p| chunk::text(p)).collect();
    chunks.push(chunk::finish("stop"));
    chunks.push(chunk::usage(10, 2));
    MockReply::sse(chunks)
}

/// The chat arguments against the mock server.
pub fn chat_args<'a>(storage: &'a str, base_url: &'a str) -> Vec<&'a str> {
    vec![
        "--storage",
        storage,
        "chat",
        "--user",
        "alice",
        "--agent",
        "friday",
        "--model",
        "openai:mock-model",
        "--base-url",
        base_url,
    ]
}

/// The `messages` of a recorded chat request as `role: text` lines.
pub fn request_messages(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| {
                    let role = m["role"].as_str().unwrap_or("?");
                    let text = match &m["content"] {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Array(parts) => {
                            parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("")
                        }
                        _ => String::new(),
                    };
                    format!("{role}: {text}")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A process in a pseudo-terminal, its output collected by a reader thread.
pub struct Pty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    out: Arc<(Mutex<String>, Condvar)>,
    /// How much of the output earlier `expect`s consumed.
    mark: usize,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Pty {
    /// Starts `agentscope args` in a new pseudo-terminal (80x24) with a clean environment.
    pub fn spawn(args: &[&str], cwd: &Path) -> Self {
        Self::spawn_with(args, cwd, false)
    }

    /// [`Pty::spawn`]; `colour` leaves `NO_COLOR` unset so the program may use ANSI styles.
    pub fn spawn_with(args: &[&str], cwd: &Path, colour: bool) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize { rows: 24, cols: 200, pixel_width: 0, pixel_height: 0 })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(bin());
        cmd.args(args);
        cmd.cwd(cwd);
        for var in ["OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTSCOPE_STORAGE"] {
            cmd.env_remove(var);
        }
        cmd.env("TERM", "xterm");
        if colour {
            cmd.env_remove("NO_COLOR");
        } else {
            cmd.env("NO_COLOR", "1");
        }
        let child = pair.slave.spawn_command(cmd).expect("spawn in pty");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let out = Arc::new((Mutex::new(String::new()), Condvar::new()));
        let sink = Arc::clone(&out);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let (lock, cv) = &*sink;
                        lock.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
                        cv.notify_all();
                    }
                }
            }
            let (lock, cv) = &*sink;
            lock.lock().unwrap().push_str("\u{0}EOF");
            cv.notify_all();
        });
        Self { child, writer, out, mark: 0, _master: pair.master }
    }

    /// Waits (at most 30 s) until the output after the last match contains `needle`; returns the
    /// output up to and including it.
    pub fn expect(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        let (lock, cv) = &*self.out;
        let mut text = lock.lock().unwrap();
        loop {
            if let Some(pos) = text[self.mark..].find(needle) {
                let end = self.mark + pos + needle.len();
                let seen = text[self.mark..end].to_owned();
                self.mark = end;
                return seen;
            }
            let now = Instant::now();
            if now >= deadline || text.ends_with("\u{0}EOF") {
                let shown = text[self.mark..].to_owned();
                drop(text);
                let status = self.child.try_wait().ok().flatten().map(|s| format!("{s:?}"));
                panic!("expected {needle:?}; the process: {status:?}; the terminal shows:\n{shown}");
            }
            text = cv.wait_timeout(text, deadline - now).unwrap().0;
        }
    }

    /// Everything printed so far.
    pub fn all(&self) -> String {
        self.out.0.lock().unwrap().clone()
    }

    /// Types bytes (`b"hello\r"`, `b"\x03"` for Ctrl-C, `b"\x04"` for Ctrl-D).
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write to pty");
        self.writer.flush().expect("flush pty");
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait(&mut self) -> u32 {
        self.child.wait().expect("wait").exit_code()
    }
}

/// A private redis-server on a free loopback port, stopped on drop.
pub struct Redis {
    child: std::process::Child,
    /// `redis://127.0.0.1:PORT`.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Redis {
    /// Starts one, or `None` (after printing why) when no redis-server is on `PATH`; panics
    /// instead when `AS_REQUIRE_REDIS` is set (as CI does), so a missing one is never skipped unseen.
    pub fn start() -> Option<Self> {
        let exe = as_storage_redis::testing::redis_server_or_skip()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(exe)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        // Ready when it says so on its log (stdout).
        let out = child.stdout.take().expect("redis stdout");
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
        loop {
            match lines.next() {
                Some(Ok(l)) if l.contains("Ready to accept connections") => break,
                Some(Ok(_)) => {}
                _ => panic!("redis-server exited before it was ready"),
            }
        }
        // Keep draining its log so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Some(Self { child, url: format!("redis://127.0.0.1:{port}"), _dir: dir })
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
