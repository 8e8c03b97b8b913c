//! A TCP proxy in front of a redis-server that refuses chosen writes: the fault hook of the
//! conformance scenario `save_turn_failure_at_any_write_leaves_nothing`, from outside the store.
//!
//! Each client connection gets its own upstream connection, and the proxy relays **one command
//! at a time**, in order: it reads one complete RESP command from the client, forwards it, reads
//! exactly one complete reply from the server and sends it back, then reads the next command
//! (pipelined commands, such as the staged update's `SET` + `EVALSHA`, wait in the socket's
//! buffer meanwhile, so they are handled, and answered, in the order sent).
//!
//! Every command that can write counts as a low-level write: every command except the read-only
//! and connection-level ones in [`NOT_WRITES`] (scripts always count). Armed at `n`, the proxy
//! lets writes `0..n` through and does **not** forward write `n`: the client gets the error
//! reply [`INJECTED`] instead, so the server never ran it (a definite failure); the writes after
//! it go through again (one fault per arming).
//!
//! A protocol error or a panic in a connection task is recorded, and [`Faults::arm`] and
//! [`Faults::disarm`] then return it as an error (and dropping the proxy panics), so it fails the
//! test instead of being lost with the task. I/O errors (a side closing its socket) just end the
//! connection, closing the other side too.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use as_storage::conformance::Faults;
use as_storage::{StorageError, StorageErrorKind};
use futures::FutureExt as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The marker in every injected fault's message.
pub const MARKER: &str = "as-storage-redis conformance fault injected";

/// The error reply an injected fault sends instead of the server's reply.
pub const INJECTED: &[u8] = b"-ERR as-storage-redis conformance fault injected\r\n";

/// Commands that never write (compared upper-case). Every other command counts as a write.
pub const NOT_WRITES: &[&str] = &[
    "GET",
    "MGET",
    "GETRANGE",
    "STRLEN",
    "TYPE",
    "EXISTS",
    "LRANGE",
    "LINDEX",
    "LLEN",
    "SMEMBERS",
    "SISMEMBER",
    "SMISMEMBER",
    "SCARD",
    "SSCAN",
    "SCAN",
    "KEYS",
    "DBSIZE",
    "TTL",
    "PTTL",
    "PING",
    "ECHO",
    "INFO",
    "CLIENT",
    "HELLO",
    "SELECT",
    "AUTH",
    "SCRIPT",
    "CLUSTER",
    "COMMAND",
    "READONLY",
    "READWRITE",
    "ROLE",
    "QUIT",
    "TIME",
];

/// Refuses one write while armed (shared by the proxy's tasks and the [`Faults`] hook).
pub struct ProxyFaults {
    /// `Some(k)`: the write after the next `k` ones is refused; `None`: disarmed.
    countdown: Mutex<Option<usize>>,
    /// The first protocol error or panic in a proxy task.
    problem: Mutex<Option<String>>,
}

impl ProxyFaults {
    fn new() -> Self {
        Self { countdown: Mutex::new(None), problem: Mutex::new(None) }
    }

    /// Whether the write about to be forwarded is to be refused (counts it).
    fn refuse_next_write(&self) -> bool {
        let mut countdown = self.countdown.lock().unwrap_or_else(PoisonError::into_inner);
        match *countdown {
            None => false,
            Some(0) => {
                *countdown = None;
                true
            }
            Some(k) => {
                *countdown = Some(k - 1);
                false
            }
        }
    }

    fn record(&self, problem: String) {
        self.problem.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(problem);
    }

    fn problem(&self) -> Option<String> {
        self.problem.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn check(&self, op: &'static str) -> Result<(), StorageError> {
        match self.problem() {
            None => Ok(()),
            Some(p) => Err(StorageError::new(StorageErrorKind::Backend, "redis-test", op, format!("fault proxy: {p}"))),
        }
    }
}

#[async_trait::async_trait]
impl Faults for ProxyFaults {
    async fn arm(&self, n: usize) -> Result<(), StorageError> {
        self.check("arm")?;
        *self.countdown.lock().unwrap_or_else(PoisonError::into_inner) = Some(n);
        Ok(())
    }

    async fn disarm(&self) -> Result<(), StorageError> {
        *self.countdown.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.check("disarm")
    }

    /// The server error reply [`INJECTED`], as the store reports it (`map_fred`: a `Backend` error
    /// with the reply's text in its message).
    fn is_injected(&self, error: &StorageError) -> bool {
        error.kind() == StorageErrorKind::Backend && error.message().contains(MARKER)
    }
}

/// The proxy: listening until dropped (which ends its connections too).
pub struct FaultProxy {
    addr: SocketAddr,
    faults: Arc<ProxyFaults>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on `127.0.0.1:0` in front of the server at `upstream`, disarmed.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let faults = Arc::new(ProxyFaults::new());
        let accept = tokio::spawn(accept_loop(listener, upstream, faults.clone()));
        Ok(Self { addr, faults, accept })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The fault hook.
    pub fn faults(&self) -> Arc<ProxyFaults> {
        self.faults.clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every connection task.
        self.accept.abort();
        if let Some(p) = self.faults.problem()
            && !std::thread::panicking()
        {
            panic!("fault proxy: {p}");
        }
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, faults: Arc<ProxyFaults>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    let faults = faults.clone();
                    connections.spawn(async move {
                        let relay = std::panic::AssertUnwindSafe(relay(client, upstream, &faults)).catch_unwind();
                        match relay.await {
                            Ok(Ok(())) => {}
                            Ok(Err(Problem::Io)) => {}
                            Ok(Err(Problem::Protocol(p))) => faults.record(p),
                            Err(panic) => {
                                let what = panic
                                    .downcast_ref::<&str>()
                                    .map(|s| (*s).to_owned())
                                    .or_else(|| panic.downcast_ref::<String>().cloned())
                                    .unwrap_or_default();
                                faults.record(format!("a connection task panicked: {what}"));
                            }
                        }
                    });
                }
                Err(e) => {
                    faults.record(format!("accept failed: {e}"));
                    return;
                }
            },
            // Reap finished connection tasks (their outcome is recorded by the task itself).
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Why a connection ended early.
enum Problem {
    /// A socket closed or failed: the connection just ends.
    Io,
    /// Not RESP: recorded, it fails the test.
    Protocol(String),
}

impl From<std::io::Error> for Problem {
    fn from(_: std::io::Error) -> Self {
        Self::Io
    }
}

/// Relays `client`'s commands to a new connection to `upstream`, one at a time, refusing the
/// armed write. Ends when the client closes its connection (or either side fails).
async fn relay(client: TcpStream, upstream: SocketAddr, faults: &ProxyFaults) -> Result<(), Problem> {
    client.set_nodelay(true)?;
    let server = TcpStream::connect(upstream).await?;
    server.set_nodelay(true)?;
    let (client_read, mut client_write) = client.into_split();
    let (server_read, mut server_write) = server.into_split();
    let (mut client_read, mut server_read) = (BufReader::new(client_read), BufReader::new(server_read));
    loop {
        let Some(command) = read_value(&mut client_read).await? else { return Ok(()) };
        let name = command.first_bulk.as_deref().map(|n| String::from_utf8_lossy(n).to_ascii_uppercase());
        let Some(name) = name.filter(|_| command.raw.first() == Some(&b'*')) else {
            return Err(Problem::Protocol(format!(
                "the client sent something other than a command array: {:?}",
                String::from_utf8_lossy(&command.raw[..command.raw.len().min(80)])
            )));
        };
        let write = !NOT_WRITES.contains(&name.as_str());
        if write && faults.refuse_next_write() {
            client_write.write_all(INJECTED).await?;
            continue;
        }
        server_write.write_all(&command.raw).await?;
        let Some(reply) = read_value(&mut server_read).await? else { return Err(Problem::Io) };
        client_write.write_all(&reply.raw).await?;
    }
}

/// One complete RESP value, as read.
struct Value {
    /// Its bytes, exactly as received.
    raw: Vec<u8>,
    /// The contents of the first bulk string in it (a command's name).
    first_bulk: Option<Vec<u8>>,
}

/// Longest bulk string accepted (Redis's own limit).
const MAX_BULK: usize = 512 * 1024 * 1024;

/// Reads one complete RESP2 or RESP3 value (nested aggregates included); `None` on a clean end
/// of the stream before it.
async fn read_value<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Result<Option<Value>, Problem> {
    let mut raw = Vec::new();
    let mut first_bulk = None;
    // Values still to read: an aggregate adds its elements.
    let mut pending: usize = 1;
    while pending > 0 {
        pending -= 1;
        let start = raw.len();
        if r.read_until(b'\n', &mut raw).await? == 0 {
            return if start == 0 { Ok(None) } else { Err(Problem::Io) };
        }
        let line = &raw[start..];
        if !line.ends_with(b"\r\n") {
            return Err(Problem::Io); // the stream ended inside the line
        }
        let (kind, body) = (line[0], &line[1..line.len() - 2]);
        let length = || -> Result<i64, Problem> {
            std::str::from_utf8(body)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| Problem::Protocol(format!("bad length in {:?}", String::from_utf8_lossy(&raw[start..]))))
        };
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            b'$' | b'!' | b'=' => {
                let len = length()?;
                if len < 0 {
                    continue; // null bulk string
                }
                let len = usize::try_from(len)
                    .ok()
                    .filter(|l| *l <= MAX_BULK)
                    .ok_or_else(|| Problem::Protocol(format!("bulk string of {len} bytes")))?;
                let at = raw.len();
                raw.resize(at + len + 2, 0);
                r.read_exact(&mut raw[at..]).await?;
                if !raw.ends_with(b"\r\n") {
                    return Err(Problem::Protocol("a bulk string not followed by CRLF".into()));
                }
                if first_bulk.is_none() && kind == b'$' {
                    first_bulk = Some(raw[at..at + len].to_vec());
                }
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = length()?;
                if n < 0 {
                    continue; // null array
                }
                let n = usize::try_from(n).map_err(|_| Problem::Protocol("bad aggregate length".into()))?;
                pending += match kind {
                    b'%' => 2 * n,
                    // Attributes: n pairs, then the value they describe.
                    b'|' => 2 * n + 1,
                    _ => n,
                };
            }
            other => {
                return Err(Problem::Protocol(format!(
                    "unknown RESP type {:?} in {:?}",
                    char::from(other),
                    String::from_utf8_lossy(&raw[start..])
                )));
            }
        }
    }
    Ok(Some(Value { raw, first_bulk }))
}
