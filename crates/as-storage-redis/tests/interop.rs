//! Interop with AgentScope Python 2.0.4 from the recorded keyspace
//! (`tests/fixtures/agentscope-2.0.4/redis-keyspace.txt`): Python-written keys are loaded into a
//! private Redis and read, listed, updated and deleted by Rust; what Rust writes has the keys,
//! types, TTLs and bytes Python 2.0.4 reads.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // helpers outside #[test] fns

mod common;

use std::time::Duration;

use as_message::{JsonValue, Msg};
use as_storage::{PageRequest, SessionConfig, SessionRecord, StorageBase, UpsertSession};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{KeyLayout, TtlPolicy};
use common::{all_keys, owner, raw, store};
use fred::prelude::{Client, ClientLike, KeysInterface, ListInterface, SetsInterface};

const KEYSPACE: &str = include_str!("../../../tests/fixtures/agentscope-2.0.4/redis-keyspace.txt");
const PY_ID: &str = "3a078dffafe74a75a41d0d9d87f71dd2";

#[derive(Debug, Clone, PartialEq)]
enum Val {
    Str(String),
    Set(Vec<String>),
    List(Vec<String>),
}

#[derive(Debug, Clone)]
struct Dumped {
    key: String,
    ttl: i64,
    val: Val,
}

/// The keyspace dump after section `n` of the fixture.
fn dump_after_section(n: u32) -> Vec<Dumped> {
    let start = KEYSPACE.find(&format!("\nSECTION {n} ")).unwrap();
    let end = KEYSPACE[start + 1..].find("\nSECTION ").map_or(KEYSPACE.len(), |e| start + 1 + e);
    let section = &KEYSPACE[start..end];
    let dump = &section[section.find("-- keyspace after this section").unwrap()..];
    let mut out = Vec::new();
    let mut lines = dump.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(key) = line.strip_prefix("KEY  ") else { continue };
        let kind = lines.next().unwrap().strip_prefix("TYPE ").unwrap().to_owned();
        let ttl: i64 = lines.next().unwrap().strip_prefix("TTL  ").unwrap().trim().parse().unwrap();
        let head = lines.next().unwrap();
        let val = match kind.as_str() {
            "set" => Val::Set(serde_json::from_str(head.strip_prefix("SMEMBERS ").unwrap()).unwrap()),
            "string" => Val::Str(lines.next().unwrap().to_owned()),
            "list" => {
                let mut items = Vec::new();
                while let Some(l) = lines.peek() {
                    let Some(rest) = l.strip_prefix('[') else { break };
                    let (_, json) = rest.split_once("] ").unwrap();
                    items.push(json.to_owned());
                    lines.next();
                }
                Val::List(items)
            }
            other => panic!("unexpected type {other}"),
        };
        out.push(Dumped { key: key.to_owned(), ttl, val });
    }
    assert!(!out.is_empty(), "section {n} has a dump");
    out
}

/// Writes the dumped keys into Redis exactly (values, types, TTLs).
async fn load(r: &Client, dump: &[Dumped]) {
    for d in dump {
        match &d.val {
            Val::Str(v) => r.set::<(), _, _>(&d.key, v.as_str(), None, None, false).await.unwrap(),
            Val::Set(m) => r.sadd::<(), _, _>(&d.key, m.clone()).await.unwrap(),
            Val::List(items) => r.rpush::<(), _, _>(&d.key, items.clone()).await.unwrap(),
        }
        if d.ttl > 0 {
            r.expire::<(), _>(&d.key, d.ttl, None).await.unwrap();
        }
    }
}

fn top_level(json: &str) -> serde_json::Map<String, JsonValue> {
    match serde_json::from_str::<JsonValue>(json).unwrap() {
        JsonValue::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn is_naive_iso(s: &str) -> bool {
    let ok_len = s.len() == 19 || s.len() == 26;
    ok_len && s.as_bytes()[10] == b'T' && !s.ends_with('Z') && !s[19..].contains(['+', '-'])
}

#[test]
fn the_recorded_python_values_roundtrip_byte_for_byte() {
    for n in [1, 6, 7] {
        for d in dump_after_section(n) {
            match d.val {
                Val::Str(v) => {
                    let rec: SessionRecord = as_message::from_json(&v).unwrap();
                    assert_eq!(as_message::to_json(&rec), v, "{}", d.key);
                }
                Val::List(items) => {
                    for item in items {
                        let m: Msg = as_message::from_json(&item).unwrap();
                        assert_eq!(as_message::to_json(&m), item, "{}", d.key);
                    }
                }
                Val::Set(_) => {}
            }
        }
    }
}

#[tokio::test]
async fn python_written_session_is_read_listed_updated_and_deleted_by_rust() {
    let Some(server) = RedisServer::start() else { return };
    let r = raw(&server.url()).await;
    let dump = dump_after_section(6);
    load(&r, &dump).await;
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await;
    let o = owner();
    let key = o.session(PY_ID);
    let rkey = format!("agentscope:user:user-1:session:{PY_ID}");
    let py_bytes = dump.iter().find(|d| d.key == rkey).map(|d| d.val.clone()).unwrap();
    let Val::Str(py_bytes) = py_bytes else { panic!() };

    // get
    let rec = s.get_session(&key).await.unwrap().unwrap();
    let mut expected: SessionRecord = as_message::from_json(&py_bytes).unwrap();
    expected.state.session_id = PY_ID.to_owned();
    assert_eq!(rec, expected);
    assert_eq!(rec.config.name, "Renamed");
    assert!(s.get_session(&as_storage::Owner::new("user-1", "agent-x").session(PY_ID)).await.unwrap().is_none());

    // list
    let page = s.list_sessions(&o, &PageRequest::default()).await.unwrap();
    assert!(page.errors.is_empty());
    assert_eq!(page.sessions.len(), 1);
    let sum = &page.sessions[0];
    assert_eq!((sum.id.as_str(), sum.name.as_str(), sum.message_count), (PY_ID, "Renamed", Some(3)));
    assert_eq!(sum.created_at, rec.created_at);
    assert_eq!(sum.size_bytes as usize, py_bytes.len());

    // messages
    let msgs = s.list_messages(&key, 0, 50).await.unwrap();
    let ids: Vec<&str> = msgs.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["msg_user_0001", "reply0000000000000000000000000001"]);
    assert!(s.get_message(&key, "msg_user_0001").await.unwrap().is_some());
    assert!(s.list_messages(&key, 1, 0).await.unwrap().is_empty(), "LRANGE 1 0 like 2.0.4");
    let mut last = msgs[1].clone();
    last.metadata.insert("rust".into(), as_message::json!(true));
    s.upsert_message(&key, &last).await.unwrap();
    let stored: Vec<String> = r.lrange(format!("{rkey}:messages"), 0, -1).await.unwrap();
    assert_eq!(stored.len(), 2, "same id as the tail: replaced (LSET)");
    assert_eq!(stored[1], as_message::to_json(&last));

    // update: only state and updated_at change; the rest is byte-identical to what Python wrote
    let mut state = rec.state.clone();
    state.cur_iter = 4;
    state.context.push(Msg::user("user", "one more"));
    s.update_session_state(&key, &state, Some(&rec.revision())).await.unwrap();
    let new_bytes: String = r.get(&rkey).await.unwrap();
    let (old, new) = (top_level(&py_bytes), top_level(&new_bytes));
    assert_eq!(old.keys().collect::<Vec<_>>(), new.keys().collect::<Vec<_>>(), "same fields, same order");
    for (k, v) in &old {
        if k != "updated_at" && k != "state" {
            assert_eq!(&new[k], v, "{k} kept");
        }
    }
    let updated_at = new["updated_at"].as_str().unwrap();
    assert!(is_naive_iso(updated_at), "naive local timestamp like Python writes: {updated_at}");
    assert!(updated_at > old["updated_at"].as_str().unwrap());
    let reread: SessionRecord = as_message::from_json(&new_bytes).unwrap();
    assert_eq!(as_message::to_json(&reread), new_bytes, "round-trip stable, as pydantic's model_dump_json");
    assert_eq!(reread.state.cur_iter, 4);
    assert_eq!(reread.state.session_id, PY_ID);
    assert_eq!(r.ttl::<i64, _>(&rkey).await.unwrap(), -1);

    // delete: the whole 2.0.4 cascade
    assert!(s.delete_session(&key).await.unwrap());
    assert!(all_keys(&r).await.is_empty(), "record, index entry and messages are gone");
}

#[tokio::test]
async fn rust_writes_the_keys_types_ttls_and_bytes_python_reads() {
    let Some(server) = RedisServer::start() else { return };
    let r = raw(&server.url()).await;
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await;
    let o = owner();

    // Section 3's create path: caller id + schedule.
    let py_rec: SessionRecord = {
        let Val::Str(v) = dump_after_section(1)[1].val.clone() else { panic!() };
        as_message::from_json(&v).unwrap()
    };
    let rec = s
        .upsert_session(
            UpsertSession::new(o.clone(), py_rec.config.clone())
                .with_session_id("caller-chosen-id")
                .with_schedule("sched-1")
                .with_state(py_rec.state.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        all_keys(&r).await,
        [
            "agentscope:user:user-1:agent:agent-1:sessions",
            "agentscope:user:user-1:schedule:sched-1:sessions",
            "agentscope:user:user-1:session:caller-chosen-id",
        ]
    );
    let types: Vec<String> = {
        let mut t = Vec::new();
        for k in all_keys(&r).await {
            t.push(r.custom::<String, _>(fred::cmd!("TYPE"), vec![k]).await.unwrap());
        }
        t
    };
    assert_eq!(types, ["set", "set", "string"]);
    let bytes: String = r.get("agentscope:user:user-1:session:caller-chosen-id").await.unwrap();
    // Same bytes as Python for the same record: compare with the fixture record re-addressed.
    let mut same = py_rec.clone();
    same.id = "caller-chosen-id".into();
    same.updated_at = rec.updated_at;
    same.created_at = rec.created_at;
    same.source = as_storage::SessionSource::Schedule;
    same.source_schedule_id = Some("sched-1".into());
    same.state.session_id = "caller-chosen-id".into();
    assert_eq!(bytes, as_message::to_json(&same), "field order, nulls, floats, unicode exactly as pydantic");
    let top = top_level(&bytes);
    assert!(is_naive_iso(top["created_at"].as_str().unwrap()));

    // Messages: Rust RPUSHes exactly the bytes Python stored.
    let Val::List(py_msgs) = dump_after_section(6).into_iter().find(|d| d.key.ends_with(":messages")).unwrap().val
    else {
        panic!()
    };
    let key = o.session("caller-chosen-id");
    for m in &py_msgs {
        s.upsert_message(&key, &as_message::from_json::<Msg>(m).unwrap()).await.unwrap();
    }
    let stored: Vec<String> =
        r.lrange("agentscope:user:user-1:session:caller-chosen-id:messages", 0, -1).await.unwrap();
    assert_eq!(stored, py_msgs);

    // Section 7's TTL behaviour with key_ttl=3600: record and messages expire (and, unlike
    // 2.0.4, the index sets too: Python never reads TTLs, so this is invisible to it).
    let ttl = store(&server.url(), KeyLayout::Compat, TtlPolicy::Sliding(Duration::from_secs(3600))).await;
    let t_rec =
        ttl.upsert_session(UpsertSession::new(o.clone(), SessionConfig::new("ws-1").with_name("ttl"))).await.unwrap();
    ttl.upsert_message(&o.session(t_rec.id.clone()), &Msg::system("system", "You are Friday.")).await.unwrap();
    for dumped in dump_after_section(7) {
        let k = dumped.key.replace("92ba2b8b41564a7096007d62e18999f5", &t_rec.id);
        let got: i64 = r.ttl(&k).await.unwrap();
        if dumped.ttl > 0 {
            assert!((3590..=dumped.ttl).contains(&got), "{k}: {got} vs Python {}", dumped.ttl);
        } else {
            assert!(got > 0, "{k}: the index set gets the TTL too");
        }
    }
    // Section 8: a writer without key_ttl removes the TTL, like 2.0.4.
    s.update_session_state(&o.session(t_rec.id.clone()), &t_rec.state, None).await.unwrap();
    assert_eq!(r.ttl::<i64, _>(format!("agentscope:user:user-1:session:{}", t_rec.id)).await.unwrap(), -1);
}
