//! Reliability, hostile input: proptest mutations of the golden corpus through the parsers of `AgentState`,
//! `SessionRecord`, `AgentEvent` and the provider's SSE framing + chunk parser (no panic; 2 000 cases per target,
//! 100 000 with `AS_RELIABILITY_FULL=1`), and a crafted corpus: deeply nested JSON, 100 MB strings against the
//! default record limit, ids built to collide, wrong Redis types, tool arguments that are not JSON.

// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod reliability;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use as_agent::testkit::EchoTool;
use as_agent::{Agent, AgentEvent, ReplyInput, ReplyStatus, SessionRunner};
use as_message::{ContentBlock, Msg, ToolResultState, from_json, from_json_slice, to_json};
use as_model::{ScriptedModel, ScriptedTurn};
use as_model_openai::test_server::chunk;
use as_model_openai::{ReasoningField, SseParser, StreamState};
use as_state::AgentState;
use as_storage::{
    Owner, PageRequest, SessionConfig, SessionKey, SessionRecord, SharedStorage, StorageErrorKind, UpsertSession,
};
use as_storage_redis::testing::{RedisServer, raw_command};
use as_tools::Toolkit;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use reliability::{figure, scale};

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/agentscope-2.0.4").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"null",
    b"true",
    b"-0",
    b"1e999999",
    b"123456789012345678901234567890",
    b"\"\\ud800\"",
    b"\xff\xfe",
    b"\"type\":\"tool_call\"",
    b"\"role\":\"system\"",
    b"{\"type\":",
    b"\\u0000",
    b"data: ",
    b"\n\n",
    b"\r\n",
    b"[DONE]",
];

/// Mutation operations on a seed: (position, op, byte).
fn mutations() -> impl Strategy<Value = (usize, Vec<(prop::sample::Index, u8, u8)>)> {
    (any::<usize>(), prop::collection::vec((any::<prop::sample::Index>(), 0u8..6, any::<u8>()), 0..10))
}

fn mutate(seed: &[u8], ops: &[(prop::sample::Index, u8, u8)]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for (at, op, byte) in ops {
        let i = if b.is_empty() { 0 } else { at.index(b.len()) };
        match op {
            0 if !b.is_empty() => b[i] ^= byte | 1,
            1 if !b.is_empty() => {
                b.remove(i);
            }
            2 => b.insert(i.min(b.len()), *byte),
            3 => b.truncate(i),
            4 => {
                let t = TOKENS[*byte as usize % TOKENS.len()];
                let i = i.min(b.len());
                b.splice(i..i, t.iter().copied());
            }
            _ => {
                let end = (i + *byte as usize).min(b.len());
                let piece = b[i.min(end)..end].to_vec();
                b.splice(i.min(b.len())..i.min(b.len()), piece);
            }
        }
    }
    b
}

/// What a parser made of one input.
enum Parsed {
    Rejected,
    Accepted,
    /// Accepted, but what it wrote back does not read again, or reads as something that writes differently.
    RoundTripFailed(String),
}

/// Reads `b` with `read`; an accepted value is written with `write`, read again with `reread`, and written again:
/// the second writing must be the first one, byte for byte.
fn round_trip<T, E: std::fmt::Display>(
    b: &[u8],
    read: impl Fn(&[u8]) -> Option<T>,
    reread: impl Fn(&str) -> Result<T, E>,
    write: impl Fn(&T) -> String,
) -> Parsed {
    let Some(value) = read(b) else { return Parsed::Rejected };
    let first = write(&value);
    match reread(&first) {
        Err(e) => Parsed::RoundTripFailed(format!("written back, it does not read again ({e}): {first}")),
        Ok(again) => {
            let second = write(&again);
            if second == first {
                Parsed::Accepted
            } else {
                Parsed::RoundTripFailed(format!("read again, it writes differently:\n{first}\n{second}"))
            }
        }
    }
}

/// Runs `cases` mutated inputs from `seeds` through `parse`; a panic or a failed round trip fails the test.
fn fuzz(target: &str, seeds: Vec<Vec<u8>>, parse: impl Fn(&[u8]) -> Parsed) {
    let cases = scale(2_000, 100_000);
    let (tried, accepted, round_trip_failures) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    let first_failure = std::sync::Mutex::new(None);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let result = runner.run(&mutations(), |(pick, ops)| {
        let input = mutate(&seeds[pick % seeds.len()], &ops);
        tried.fetch_add(1, Ordering::Relaxed);
        match parse(&input) {
            Parsed::Rejected => {}
            Parsed::Accepted => {
                accepted.fetch_add(1, Ordering::Relaxed);
            }
            Parsed::RoundTripFailed(why) => {
                accepted.fetch_add(1, Ordering::Relaxed);
                round_trip_failures.fetch_add(1, Ordering::Relaxed);
                first_failure
                    .lock()
                    .unwrap()
                    .get_or_insert_with(|| format!("input {:?}: {why}", String::from_utf8_lossy(&input)));
            }
        }
        Ok(())
    });
    let round_trip_failures = round_trip_failures.load(Ordering::Relaxed);
    figure(&format!("hostile.fuzz.{target}.cases"), tried.load(Ordering::Relaxed));
    figure(&format!("hostile.fuzz.{target}.accepted"), accepted.load(Ordering::Relaxed));
    figure(&format!("hostile.fuzz.{target}.roundtrip_failures"), round_trip_failures);
    figure(&format!("hostile.fuzz.{target}.panics"), usize::from(result.is_err()));
    if let Err(e) = result {
        panic!("{target}: {e}");
    }
    assert_eq!(round_trip_failures, 0, "{target}: {}", first_failure.lock().unwrap().as_deref().unwrap_or(""));
}

#[test]
fn fuzz_agent_state() {
    let seeds = vec![fixture("rich_agent_state.compact.json"), fixture("empty_agent_state.compact.json")];
    // Whatever is accepted writes back, reads again, and writes the same.
    fuzz("agent_state", seeds, |b| {
        round_trip(b, |b| from_json_slice::<AgentState>(b).ok(), from_json::<AgentState>, to_json)
    });
}

#[test]
fn fuzz_session_record() {
    let seeds = vec![fixture("session_record.compact.json"), fixture("redis-session-after-cycle.compact.json")];
    fuzz("session_record", seeds, |b| {
        round_trip(
            b,
            |b| from_json_slice::<SessionRecord>(b).ok(),
            from_json::<SessionRecord>,
            |r| r.to_canonical_json(),
        )
    });
}

#[test]
fn fuzz_agent_event() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/agentscope-2.0.4");
    let mut seeds = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("events-") {
            seeds.extend(
                std::fs::read(&p).unwrap().split(|&c| c == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec),
            );
        }
    }
    assert!(seeds.len() > 50, "{}", seeds.len());
    fuzz("agent_event", seeds, |b| {
        round_trip(b, |b| from_json_slice::<AgentEvent>(b).ok(), from_json::<AgentEvent>, to_json)
    });
}

#[test]
fn fuzz_sse_chunks() {
    let events = [
        chunk::reasoning("Let me think"),
        chunk::text("Hel"),
        chunk::text("lo ✓ wörld"),
        chunk::tool_calls(&[(0, Some("call_1"), Some("get_weather"), r#"{"ci"#), (1, Some("call_2"), Some("f"), "{}")]),
        chunk::tool_call(0, None, None, r#"ty": "Oslo"}"#),
        chunk::finish("tool_calls"),
        chunk::usage(10, 20),
    ];
    let mut stream = String::from(": keep-alive\n\n");
    for e in &events {
        stream.push_str(&format!("data: {e}\n\n"));
    }
    stream.push_str("data: [DONE]\n\n");
    let seeds = vec![stream.into_bytes()];
    fuzz("sse_chunks", seeds, |b| {
        // Fed in uneven pieces, as a network would deliver it.
        let (mut parser, mut state) =
            (SseParser::new(), StreamState::new("openai", ReasoningField::ContentOrReasoning));
        let mut out = Vec::new();
        let mut ok = true;
        for piece in b.chunks(7) {
            if parser.feed(piece, &mut out).is_err() {
                ok = false;
                break;
            }
        }
        if ok && let Ok(Some(last)) = parser.finish() {
            out.push(last);
        }
        for data in out.iter().filter(|d| d.as_str() != "[DONE]") {
            ok &= state.parse_event(data).is_ok();
        }
        if ok { Parsed::Accepted } else { Parsed::Rejected }
    });
}

/// Deeply nested JSON: serde_json's recursion limit (128) turns it into a typed error, never a stack overflow
/// (which would abort the test binary: `cases` parses returned at all).
#[test]
fn deeply_nested_json_is_a_typed_error() {
    let (mut tried, mut must_fail, mut typed_errors) = (0, 0, 0);
    let mut accepted = Vec::new();
    for depth in [200usize, 10_000, 1_000_000] {
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let deep_obj = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        let rich = String::from_utf8(fixture("rich_agent_state.compact.json")).unwrap();
        let inner = rich.replacen("\"middle_context\":{", &format!("\"middle_context\":{{\"deep\":{deep},"), 1);
        assert_ne!(inner, rich, "the fixture has a middle_context");
        for (doc, name) in [(&deep, "deep"), (&inner, "inner")] {
            let chunk = if name == "inner" { format!("{{\"choices\":{deep}}}") } else { doc.clone() };
            let mut st = StreamState::new("openai", ReasoningField::ContentOrReasoning);
            let state = from_json::<AgentState>(doc).map(|_| ());
            // Where the nesting is inside a valid state, the parser must reach it and stop at the limit.
            if name == "inner"
                && let Err(e) = &state
            {
                assert!(e.to_string().contains("recursion limit"), "{e}");
            }
            for (parser, r) in [
                ("AgentState", state),
                ("SessionRecord", from_json::<SessionRecord>(doc).map(|_| ())),
                ("AgentEvent", from_json::<AgentEvent>(doc).map(|_| ())),
                ("Msg", from_json::<Msg>(doc).map(|_| ())),
            ] {
                (tried, must_fail) = (tried + 1, must_fail + 1);
                match r {
                    Err(_) => typed_errors += 1,
                    Ok(()) => accepted.push(format!("{parser}: {name} at depth {depth}")),
                }
            }
            (tried, must_fail) = (tried + 1, must_fail + 1);
            match st.parse_event(&chunk) {
                Err(_) => typed_errors += 1,
                Ok(_) => accepted.push(format!("chunk: {name} at depth {depth}")),
            }
        }
        // Deep nesting under an unknown key is skipped without recursion (serde_json ignores it iteratively),
        // as pydantic ignores extra keys: either outcome is fine, a crash is not.
        let _ = from_json::<AgentState>(&deep_obj);
        let _ = from_json::<SessionRecord>(&deep_obj);
        let _ = from_json::<AgentEvent>(&deep_obj);
        let _ = from_json::<Msg>(&deep_obj);
        tried += 4;
    }
    figure("hostile.deep_json.cases", tried);
    figure("hostile.deep_json.typed_errors", typed_errors);
    assert_eq!(typed_errors, must_fail, "accepted: {accepted:?}");
}

fn huge_state() -> AgentState {
    let mut s = AgentState::for_session("big");
    s.context.push(Msg::user("user", "x".repeat(100 * 1024 * 1024)));
    s
}

/// 100 MB strings against the default 64 MiB record limit: typed `TooLarge` before anything is written.
async fn too_large(backend: &str, storage: SharedStorage) {
    let owner = Owner::new("big-user", "big-agent");
    let key = owner.session("big");
    let rec = storage
        .upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws")).with_session_id("big"))
        .await
        .unwrap();
    let big = huge_state();
    let attempts = [
        ("update_session_state", storage.update_session_state(&key, &big, Some(&rec.revision())).await.map(|_| ())),
        (
            "upsert_session",
            storage
                .upsert_session(
                    UpsertSession::new(owner.clone(), SessionConfig::new("ws"))
                        .with_session_id("big2")
                        .with_state(big.clone()),
                )
                .await
                .map(|_| ()),
        ),
        ("upsert_message", storage.upsert_message(&key, &big.context[0]).await.map(|_| ())),
    ];
    let (mut rejected, mut wrong) = (0, Vec::new());
    for (call, r) in &attempts {
        match r {
            // The error does not echo the payload.
            Err(e) if e.kind() == StorageErrorKind::TooLarge && e.to_string().len() < 1024 => rejected += 1,
            Err(e) => {
                wrong.push(format!("{call}: {:?} {}", e.kind(), e.to_string().chars().take(300).collect::<String>()))
            }
            Ok(()) => wrong.push(format!("{call}: accepted")),
        }
    }
    figure(&format!("hostile.too_large.{backend}.rejected"), rejected);
    assert_eq!(rejected, attempts.len(), "{backend}: {wrong:?}");
    // Nothing was written.
    assert_eq!(storage.get_session(&key).await.unwrap().unwrap(), rec, "{backend}");
    assert!(storage.get_session(&owner.session("big2")).await.unwrap().is_none(), "{backend}");
    assert!(storage.list_messages(&key, 0, 0).await.unwrap().is_empty(), "{backend}");
}

#[tokio::test]
async fn too_large_memory() {
    too_large("memory", reliability::memory().await).await;
}

#[tokio::test]
async fn too_large_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    too_large("sqlite", reliability::sqlite(&dir.path().join("s.db")).await).await;
}

#[tokio::test]
async fn too_large_redis() {
    let Some(server) = RedisServer::start() else { return };
    too_large("redis", reliability::redis(&server.url()).await).await;
}

const BAD_IDS: &[&str] = &["a:session:b", "{x}", "*", "a*", "x?y", "[a]", "a b", "", "tab\t", "new\nline", "ü:x"];

/// The kind of a call's error; `None` when the call succeeded.
fn error_kind<T>(r: Result<T, as_storage::StorageError>) -> Option<StorageErrorKind> {
    r.err().map(|e| e.kind())
}

/// Ids built to collide in a key layout are `InvalidKey` on every API, in every position.
async fn colliding_ids(backend: &str, storage: SharedStorage) {
    let long = "x".repeat(300);
    let mut ids: Vec<&str> = BAD_IDS.to_vec();
    ids.push(&long);
    let (mut tried, mut accepted, mut wrong) = (0, 0, Vec::new());
    let state = AgentState::for_session("s");
    let msg = Msg::user("u", "hi");
    for bad in ids {
        for key in [SessionKey::new(bad, "a", "s"), SessionKey::new("u", bad, "s"), SessionKey::new("u", "a", bad)] {
            let mut kinds = vec![
                ("get_session", error_kind(storage.get_session(&key).await)),
                ("update_session_state", error_kind(storage.update_session_state(&key, &state, None).await)),
                ("delete_session", error_kind(storage.delete_session(&key).await)),
                ("upsert_message", error_kind(storage.upsert_message(&key, &msg).await)),
                ("get_message", error_kind(storage.get_message(&key, "m").await)),
                ("list_messages", error_kind(storage.list_messages(&key, 0, 0).await)),
            ];
            // Listing takes only the owner: it must refuse a bad owner (a bad session id alone is not its input).
            if key.session_id != bad || bad.is_empty() && key.user_id != "u" {
                kinds.push((
                    "list_sessions",
                    error_kind(storage.list_sessions(&key.owner(), &PageRequest::default()).await),
                ));
            }
            let upsert = storage
                .upsert_session(
                    UpsertSession::new(key.owner(), SessionConfig::new("ws")).with_session_id(key.session_id.clone()),
                )
                .await;
            match upsert {
                // An empty session id means "create with a fresh id" (2.0.4): valid when the owner is, so this
                // call is not one with a colliding id (not counted).
                Ok(r) if bad.is_empty() && key.session_id.is_empty() => {
                    assert!(!r.id.is_empty(), "{backend}: a fresh id");
                    storage.delete_session(&key.owner().session(r.id)).await.unwrap();
                }
                r => kinds.push(("upsert_session", error_kind(r))),
            }
            for (call, kind) in kinds {
                tried += 1;
                match kind {
                    Some(StorageErrorKind::InvalidKey) => {}
                    Some(k) => wrong.push(format!("{call} {key:?}: {k:?}")),
                    None => {
                        accepted += 1;
                        wrong.push(format!("{call} {key:?}: accepted"));
                    }
                }
            }
        }
    }
    figure(&format!("hostile.colliding_ids.{backend}.calls"), tried);
    figure(&format!("hostile.colliding_ids.{backend}.accepted"), accepted);
    assert_eq!(accepted, 0, "{backend}: {wrong:?}");
    assert!(wrong.is_empty(), "{backend}: not InvalidKey: {wrong:?}");
}

#[tokio::test]
async fn colliding_ids_memory() {
    colliding_ids("memory", reliability::memory().await).await;
}

#[tokio::test]
async fn colliding_ids_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    colliding_ids("sqlite", reliability::sqlite(&dir.path().join("s.db")).await).await;
}

#[tokio::test]
async fn colliding_ids_redis() {
    let Some(server) = RedisServer::start() else { return };
    colliding_ids("redis", reliability::redis(&server.url()).await).await;
}

/// Wrong Redis types and hostile values under our keys (complements as-storage-redis's
/// `bad_values_give_typed_errors_naming_the_key`, which covers invalid UTF-8, bad JSON and a list as the record).
#[tokio::test]
async fn hostile_redis_values_are_typed_errors_naming_the_key() {
    let Some(server) = RedisServer::start() else { return };
    let storage = reliability::redis(&server.url()).await;
    let owner = Owner::new("user-1", "agent-1");
    let port = server.port();
    // (what, the Redis key it read, the result): each must be a Serialization error naming that key.
    let mut results: Vec<(String, String, Result<(), as_storage::StorageError>)> = Vec::new();
    // A session record that is a hash, a set, a number; a message log that is a string; an index that is a string.
    for (id, cmd) in [
        ("ahash", "HSET agentscope:user:user-1:session:ahash f v"),
        ("aset", "SADD agentscope:user:user-1:session:aset m"),
        ("anumber", "SET agentscope:user:user-1:session:anumber 42"),
        ("deep", &format!("SET agentscope:user:user-1:session:deep {}", "[".repeat(20_000))),
    ] {
        assert!(!raw_command(port, cmd).unwrap().starts_with('-'), "{cmd}");
        let k = format!("agentscope:user:user-1:session:{id}");
        results.push((format!("get_session {id}"), k, storage.get_session(&owner.session(id)).await.map(|_| ())));
    }
    let rec = storage.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws"))).await.unwrap();
    let mk = format!("agentscope:user:user-1:session:{}:messages", rec.id);
    assert!(raw_command(port, &format!("SET {mk} notalist")).unwrap().starts_with('+'));
    let key = owner.session(rec.id.clone());
    results.push(("list_messages".into(), mk.clone(), storage.list_messages(&key, 0, 0).await.map(|_| ())));
    results.push(("upsert_message".into(), mk.clone(), storage.upsert_message(&key, &Msg::user("u", "x")).await));
    results.push(("get_message".into(), mk.clone(), storage.get_message(&key, "m").await.map(|_| ())));
    let ik = "agentscope:user:user-2:agent:agent-2:sessions";
    assert!(raw_command(port, &format!("SET {ik} notaset")).unwrap().starts_with('+'));
    let listed = storage.list_sessions(&Owner::new("user-2", "agent-2"), &PageRequest::default()).await;
    results.push(("list_sessions".into(), ik.into(), listed.map(|_| ())));
    // Anything but a Serialization error naming the key (another kind, no key, or no error) is untyped.
    let mut untyped = Vec::new();
    for (what, k, r) in &results {
        match r {
            Err(e) if e.kind() == StorageErrorKind::Serialization && e.to_string().contains(k.as_str()) => {}
            Err(e) => untyped.push(format!("{what}: {:?} {e}", e.kind())),
            Ok(()) => untyped.push(format!("{what}: accepted")),
        }
    }
    figure("hostile.redis_values.cases", results.len());
    figure("hostile.redis_values.untyped_errors", untyped.len());
    assert!(untyped.is_empty(), "{untyped:?}");
}

/// Tool arguments that are not JSON: an error observation for the model, the reply goes on.
#[tokio::test]
async fn tool_arguments_that_are_not_json_are_an_observation() {
    let storage = reliability::memory().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    // (arguments, the state of the result the model gets for the call, a part of its output as JSON). Arguments
    // are read as 2.0.4 reads them: a fragment is repaired where it can be (then checked against the schema), and
    // a lone surrogate escape is accepted, as Python's json.loads accepts it (the echo shows it as its escape).
    let cases: &[(&str, ToolResultState, &str)] = &[
        ("this is {not json", ToolResultState::Error, "'text' is a required property"),
        ("", ToolResultState::Error, "JSONDecodeError"),
        ("[1,2", ToolResultState::Error, "JSONDecodeError"),
        ("{\"text\": 1}", ToolResultState::Error, "1 is not of type 'string'"),
        ("null", ToolResultState::Error, "<class 'NoneType'> object, but a dict object is expected"),
        ("\"just a string\"", ToolResultState::Error, "<class 'str'> object, but a dict object is expected"),
        ("{\"text\":\"\\ud800\"}", ToolResultState::Success, r"echo: \\ud800"),
    ];
    let mut turns = Vec::new();
    for (i, (args, _, _)) in cases.iter().enumerate() {
        turns.push(ScriptedTurn::new().tool_call(format!("c{i}"), "echo", *args));
    }
    turns.push(ScriptedTurn::new().text("handled"));
    let model = Arc::new(ScriptedModel::new("scripted", turns));
    let agent = Agent::builder("Friday", "sys", model.clone())
        .toolkit(Toolkit::new().with(EchoTool::new("echo").arc()))
        .build()
        .unwrap();
    let key = SessionKey::new("u", "a", "badargs");
    let out = runner.run_turn(&agent, &key, ReplyInput::user_text("go"), &mut |_| {}).await.unwrap();
    assert_eq!(out.status, ReplyStatus::Completed);
    let results: Vec<_> = out
        .state
        .context
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| if let ContentBlock::ToolResult(r) = b { Some(r) } else { None })
        .collect();
    // Each call is answered once, with the expected state.
    let (mut answered, mut errors, mut unexpected) = (0, 0, Vec::new());
    for (i, (args, expected, text)) in cases.iter().enumerate() {
        let got: Vec<_> = results.iter().filter(|r| r.id == format!("c{i}")).collect();
        match got[..] {
            [r] => {
                answered += 1;
                errors += usize::from(r.state == ToolResultState::Error);
                let output = as_message::to_json(&r.output);
                if r.state != *expected || !output.contains(text) {
                    unexpected.push(format!("{args:?}: {:?} {output}, not {expected:?} {text:?}", r.state));
                }
            }
            _ => unexpected.push(format!("{args:?}: {} results", got.len())),
        }
    }
    // The model saw every answer: one request per call, then the one that ends the reply.
    let requests = model.requests().len();
    figure("hostile.tool_args.cases", cases.len());
    figure("hostile.tool_args.answered", answered);
    figure("hostile.tool_args.error_observations", errors);
    assert!(unexpected.is_empty(), "{unexpected:?}");
    assert_eq!(answered, cases.len());
    assert_eq!(results.len(), cases.len(), "{results:?}");
    assert_eq!(errors, cases.iter().filter(|(_, s, _)| *s == ToolResultState::Error).count());
    assert_eq!(requests, cases.len() + 1);
}
