//! Reliability, isolation and secrets: one user's sessions are invisible to another (and to another agent of the
//! same user) through every storage API on memory, SQLite and Redis and through every `agentscope sessions`
//! command; API keys and Redis passwords never appear in stored records, message logs, events, errors or logs
//! captured at TRACE; Redis with `requirepass` works.

// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod reliability;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use as_agent::{Agent, AgentErrorKind, ReplyInput, ReplyStatus, SessionRunner};
use as_message::Msg;
use as_model::RetryPolicy;
use as_model_openai::test_server::{MockReply, MockServer, chunk};
use as_model_openai::{ApiKey, OpenAiCompatibleConfig, OpenAiCompatibleModel, Preset};
use as_state::AgentState;
use as_storage::{Owner, PageRequest, SessionConfig, SharedStorage, StorageBase, StorageErrorKind, UpsertSession};
use as_storage_redis::testing::{RedisServer, raw_command};
use as_storage_redis::{RedisStorage, RedisStorageConfig};
use reliability::figure;

/// Every way `intruder` could reach `victim`'s session `id`: nothing is visible, nothing changes.
async fn isolation(backend: &str, storage: SharedStorage) {
    let victim = Owner::new("alice", "friday");
    let mut state = AgentState::for_session("secret-1");
    state.context.push(Msg::user("alice", "alice's private words"));
    let rec = storage
        .upsert_session(
            UpsertSession::new(victim.clone(), SessionConfig::new("ws")).with_session_id("secret-1").with_state(state),
        )
        .await
        .unwrap();
    let key = victim.session("secret-1");
    storage.upsert_message(&key, &Msg::user("alice", "logged")).await.unwrap();
    let logged = storage.list_messages(&key, 0, 0).await.unwrap();
    // Every probe is counted; one that sees or changes the victim's data is a leak.
    let (mut probes, mut leaks) = (0, Vec::new());
    let mut probe = |ok: bool, what: String| {
        probes += 1;
        if !ok {
            leaks.push(what);
        }
    };
    for intruder in [Owner::new("bob", "friday"), Owner::new("alice", "other-agent"), Owner::new("bob", "other-agent")]
    {
        let k = intruder.session("secret-1");
        probe(storage.get_session(&k).await.unwrap().is_none(), format!("get {intruder:?}"));
        let page = storage.list_sessions(&intruder, &PageRequest::default()).await.unwrap();
        probe(page.sessions.iter().all(|s| s.id != "secret-1"), format!("list {intruder:?}"));
        let r = storage.update_session_state(&k, &AgentState::for_session("secret-1"), None).await;
        probe(
            matches!(&r, Err(e) if e.kind() == StorageErrorKind::NotFound),
            format!("update {intruder:?}: {:?}", r.map(|_| ())),
        );
        probe(!storage.delete_session(&k).await.unwrap(), format!("delete {intruder:?}"));
        let r = storage.upsert_message(&k, &Msg::user("bob", "injected")).await;
        probe(
            matches!(&r, Err(e) if e.kind() == StorageErrorKind::NotFound),
            format!("upsert_message {intruder:?}: {r:?}"),
        );
        probe(storage.get_message(&k, &logged[0].id).await.unwrap().is_none(), format!("get_message {intruder:?}"));
        probe(storage.list_messages(&k, 0, 0).await.unwrap().is_empty(), format!("list_messages {intruder:?}"));
        // Creating "the same" session as someone else never touches the victim's.
        match storage
            .upsert_session(
                UpsertSession::new(intruder.clone(), SessionConfig::new("evil")).with_session_id("secret-1"),
            )
            .await
        {
            Ok(r) => {
                probe(r.state.context.is_empty(), format!("upsert_session {intruder:?}: not a fresh session"));
                assert!(storage.delete_session(&k).await.unwrap());
            }
            Err(e) => probe(e.kind() == StorageErrorKind::AlreadyExists, format!("upsert_session {intruder:?}: {e}")),
        }
    }
    figure(&format!("isolation.api.{backend}.probes"), probes);
    figure(&format!("isolation.api.{backend}.leaks"), leaks.len());
    assert!(leaks.is_empty(), "{backend}: {leaks:?}");
    assert_eq!(storage.get_session(&key).await.unwrap().unwrap(), rec, "{backend}: the victim's record is untouched");
    assert_eq!(storage.list_messages(&key, 0, 0).await.unwrap().len(), 1, "{backend}");
}

#[tokio::test]
async fn isolation_memory() {
    isolation("memory", reliability::memory().await).await;
}

#[tokio::test]
async fn isolation_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    isolation("sqlite", reliability::sqlite(&dir.path().join("s.db")).await).await;
}

#[tokio::test]
async fn isolation_redis() {
    let Some(server) = RedisServer::start() else { return };
    isolation("redis", reliability::redis(&server.url()).await).await;
}

/// The `agentscope` binary: `AGENTSCOPE_BIN`, else next to this test's `deps` directory.
fn agentscope_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AGENTSCOPE_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("agentscope");
    p.exists().then_some(p)
}

#[test]
fn isolation_cli() {
    let Some(bin) = agentscope_bin() else {
        println!("skipping: the agentscope binary is not built (cargo build -p as-cli, or set AGENTSCOPE_BIN)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = format!("sqlite:{}", dir.path().join("cli.db").display());
    let run = |args: &[&str]| {
        let out = Command::new(&bin).arg("--storage").arg(&storage).args(args).env("NO_COLOR", "1").output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let state = dir.path().join("state.json");
    let mut s = AgentState::for_session("secret-1");
    s.context.push(Msg::user("alice", "alice's private words"));
    std::fs::write(&state, as_message::to_json(&s)).unwrap();
    let (code, _, err) = run(&[
        "sessions",
        "create",
        "--user",
        "alice",
        "--agent",
        "friday",
        "--session",
        "secret-1",
        "--state",
        state.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    // Every probe is counted; one that shows alice's session or changes it is a leak (3: not found).
    let (mut probes, mut leaks) = (0, Vec::new());
    let mut probe = |ok: bool, what: String| {
        probes += 1;
        if !ok {
            leaks.push(what);
        }
    };
    for (user, agent) in [("bob", "friday"), ("alice", "other-agent")] {
        let owner = ["--user", user, "--agent", agent];
        let (code, out, _) = run(&[&["sessions", "show"][..], &owner, &["--session", "secret-1"]].concat());
        probe(code == Some(3), format!("show as {user}/{agent}: {code:?} {out}"));
        let (code, out, _) = run(&[&["sessions", "list"][..], &owner, &["--json"]].concat());
        probe(code == Some(0) && !out.contains("secret-1"), format!("list as {user}/{agent}: {code:?} {out}"));
        let (code, _, _) = run(&[
            &["sessions", "set-state"][..],
            &owner,
            &["--session", "secret-1", state.to_str().unwrap()],
        ]
        .concat());
        probe(code == Some(3), format!("set-state as {user}/{agent}: {code:?}"));
        let (code, _, _) = run(&[&["sessions", "delete"][..], &owner, &["--session", "secret-1"]].concat());
        probe(code == Some(3), format!("delete as {user}/{agent}: {code:?}"));
        let (code, out, _) = run(&["sessions", "export", "--user", user, "--agent", agent]);
        probe(code == Some(0) && !out.contains("private words"), format!("export as {user}/{agent}: {code:?}"));
    }
    let (code, out, _) = run(&["sessions", "export", "--user", "bob"]);
    probe(code == Some(0) && !out.contains("private words"), format!("export of all bob's agents: {code:?}"));
    figure("isolation.cli.probes", probes);
    figure("isolation.cli.leaks", leaks.len());
    assert!(leaks.is_empty(), "{leaks:?}");
    let (code, out, _) = run(&["sessions", "show", "--user", "alice", "--agent", "friday", "--session", "secret-1"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("private words"), "the owner still sees it: {out}");
}

/// A `MakeWriter` into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

const API_KEY: &str = "sk-reliability-SECRET-api-key-4242";
const PASSWORD: &str = "redis-SECRET-pw-7777";

/// Secrets never leak: an agent turn with an API key over a Redis store with a password, a failing model call
/// (401) and a wrong password, all logged at TRACE; then every stored byte, event, error and log line is searched.
#[tokio::test]
async fn secrets_never_leak_and_requirepass_works() {
    let Some(server) = RedisServer::start() else { return };
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    assert!(raw_command(server.port(), &format!("CONFIG SET requirepass {PASSWORD}")).unwrap().starts_with('+'));
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", server.port());
    let mut texts: Vec<String> = Vec::new();

    // requirepass: without the password, and with a wrong one, the store refuses, typed, without echoing it.
    let bad_urls = [
        format!("redis://127.0.0.1:{}", server.port()),
        format!("redis://:wrong-{PASSWORD}@127.0.0.1:{}", server.port()),
    ];
    let mut refused = 0;
    for bad in &bad_urls {
        let s =
            RedisStorage::new(RedisStorageConfig::from_url(bad).unwrap().with_timeout(Duration::from_secs(2))).unwrap();
        let r = match s.open().await {
            Err(e) => Err(e),
            Ok(()) => s.get_session(&Owner::new("u", "a").session("s")).await.map(|_| ()),
        };
        if let Err(e) = r {
            refused += 1;
            texts.push(format!("{e} {e:?}"));
        }
    }
    figure("secrets.requirepass_refused", refused);
    assert_eq!(refused, bad_urls.len(), "a missing or wrong password is refused");
    let cfg = RedisStorageConfig::from_url(&url).unwrap();
    texts.push(format!("{cfg:?}"));
    let storage: SharedStorage = Arc::new(RedisStorage::new(cfg).unwrap());
    storage.open().await.unwrap();
    texts.push(format!("{storage:?}"));

    let model_server = MockServer::start().await.unwrap();
    let cfg = OpenAiCompatibleConfig::preset(Preset::OpenAi, "gpt-test")
        .with_base_url(model_server.base_url())
        .with_api_key(ApiKey::new(API_KEY))
        .with_retry(RetryPolicy::new(1, Duration::from_millis(5)));
    texts.push(format!("{cfg:?}"));
    let agent = Agent::builder("Friday", "sys", Arc::new(OpenAiCompatibleModel::new(cfg).unwrap())).build().unwrap();
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let key = Owner::new("alice", "friday").session("s1");
    model_server.push(MockReply::sse([chunk::text("hello"), chunk::finish("stop")]));
    let out = runner
        .run_turn(&agent, &key, ReplyInput::user_text("hi"), &mut |e| {
            texts.push(format!("{e:?} {}", as_message::to_json(e)))
        })
        .await;
    // A turn over the store opened with the password: it completes (1) or not (0).
    let requirepass_works = usize::from(matches!(&out, Ok(o) if o.status == ReplyStatus::Completed));
    figure("secrets.requirepass_works", requirepass_works);
    assert_eq!(requirepass_works, 1, "requirepass works end to end: {out:?}");
    model_server.push(MockReply::error(401, "Incorrect API key provided: sk-reli...4242", Some("invalid_api_key")));
    let e = runner
        .run_turn(&agent, &key, ReplyInput::user_text("again"), &mut |e| texts.push(format!("{e:?}")))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), AgentErrorKind::Model);
    texts.push(format!("{e} {e:?}"));
    // Positive control: the key really went to the server.
    assert!(model_server.requests().iter().any(|r| r.header("authorization").is_some_and(|h| h.contains(API_KEY))));

    let rec = storage.get_session(&key).await.unwrap().unwrap();
    texts.push(rec.to_canonical_json());
    for m in storage.list_messages(&key, 0, 0).await.unwrap() {
        texts.push(as_message::to_json(&m));
    }
    drop(_guard);
    let log = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let log_lines = log.lines().count();
    texts.push(log);
    let mut checked = 0;
    let mut leaks = 0;
    for t in &texts {
        for secret in [API_KEY, PASSWORD] {
            checked += 1;
            if t.contains(secret) {
                leaks += 1;
                eprintln!("LEAK of {secret:?} in: {}", &t[..t.len().min(2000)]);
            }
        }
    }
    figure("secrets.texts_checked", checked);
    figure("secrets.trace_log_lines", log_lines);
    figure("secrets.leaks", leaks);
    assert!(log_lines > 0, "tracing captured nothing: the check would be vacuous");
    assert_eq!(leaks, 0);
}

/// Makes a CA and a server certificate for 127.0.0.1 with the `openssl` CLI (at test time, in `dir`).
/// `None` when `openssl` is not installed.
fn make_certs(dir: &std::path::Path) -> Option<()> {
    let openssl = |args: &[&str]| -> Option<()> {
        let out = Command::new("openssl").args(args).current_dir(dir).output().ok()?;
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Some(())
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=reliability-test-ca",
    ])?;
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ])?;
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")
        .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    ])
}

/// Redis over TLS with a certificate made at test time. `RedisStorageConfig` trusts the system roots
/// (rustls-native-certs), so the client part runs in a child process with `SSL_CERT_FILE` pointing at the test CA
/// (setting the variable in this process would need `unsafe`, which the workspace forbids).
#[test]
fn redis_over_tls_works() {
    if std::env::var_os("AS_TLS_URL").is_some() {
        return tls_child();
    }
    if as_storage_redis::testing::redis_server_or_skip().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    if make_certs(dir.path()).is_none() {
        println!("skipping: openssl CLI not found (needed to make the test certificate)");
        return;
    }
    let tls_port = as_storage_redis::testing::free_port().unwrap().to_string();
    let p = |f: &str| dir.path().join(f).display().to_string();
    let (cert, key, ca) = (p("server.crt"), p("server.key"), p("ca.crt"));
    let server = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ])
    .unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["redis_over_tls_works", "--exact", "--nocapture", "--test-threads=1"])
        .env("AS_TLS_URL", format!("rediss://127.0.0.1:{tls_port}"))
        .env("SSL_CERT_FILE", &ca)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The child's round trip over TLS succeeded (1) or not (0); the record must really be in the TLS server.
    let keys = raw_command(server.port(), "KEYS *").unwrap();
    let tls_works =
        usize::from(out.status.success() && stdout.contains("TLS_ROUND_TRIP_OK") && keys.contains("tls-session"));
    figure("secrets.redis_tls_works", tls_works);
    assert_eq!(tls_works, 1, "keys: {keys}\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}

fn tls_child() {
    let url = std::env::var("AS_TLS_URL").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let cfg = RedisStorageConfig::from_url(&url).unwrap().with_timeout(Duration::from_secs(5));
        assert!(cfg.uses_tls());
        let s = RedisStorage::new(cfg).unwrap();
        s.open().await.unwrap();
        let owner = Owner::new("tls-user", "tls-agent");
        let rec = s
            .upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws")).with_session_id("tls-session"))
            .await
            .unwrap();
        assert_eq!(s.get_session(&owner.session("tls-session")).await.unwrap().unwrap(), rec);
        println!("TLS_ROUND_TRIP_OK");
    });
}
