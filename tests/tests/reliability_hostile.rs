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

/// Runs `cases` mutated inputs from `seeds` through `parse`; a panic fails the test. Returns (cases, accepted).
fn fuzz(target: &str, seeds: Vec<Vec<u8>>, parse: impl Fn(&[u8]) -> bool) {
    let cases = scale(2_000, 100_000);
    let (tried, accepted) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let result = runner.run(&mutations(), |(pick, ops)| {
        let input = mutate(&seeds[pick % seeds.len()], &ops);
        tried.fetch_add(1, Ordering::Relaxed);
        if parse(&input) {
            accepted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    figure(&format!("hostile.fuzz.{target}.cases"), tried.load(Ordering::Relaxed));
    figure(&format!("hostile.fuzz.{target}.accepted"), accepted.load(Ordering::Relaxed));
    figure(&format!("hostile.fuzz.{target}.panics"), usize::from(result.is_err()));
    if let Err(e) = result {
        panic!("{target}: {e}");
    }
}

#[test]
fn fuzz_agent_state() {
    let seeds = vec![fixture("rich_agent_state.compact.json"), fixture("empty_agent_state.compact.json")];
    fuzz("agent_state", seeds, |b| match from_json_slice::<AgentState>(b) {
        Ok(s) => {
            // Whatever is accepted writes back and reads again.
            from_json::<AgentState>(&to_json(&s)).is_ok()
        }
        Err(_) => false,
    });
}

#[test]
fn fuzz_session_record() {
    let seeds = vec![fixture("session_record.compact.json"), fixture("redis-session-after-cycle.compact.json")];
    fuzz("session_record", seeds, |b| match from_json_slice::<SessionRecord>(b) {
        Ok(r) => from_json::<SessionRecord>(&r.to_canonical_json()).is_ok(),
        Err(_) => false,
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
    fuzz("agent_event", seeds, |b| match from_json_slice::<AgentEvent>(b) {
        Ok(ev) => from_json::<AgentEvent>(&to_json(&ev)).is_ok(),
        Err(_) => false,
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
        ok
    });
}

/// Deeply nested JSON: serde_json's recursion limit (128) turns it into a typed error, never a stack overflow.
#[test]
fn deeply_nested_json_is_a_typed_error() {
    let mut tried = 0;
    for depth in [200usize, 10_000, 1_000_000] {
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let deep_obj = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        let rich = String::from_utf8(fixture("rich_agent_state.compact.json")).unwrap();
        let inner = rich.replacen("\"middle_context\":{", &format!("\"middle_context\":{{\"deep\":{deep},"), 1);
        assert_ne!(inner, rich, "the fixture has a middle_context");
        for doc in [&deep, &inner] {
            let e = from_json::<AgentState>(doc).unwrap_err();
            // Where the nesting is inside a valid state, the parser must reach it and stop at the limit.
            if std::ptr::eq(doc, &inner) {
                assert!(e.to_string().contains("recursion limit"), "{e}");
            }
            assert!(from_json::<SessionRecord>(doc).is_err());
            assert!(from_json::<AgentEvent>(doc).is_err());
            assert!(from_json::<Msg>(doc).is_err());
            let chunk = if std::ptr::eq(doc, &inner) { format!("{{\"choices\":{deep}}}") } else { doc.clone() };
            let mut st = StreamState::new("openai", ReasoningField::ContentOrReasoning);
            assert!(st.parse_event(&chunk).is_err());
            tried += 5;
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
    figure("hostile.deep_json.stack_overflows", 0);
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
    let e = storage.update_session_state(&key, &big, Some(&rec.revision())).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::TooLarge, "{backend}: {e}");
    let e = storage
        .upsert_session(
            UpsertSession::new(owner.clone(), SessionConfig::new("ws")).with_session_id("big2").with_state(big.clone()),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::TooLarge, "{backend}: {e}");
    let e = storage.upsert_message(&key, &big.context[0]).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::TooLarge, "{backend}: {e}");
    // Nothing was written.
    assert_eq!(storage.get_session(&key).await.unwrap().unwrap(), rec, "{backend}");
    assert!(storage.get_session(&owner.session("big2")).await.unwrap().is_none(), "{backend}");
    assert!(storage.list_messages(&key, 0, 0).await.unwrap().is_empty(), "{backend}");
    assert!(e.to_string().len() < 1024, "{backend}: the error does not echo the payload");
    figure(&format!("hostile.too_large.{backend}.rejected"), 3);
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

/// Ids built to collide in a key layout are `InvalidKey` on every API, in every position.
async fn colliding_ids(backend: &str, storage: SharedStorage) {
    let long = "x".repeat(300);
    let mut ids: Vec<&str> = BAD_IDS.to_vec();
    ids.push(&long);
    let mut tried = 0;
    let state = AgentState::for_session("s");
    let msg = Msg::user("u", "hi");
    for bad in ids {
        for key in [SessionKey::new(bad, "a", "s"), SessionKey::new("u", bad, "s"), SessionKey::new("u", "a", bad)] {
            let mut kinds = vec![
                storage.get_session(&key).await.map(|_| ()).unwrap_err().kind(),
                storage.update_session_state(&key, &state, None).await.map(|_| ()).unwrap_err().kind(),
                storage.delete_session(&key).await.map(|_| ()).unwrap_err().kind(),
                storage.upsert_message(&key, &msg).await.map(|_| ()).unwrap_err().kind(),
                storage.get_message(&key, "m").await.map(|_| ()).unwrap_err().kind(),
                storage.list_messages(&key, 0, 0).await.map(|_| ()).unwrap_err().kind(),
            ];
            // Listing takes only the owner: it must refuse a bad owner (a bad session id alone is not its input).
            if key.session_id != bad || bad.is_empty() && key.user_id != "u" {
                kinds.push(
                    storage.list_sessions(&key.owner(), &PageRequest::default()).await.map(|_| ()).unwrap_err().kind(),
                );
            }
            let upsert = storage
                .upsert_session(
                    UpsertSession::new(key.owner(), SessionConfig::new("ws")).with_session_id(key.session_id.clone()),
                )
                .await;
            let upsert_kind = match upsert {
                Err(e) => e.kind(),
                // An empty session id means "create with a fresh id" (2.0.4): only valid when the owner is.
                Ok(r) if bad.is_empty() && key.session_id.is_empty() => {
                    storage.delete_session(&key.owner().session(r.id)).await.unwrap();
                    StorageErrorKind::InvalidKey
                }
                Ok(r) => panic!("{backend}: {key:?} accepted as {}", r.id),
            };
            for k in kinds.into_iter().chain([upsert_kind]) {
                assert_eq!(k, StorageErrorKind::InvalidKey, "{backend}: {key:?}");
            }
            tried += 8;
        }
    }
    figure(&format!("hostile.colliding_ids.{backend}.calls"), tried);
    figure(&format!("hostile.colliding_ids.{backend}.accepted"), 0);
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
    let mut tried = 0;
    // A session record that is a hash, a set, a number; a message log that is a string; an index that is a string.
    for (id, cmd) in [
        ("ahash", "HSET agentscope:user:user-1:session:ahash f v"),
        ("aset", "SADD agentscope:user:user-1:session:aset m"),
        ("anumber", "SET agentscope:user:user-1:session:anumber 42"),
        ("deep", &format!("SET agentscope:user:user-1:session:deep {}", "[".repeat(20_000))),
    ] {
        assert!(!raw_command(port, cmd).unwrap().starts_with('-'), "{cmd}");
        let k = format!("agentscope:user:user-1:session:{id}");
        let e = storage.get_session(&owner.session(id)).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
        assert!(e.to_string().contains(&k), "{e}");
        tried += 1;
    }
    let rec = storage.upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws"))).await.unwrap();
    let mk = format!("agentscope:user:user-1:session:{}:messages", rec.id);
    assert!(raw_command(port, &format!("SET {mk} notalist")).unwrap().starts_with('+'));
    let key = owner.session(rec.id.clone());
    for e in [
        storage.list_messages(&key, 0, 0).await.unwrap_err(),
        storage.upsert_message(&key, &Msg::user("u", "x")).await.unwrap_err(),
        storage.get_message(&key, "m").await.unwrap_err(),
    ] {
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
        assert!(e.to_string().contains(&mk), "{e}");
        tried += 1;
    }
    let ik = "agentscope:user:user-2:agent:agent-2:sessions";
    assert!(raw_command(port, &format!("SET {ik} notaset")).unwrap().starts_with('+'));
    let e = storage.list_sessions(&Owner::new("user-2", "agent-2"), &PageRequest::default()).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
    assert!(e.to_string().contains(ik), "{e}");
    tried += 1;
    figure("hostile.redis_values.cases", tried);
    figure("hostile.redis_values.untyped_errors", 0);
}

/// Tool arguments that are not JSON: an error observation for the model, the reply goes on.
#[tokio::test]
async fn tool_arguments_that_are_not_json_are_an_observation() {
    let storage = reliability::memory().await;
    let runner = SessionRunner::new(Arc::clone(&storage), SessionConfig::new("ws"));
    let bad_args =
        ["this is {not json", "", "[1,2", "{\"text\": 1}", "null", "\"just a string\"", "{\"text\":\"\\ud800\"}"];
    let mut turns = Vec::new();
    for (i, args) in bad_args.iter().enumerate() {
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
    assert_eq!(results.len(), bad_args.len());
    let errors = results.iter().filter(|r| r.state == ToolResultState::Error).count();
    // Each call was answered, and the model saw every answer.
    assert!(model.requests().len() == bad_args.len() + 1);
    figure("hostile.tool_args.cases", bad_args.len());
    figure("hostile.tool_args.error_observations", errors);
    figure("hostile.tool_args.crashes", 0);
    assert!(errors >= 3, "{results:?}");
}
