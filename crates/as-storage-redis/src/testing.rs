//! Test harness: private `redis-server` processes and a local 3-master cluster.
//!
//! Enabled by the `test-utils` feature. Every server listens on a free loopback port, keeps its
//! files in a temporary directory and is killed on drop. When `redis-server` is not on `PATH`
//! the constructors print `skipping: redis-server not found` and return `None`, so a test can
//! `let Some(server) = RedisServer::start() else { return };`. With [`REQUIRE_REDIS_VAR`]
//! (`AS_REQUIRE_REDIS`) set, as `.ci/run` sets it, they panic instead: CI never skips the Redis tiers.
//!
//! ```no_run
//! use as_storage_redis::testing::RedisServer;
//! let Some(server) = RedisServer::start() else { return };
//! println!("{}", server.url());
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to answer `PING` after it was spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a cluster may take to report `cluster_state:ok`.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between two readiness probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(20);

/// The `redis-server` binary on `PATH`, if any.
pub fn redis_server_binary() -> Option<PathBuf> {
    find_on_path("redis-server")
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// The environment variable that turns a missing `redis-server` from a printed skip into a test
/// failure; `.ci/run` sets it, so CI can never skip the Redis tiers unseen. Any value but an
/// empty one, `0`, `false` or `no` (in any case) turns it on.
pub const REQUIRE_REDIS_VAR: &str = "AS_REQUIRE_REDIS";

/// [`redis_server_binary`] for a test that needs it: when it is missing, prints `skipping:
/// redis-server not found` and returns `None`, or panics when [`REQUIRE_REDIS_VAR`] is set.
///
/// # Panics
/// When `redis-server` is missing and [`REQUIRE_REDIS_VAR`] is set (test code only).
#[allow(clippy::panic)]
pub fn redis_server_or_skip() -> Option<PathBuf> {
    let found = redis_server_binary();
    if found.is_none() {
        if redis_required() {
            panic!("redis-server not found on PATH, and {REQUIRE_REDIS_VAR} is set: the Redis tier must run");
        }
        println!("skipping: redis-server not found");
    }
    found
}

fn redis_required() -> bool {
    std::env::var(REQUIRE_REDIS_VAR).is_ok_and(|v| turns_on(&v))
}

/// Whether a value of [`REQUIRE_REDIS_VAR`] turns the requirement on.
fn turns_on(value: &str) -> bool {
    !matches!(value.trim().to_ascii_lowercase().as_str(), "" | "0" | "false" | "no")
}

/// A loopback port that nothing listens on right now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Sends one inline command and returns the first reply chunk (best effort, for probes).
pub fn raw_command(port: u16, command: &str) -> std::io::Result<String> {
    send(port, format!("{command}\r\n").as_bytes())
}

/// Sends one command given as its arguments (any bytes: values with spaces, quotes or line breaks,
/// such as a record's JSON) and returns the first reply chunk, e.g. `+OK` or `:1`.
///
/// ```no_run
/// # let port = 6379;
/// let reply = as_storage_redis::testing::command(port, &["SET", "k", "a value with spaces"])?;
/// assert!(reply.starts_with("+OK"));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn command(port: u16, args: &[&str]) -> std::io::Result<String> {
    let mut resp = format!("*{}\r\n", args.len());
    for a in args {
        resp.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    send(port, resp.as_bytes())
}

fn send(port: u16, bytes: &[u8]) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.set_write_timeout(Some(Duration::from_millis(500)))?;
    stream.write_all(bytes)?;
    let mut buf = vec![0u8; 16 * 1024];
    let n = stream.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn wait_until(deadline: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if probe() {
            return true;
        }
        if start.elapsed() > deadline {
            return false;
        }
        std::thread::sleep(PROBE_INTERVAL);
    }
}

/// A private `redis-server` on a free loopback port, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    binary: PathBuf,
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    args: Vec<String>,
}

impl RedisServer {
    /// Starts a throw-away server (`--save '' --appendonly no`). `None` when `redis-server` is missing
    /// (see [`redis_server_or_skip`]).
    ///
    /// # Panics
    /// When the server cannot be started or does not answer `PING` in time, or `redis-server` is
    /// missing while [`REQUIRE_REDIS_VAR`] is set (test code only).
    #[allow(clippy::panic)]
    pub fn start() -> Option<Self> {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a server with extra arguments (for example `--appendonly yes --appendfsync always`).
    /// `None` when `redis-server` is missing (see [`redis_server_or_skip`]).
    ///
    /// # Panics
    /// When the server cannot be started or does not answer `PING` in time, or `redis-server` is
    /// missing while [`REQUIRE_REDIS_VAR`] is set (test code only).
    #[allow(clippy::panic)]
    pub fn start_with(args: &[&str]) -> Option<Self> {
        let binary = redis_server_or_skip()?;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let port = free_port().unwrap_or_else(|e| panic!("free port: {e}"));
        let mut server = Self { binary, child: None, port, dir, args: args.iter().map(|s| (*s).to_owned()).collect() };
        server.spawn().unwrap_or_else(|e| panic!("redis-server on port {port}: {e}"));
        Some(server)
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let child = Command::new(&self.binary)
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        let port = self.port;
        if wait_until(READY_TIMEOUT, || raw_command(port, "PING").is_ok_and(|r| r.starts_with("+PONG"))) {
            Ok(())
        } else {
            self.kill();
            Err(std::io::Error::other("redis-server did not answer PING in time"))
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server with SIGKILL (no shutdown save) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory (an AOF, if enabled, is reloaded).
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        self.spawn()
    }

    /// Freezes the process (SIGSTOP): connections stay open but nothing is answered.
    pub fn pause(&self) -> std::io::Result<()> {
        self.signal(nix::sys::signal::Signal::SIGSTOP)
    }

    /// Unfreezes the process (SIGCONT).
    pub fn resume(&self) -> std::io::Result<()> {
        self.signal(nix::sys::signal::Signal::SIGCONT)
    }

    fn signal(&self, sig: nix::sys::signal::Signal) -> std::io::Result<()> {
        let pid = self.pid().ok_or_else(|| std::io::Error::other("server is not running"))?;
        let pid = i32::try_from(pid).map_err(std::io::Error::other)?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).map_err(std::io::Error::other)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A paused process ignores SIGKILL only until it is continued; SIGKILL works on stopped ones too.
        self.kill();
    }
}

/// A local Redis Cluster of three masters (no replicas), torn down on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

fn cluster_port() -> std::io::Result<u16> {
    // The cluster bus listens on port + 10000, so both must be free.
    for _ in 0..200 {
        let base = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let candidate = 20_000 + base % 30_000;
        let ok = TcpListener::bind(("127.0.0.1", candidate)).is_ok()
            && TcpListener::bind(("127.0.0.1", candidate + 10_000)).is_ok();
        if ok {
            return Ok(candidate);
        }
    }
    Err(std::io::Error::other("no free port pair for a cluster node"))
}

impl RedisCluster {
    /// Starts three `--cluster-enabled yes` servers and joins them with `redis-cli --cluster create`.
    /// `None` when `redis-server` (or `redis-cli`) is missing (see [`redis_server_or_skip`]).
    ///
    /// # Panics
    /// When the cluster cannot be formed in time, or either binary is missing while
    /// [`REQUIRE_REDIS_VAR`] is set (test code only).
    #[allow(clippy::panic)]
    pub fn start() -> Option<Self> {
        let binary = redis_server_or_skip()?;
        let Some(cli) = find_on_path("redis-cli") else {
            if redis_required() {
                panic!("redis-cli not found on PATH, and {REQUIRE_REDIS_VAR} is set: the cluster tier must run");
            }
            println!("skipping: redis-cli not found");
            return None;
        };
        let mut nodes = Vec::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
            let port = cluster_port().unwrap_or_else(|e| panic!("{e}"));
            let mut node = RedisServer {
                binary: binary.clone(),
                child: None,
                port,
                dir,
                args: [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            };
            node.spawn().unwrap_or_else(|e| panic!("cluster node on port {port}: {e}"));
            nodes.push(node);
        }
        let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let out = Command::new(cli)
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("redis-cli --cluster create: {e}"));
        if !out.status.success() {
            panic!("redis-cli --cluster create failed: {}", String::from_utf8_lossy(&out.stdout));
        }
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        let ready = wait_until(CLUSTER_TIMEOUT, || {
            ports.iter().all(|p| raw_command(*p, "CLUSTER INFO").is_ok_and(|r| r.contains("cluster_state:ok")))
        });
        if !ready {
            panic!("cluster did not reach cluster_state:ok");
        }
        Some(Self { nodes })
    }

    /// `redis://127.0.0.1:<p1>?node=127.0.0.1:<p2>&node=127.0.0.1:<p3>` (a clustered fred URL).
    pub fn url(&self) -> String {
        let mut url = format!("redis-cluster://127.0.0.1:{}", self.nodes[0].port);
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            url.push(if i == 1 { '?' } else { '&' });
            url.push_str(&format!("node=127.0.0.1:{}", n.port));
        }
        url
    }

    /// The nodes' ports.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn require_redis_values() {
        for (value, on) in
            [("1", true), ("yes", true), ("true", true), ("", false), ("0", false), ("false", false), (" No ", false)]
        {
            assert_eq!(super::turns_on(value), on, "{value:?}");
        }
    }
}
