//! RedisStorage against a private redis-server: contract, atomicity, TTLs, listing, errors, lock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // helpers outside #[test] fns

mod common;

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use as_message::Msg;
use as_storage::{
    Owner, PageRequest, SessionConfig, SessionKey, StorageBase, StorageErrorKind, UpsertSession, encode_record,
};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{KeyLayout, RedisStorage, RedisStorageConfig, SessionLock, TtlPolicy};
use common::{owner, raw, req, rich_state, store};
use fred::prelude::{ClientLike, KeysInterface, ListInterface, ServerInterface, SetsInterface};

async fn compat(server: &RedisServer) -> RedisStorage {
    store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await
}

#[tokio::test]
async fn create_get_update_delete_with_2_0_4_keys_and_bytes() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let rec = s.upsert_session(req(&o).with_state(rich_state())).await.unwrap();
    assert_eq!(rec.id.len(), 32);
    assert_eq!(rec.state.session_id, rec.id);
    let rkey = format!("agentscope:user:user-1:session:{}", rec.id);
    let stored: String = r.get(&rkey).await.unwrap();
    assert_eq!(stored, encode_record(&rec.meta(), &rec.state), "the record is stored as encode_record bytes");
    let members: Vec<String> = r.smembers("agentscope:user:user-1:agent:agent-1:sessions").await.unwrap();
    assert_eq!(members, vec![rec.id.clone()]);
    assert_eq!(r.ttl::<i64, _>(&rkey).await.unwrap(), -1);

    let key = o.session(rec.id.clone());
    let got = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(got, rec);
    let mut state = got.state.clone();
    state.cur_iter = 7;
    let rev = s.update_session_state(&key, &state, Some(&got.revision())).await.unwrap();
    assert!(rev > got.revision());
    let after = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(after.state.cur_iter, 7);
    assert_eq!(after.created_at, rec.created_at);
    assert_eq!(after.config, rec.config);
    assert_eq!(after.revision(), rev);

    // A stale revision conflicts and writes nothing.
    let e = s.update_session_state(&key, &rich_state(), Some(&got.revision())).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Conflict);
    assert_eq!(s.get_session(&key).await.unwrap().unwrap().state.cur_iter, 7);

    // Wrong agent: as if absent, everywhere.
    let other = Owner::new("user-1", "agent-2").session(rec.id.clone());
    assert!(s.get_session(&other).await.unwrap().is_none());
    assert_eq!(s.update_session_state(&other, &state, None).await.unwrap_err().kind(), StorageErrorKind::NotFound);
    assert!(!s.delete_session(&other).await.unwrap());
    assert_eq!(s.upsert_message(&other, &Msg::user("u", "hi")).await.unwrap_err().kind(), StorageErrorKind::NotFound);
    assert!(s.list_messages(&other, 0, 0).await.unwrap().is_empty());
    let taken = UpsertSession::new(Owner::new("user-1", "agent-2"), SessionConfig::new("w")).with_session_id(&rec.id);
    assert_eq!(s.upsert_session(taken).await.unwrap_err().kind(), StorageErrorKind::AlreadyExists);

    s.upsert_message(&key, &Msg::user("u", "hi")).await.unwrap();
    assert!(s.delete_session(&key).await.unwrap());
    assert!(!s.delete_session(&key).await.unwrap());
    let left = common::all_keys(&r).await;
    assert!(left.is_empty(), "the cascade removed everything: {left:?}");
    let e = s.update_session_state(&key, &state, None).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::NotFound);
    assert_eq!(e.message(), format!("Session '{}' not found.", rec.id));
    assert!(!r.exists::<bool, _>(&rkey).await.unwrap(), "a missing session is never re-created");
}

#[tokio::test]
async fn upsert_session_create_with_id_schedule_and_update_path() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let rec = s
        .upsert_session(req(&o).with_session_id("caller-chosen-id").with_schedule("sched-1").with_state(rich_state()))
        .await
        .unwrap();
    assert_eq!(rec.id, "caller-chosen-id");
    let sched: Vec<String> = r.smembers("agentscope:user:user-1:schedule:sched-1:sessions").await.unwrap();
    assert_eq!(sched, vec!["caller-chosen-id".to_owned()]);
    // Update: whole config replaced, state kept when None, created_at/source kept.
    let upd = UpsertSession::new(o.clone(), SessionConfig::new("ws-1").with_name("Renamed"))
        .with_session_id("caller-chosen-id");
    let rec2 = s.upsert_session(upd).await.unwrap();
    assert_eq!(rec2.config.name, "Renamed");
    assert_eq!(rec2.state, rec.state);
    assert_eq!(rec2.created_at, rec.created_at);
    assert_eq!(rec2.source_schedule_id.as_deref(), Some("sched-1"));
    assert!(rec2.updated_at > rec.updated_at);
    // Empty id means create.
    let fresh = s.upsert_session(req(&o).with_session_id("")).await.unwrap();
    assert_ne!(fresh.id, "");
    // Delete removes the schedule entry too.
    assert!(s.delete_session(&o.session("caller-chosen-id")).await.unwrap());
    assert!(!r.exists::<bool, _>("agentscope:user:user-1:schedule:sched-1:sessions").await.unwrap());
}

#[tokio::test]
async fn ids_are_validated_before_io() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    for bad in ["a:b", "{x}", "", "a b"] {
        let k = SessionKey::new("user-1", "agent-1", bad);
        if bad.is_empty() {
            continue;
        }
        assert_eq!(s.get_session(&k).await.unwrap_err().kind(), StorageErrorKind::InvalidKey, "{bad}");
        let k = SessionKey::new(bad, "agent-1", "s");
        assert_eq!(s.delete_session(&k).await.unwrap_err().kind(), StorageErrorKind::InvalidKey, "{bad}");
    }
}

#[tokio::test]
async fn ttl_policies_match_2_0_4_and_cover_index_sets() {
    let Some(server) = RedisServer::start() else { return };
    let r = raw(&server.url()).await;
    let sliding = store(&server.url(), KeyLayout::Compat, TtlPolicy::Sliding(Duration::from_secs(3600))).await;
    let o = owner();
    let rec = sliding.upsert_session(req(&o).with_schedule("sched-1")).await.unwrap();
    let key = o.session(rec.id.clone());
    sliding.upsert_message(&key, &Msg::system("system", "You are Friday.")).await.unwrap();
    let rkey = format!("agentscope:user:user-1:session:{}", rec.id);
    for k in [
        rkey.clone(),
        format!("{rkey}:messages"),
        "agentscope:user:user-1:agent:agent-1:sessions".to_owned(),
        "agentscope:user:user-1:schedule:sched-1:sessions".to_owned(),
    ] {
        let ttl: i64 = r.ttl(&k).await.unwrap();
        assert!((3590..=3600).contains(&ttl), "{k}: ttl {ttl}");
    }
    let keep = store(&server.url(), KeyLayout::Compat, TtlPolicy::Keep).await;
    let persist = compat(&server).await;
    // Small records are written inline by the script, large ones through a staging key: both
    // paths apply each policy the same way.
    for state in [rich_state(), common::state_with(60)] {
        // A sliding write refreshes; the record never exists without a TTL.
        r.expire::<(), _>(&rkey, 100, None).await.unwrap();
        r.expire::<(), _>(format!("{rkey}:messages"), 100, None).await.unwrap();
        sliding.update_session_state(&key, &state, None).await.unwrap();
        assert!(r.ttl::<i64, _>(&rkey).await.unwrap() > 3000);
        assert!(r.ttl::<i64, _>(format!("{rkey}:messages")).await.unwrap() > 3000);

        // KEEPTTL keeps whatever TTL is there.
        r.expire::<(), _>(&rkey, 500, None).await.unwrap();
        keep.update_session_state(&key, &state, None).await.unwrap();
        let t: i64 = r.ttl(&rkey).await.unwrap();
        assert!((490..=500).contains(&t), "{t}");

        // Persist behaves like a 2.0.4 writer without key_ttl: SET clears the TTL.
        persist.update_session_state(&key, &state, None).await.unwrap();
        assert_eq!(r.ttl::<i64, _>(&rkey).await.unwrap(), -1);
        let got = persist.get_session(&key).await.unwrap().unwrap();
        assert_eq!(got.state.context, state.context);
    }
}

/// `with_index_ttl(false)` (for a fleet with Python 2.0.4 writers): every write path still puts
/// the sliding TTL on the record and the message list, but leaves the agent and schedule index
/// sets without one, as 2.0.4 does; with the default, every path expires them too.
#[tokio::test]
async fn index_ttl_false_expires_records_and_logs_but_not_index_sets() {
    let Some(server) = RedisServer::start() else { return };
    let r = raw(&server.url()).await;
    let index = "agentscope:user:user-1:agent:agent-1:sessions";
    let sched = "agentscope:user:user-1:schedule:sched-1:sessions";
    let msg = |id: &str, text: &str| {
        let mut m = Msg::assistant("Friday", text);
        m.id = id.into();
        m
    };
    for index_ttl in [false, true] {
        r.flushall::<()>(false).await.unwrap();
        let cfg = RedisStorageConfig::from_url(&server.url())
            .unwrap()
            .with_ttl_policy(TtlPolicy::Sliding(Duration::from_secs(3600)))
            .with_index_ttl(index_ttl)
            .with_timeout(Duration::from_secs(2));
        assert_eq!(cfg.index_ttl, index_ttl);
        let s = RedisStorage::new(cfg).unwrap();
        s.open().await.unwrap();
        let o = owner();
        // Before each write the index sets lose their TTL and the record and log get a short one:
        // the write must restart the latter and (only with `index_ttl`) expire the former.
        let reset = |keys: Vec<String>| {
            let r = r.clone();
            async move {
                for k in [index, sched] {
                    r.persist::<(), _>(k).await.unwrap();
                }
                for k in keys {
                    r.expire::<(), _>(k, 100, None).await.unwrap();
                }
            }
        };
        let check = |step: &'static str, keys: Vec<String>| {
            let r = r.clone();
            async move {
                for k in keys {
                    let ttl: i64 = r.ttl(&k).await.unwrap();
                    assert!(ttl > 3000, "index_ttl={index_ttl}, {step}: {k} ttl {ttl}");
                }
                // upsert_message restarts only the agent index (the schedule's is the next state
                // write's), so with `index_ttl` the schedule index keeps no TTL there.
                for k in [index, sched] {
                    assert_eq!(r.exists::<i64, _>(k).await.unwrap(), 1, "{step}: {k} missing");
                    let ttl: i64 = r.ttl(k).await.unwrap();
                    if index_ttl && !(step == "upsert_message" && k == sched) {
                        assert!(ttl > 3000, "index_ttl=true, {step}: {k} ttl {ttl}");
                    } else {
                        assert_eq!(ttl, -1, "index_ttl=false, {step}: {k} has a TTL");
                    }
                }
            }
        };
        let rec = s.upsert_session(req(&o).with_schedule("sched-1")).await.unwrap();
        let key = o.session(rec.id.clone());
        let rkey = format!("agentscope:user:user-1:session:{}", rec.id);
        let mkey = format!("{rkey}:messages");
        check("create", vec![rkey.clone()]).await;
        // Small records are written inline by the script, large ones through a staging key.
        for (n, state) in [(2, rich_state()), (60, common::state_with(60))] {
            reset(vec![rkey.clone()]).await;
            s.update_session_state(&key, &state, None).await.unwrap();
            check("update_session_state", vec![rkey.clone()]).await;
            let turn = [msg(&format!("q{n}"), "question"), msg(&format!("a{n}"), "answer")];
            s.save_turn(&key, &state, None, &turn).await.unwrap();
            check("save_turn (new log)", vec![rkey.clone(), mkey.clone()]).await;
            reset(vec![rkey.clone(), mkey.clone()]).await;
            s.save_turn(&key, &state, None, &[msg(&format!("b{n}"), "more")]).await.unwrap();
            check("save_turn", vec![rkey.clone(), mkey.clone()]).await;
        }
        reset(vec![rkey.clone(), mkey.clone()]).await;
        s.upsert_message(&key, &Msg::user("u", "hi")).await.unwrap();
        check("upsert_message", vec![rkey.clone(), mkey.clone()]).await;
        reset(vec![rkey.clone(), mkey.clone()]).await;
        let mut imported = rec.clone();
        imported.id = "imported".into();
        let ikey = "agentscope:user:user-1:session:imported".to_owned();
        let ilog = format!("{ikey}:messages");
        s.import_record(&imported, &[msg("m1", "one")], as_storage::ImportMode::CreateOnly).await.unwrap();
        check("import_record", vec![ikey.clone(), ilog.clone()]).await;
        reset(vec![ikey.clone(), ilog.clone()]).await;
        s.import_record(&imported, &[msg("m2", "two")], as_storage::ImportMode::Overwrite).await.unwrap();
        check("import_record (overwrite)", vec![ikey, ilog]).await;
        // Listing still finds both sessions.
        let listed = s.list_sessions(&o, &PageRequest::first(10)).await.unwrap();
        assert_eq!(listed.sessions.len(), 2, "index_ttl={index_ttl}");
    }
}

#[tokio::test]
async fn small_and_large_updates_store_exact_bytes_and_leave_no_staging_keys() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let rec = s.upsert_session(req(&o).with_schedule("sched-1")).await.unwrap();
    let key = o.session(rec.id.clone());
    let rkey = format!("agentscope:user:user-1:session:{}", rec.id);
    // 2 messages: about 1 KiB, inline; 60: about 30 KiB, staged; 33 straddles the 16 KiB line.
    for n in [2, 60, 33, 31, 2] {
        let state = common::state_with(n);
        let rev = s.update_session_state(&key, &state, None).await.unwrap();
        let got = s.get_session(&key).await.unwrap().unwrap();
        assert_eq!(got.revision(), rev);
        let stored: String = r.get(&rkey).await.unwrap();
        assert_eq!(stored, encode_record(&got.meta(), &state), "{n} messages");
        let keys = common::all_keys(&r).await;
        assert!(keys.iter().all(|k| !k.contains(":stage:")), "{n} messages: {keys:?}");
        for index in
            ["agentscope:user:user-1:agent:agent-1:sessions", "agentscope:user:user-1:schedule:sched-1:sessions"]
        {
            let members: Vec<String> = r.smembers(index).await.unwrap();
            assert_eq!(members, vec![rec.id.clone()], "{index}");
        }
    }
    // A writer that read an older record conflicts on both paths and writes nothing.
    let other = compat(&server).await;
    let seen = other.get_session(&key).await.unwrap().unwrap();
    for n in [2, 60] {
        s.update_session_state(&key, &common::state_with(n), None).await.unwrap();
        let before: String = r.get(&rkey).await.unwrap();
        let e = other.update_session_state(&key, &common::state_with(5), Some(&seen.revision())).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Conflict, "{n} messages");
        assert_eq!(r.get::<String, _>(&rkey).await.unwrap(), before);
    }
}

#[tokio::test]
async fn messages_append_replace_last_list_and_get() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let key = o.session(rec.id.clone());
    let mut a = Msg::user("user", "one");
    a.id = "m1".into();
    let mut b = Msg::assistant("Friday", "two");
    b.id = "m2".into();
    s.upsert_message(&key, &a).await.unwrap();
    s.upsert_message(&key, &b).await.unwrap();
    b.metadata.insert("k".into(), as_message::json!(1));
    s.upsert_message(&key, &b).await.unwrap(); // replaces the last
    let all = s.list_messages(&key, 0, 0).await.unwrap();
    assert_eq!(all.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["m1", "m2"]);
    assert_eq!(all[1], b);
    s.upsert_message(&key, &a).await.unwrap(); // not last: appended again (2.0.4 semantics)
    assert_eq!(s.list_messages(&key, 0, 0).await.unwrap().len(), 3);
    assert_eq!(s.list_messages(&key, 1, 1).await.unwrap()[0].id, "m2");
    assert_eq!(s.list_messages(&key, -1, 5).await.unwrap()[0].id, "m1");
    assert_eq!(s.get_message(&key, "m2").await.unwrap().unwrap(), b);
    assert!(s.get_message(&key, "nope").await.unwrap().is_none());
    let r = raw(&server.url()).await;
    let stored: Vec<String> =
        r.lrange(format!("agentscope:user:user-1:session:{}:messages", rec.id), 0, -1).await.unwrap();
    assert_eq!(stored[1], as_message::to_json(&b), "messages are Msg.model_dump_json bytes");
    // No session: NotFound, nothing written.
    let ghost = o.session("ghost");
    assert_eq!(s.upsert_message(&ghost, &a).await.unwrap_err().kind(), StorageErrorKind::NotFound);
    assert!(!r.exists::<bool, _>("agentscope:user:user-1:session:ghost:messages").await.unwrap());
}

/// `save_turn` on both write paths (inline and staged): the log holds exactly the bytes
/// `upsert_message` writes, a new log gets the sliding TTL, and a failure writes nothing.
#[tokio::test]
async fn save_turn_writes_record_and_log_in_one_script_on_both_paths() {
    let Some(server) = RedisServer::start() else { return };
    let r = raw(&server.url()).await;
    let ttl = Duration::from_secs(3600);
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Sliding(ttl)).await;
    let plain = compat(&server).await;
    let o = owner();
    let msg = |id: &str, text: &str| {
        let mut m = Msg::assistant("Friday", text);
        m.id = id.into();
        m
    };
    // 2 messages: about 1 KiB, inline; 60: about 30 KiB, staged.
    for n in [2, 60] {
        let rec = s.upsert_session(req(&o)).await.unwrap();
        let key = o.session(rec.id.clone());
        let rkey = format!("agentscope:user:user-1:session:{}", rec.id);
        let mkey = format!("{rkey}:messages");
        let state = common::state_with(n);
        let turn = [msg("q1", "question"), msg("a1", "draft"), msg("a1", "answer")];
        let saved = s.save_turn(&key, &state, Some(&rec.revision()), &turn).await.unwrap();
        assert!(saved.log_error.is_none());
        let got = s.get_session(&key).await.unwrap().unwrap();
        assert_eq!((got.revision(), &got.state.context), (saved.revision.clone(), &state.context), "{n}");
        let stored: Vec<String> = r.lrange(&mkey, 0, -1).await.unwrap();
        assert_eq!(stored, [as_message::to_json(&turn[0]), as_message::to_json(&turn[2])], "{n} messages");
        assert!(r.ttl::<i64, _>(&mkey).await.unwrap() > 3500, "{n}: the new log has no TTL");
        assert!(r.ttl::<i64, _>(&rkey).await.unwrap() > 3500, "{n}: the record has no TTL");
        // The next turn's first message replaces the stored last one when the ids match.
        let next = [msg("a1", "answer, final"), msg("q2", "again")];
        let saved = s.save_turn(&key, &state, Some(&saved.revision), &next).await.unwrap();
        let log: Vec<String> = s.list_messages(&key, 0, 0).await.unwrap().iter().map(|m| m.id.clone()).collect();
        assert_eq!(log, ["q1", "a1", "q2"], "{n} messages");
        // A stale revision: nothing written, the record's bytes and the log as they were.
        let (before, log_before): (String, Vec<String>) =
            (r.get(&rkey).await.unwrap(), r.lrange(&mkey, 0, -1).await.unwrap());
        let e = plain
            .save_turn(&key, &common::state_with(3), Some(&rec.revision()), &[msg("x", "late")])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Conflict, "{n} messages");
        // A corrupt last message that looks like the first message's: nothing written either.
        r.rpush::<(), _, _>(&mkey, r#"{"id":"z1", oops"#).await.unwrap();
        let log_corrupt: Vec<String> = r.lrange(&mkey, 0, -1).await.unwrap();
        let e =
            plain.save_turn(&key, &common::state_with(4), Some(&saved.revision), &[msg("z1", "z")]).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{n} messages: {e}");
        assert!(e.to_string().contains(&mkey), "{e}");
        assert_eq!(r.get::<String, _>(&rkey).await.unwrap(), before, "{n}: a failed save_turn wrote the record");
        assert_eq!(r.lrange::<Vec<String>, _>(&mkey, 0, -1).await.unwrap(), log_corrupt);
        assert_eq!(log_corrupt[..log_before.len()], log_before[..]);
        let keys = common::all_keys(&r).await;
        assert!(keys.iter().all(|k| !k.contains(":stage:")), "{n} messages: {keys:?}");
    }
    // A session that does not exist (or was deleted): NotFound, and no log appears.
    let ghost = o.session("ghost");
    let e = s.save_turn(&ghost, &common::state_with(2), None, &[msg("m", "x")]).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::NotFound);
    assert!(!r.exists::<bool, _>("agentscope:user:user-1:session:ghost:messages").await.unwrap());
}

#[tokio::test]
async fn concurrent_upsert_message_never_overwrites_another_writer() {
    let Some(server) = RedisServer::start() else { return };
    let s = Arc::new(compat(&server).await);
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let key = o.session(rec.id.clone());
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (s, key) = (s.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let mut m = Msg::user("u", format!("w{w} i{i}"));
                m.id = format!("w{w}-{i}");
                s.upsert_message(&key, &m).await.unwrap();
                // Re-upserting our own id only replaces it if it is still the tail.
                m.metadata.insert("again".into(), as_message::json!(true));
                s.upsert_message(&key, &m).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let all = s.list_messages(&key, 0, 0).await.unwrap();
    let ids: HashSet<&str> = all.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids.len(), 200, "every writer's message survived");
}

#[tokio::test]
async fn concurrent_writers_lose_nothing_and_delete_is_final() {
    let Some(server) = RedisServer::start() else { return };
    let s = Arc::new(compat(&server).await);
    let s2 = Arc::new(compat(&server).await); // a second "process" with its own cache
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let key = o.session(rec.id.clone());
    let (a, b) = (s.clone(), s2.clone());
    let (ka, id) = (key.clone(), rec.id.clone());
    let oa = o.clone();
    let config_writer = tokio::spawn(async move {
        for i in 0..60 {
            let u = UpsertSession::new(oa.clone(), SessionConfig::new("ws-1").with_name(format!("name-{i}")))
                .with_session_id(&id);
            a.upsert_session(u).await.unwrap();
        }
    });
    let state_writer = tokio::spawn(async move {
        for i in 0..60 {
            let st = as_state::AgentState { cur_iter: i, ..Default::default() };
            b.update_session_state(&ka, &st, None).await.unwrap();
        }
    });
    config_writer.await.unwrap();
    state_writer.await.unwrap();
    let got = s.get_session(&key).await.unwrap().unwrap();
    assert_eq!(got.config.name, "name-59", "the config writer's last write survived the state writes");
    assert_eq!(got.state.cur_iter, 59, "the state writer's last write survived the config writes");

    // CAS under contention: exactly one of N writers with the same expected revision wins.
    let rev = got.revision();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (s, key, rev) = (if i % 2 == 0 { s.clone() } else { s2.clone() }, key.clone(), rev.clone());
        tasks.push(tokio::spawn(async move {
            let st = as_state::AgentState { cur_iter: 100 + i, ..Default::default() };
            s.update_session_state(&key, &st, Some(&rev)).await
        }));
    }
    let mut wins = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => wins += 1,
            Err(e) => assert_eq!(e.kind(), StorageErrorKind::Conflict),
        }
    }
    assert_eq!(wins, 1);

    // Delete racing updates: once deleted, no update brings it back. The writer is surely still
    // updating when the delete runs: it signals after some updates, the delete starts only then,
    // and the writer keeps updating until it sees the delete (NotFound), then a few more times.
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let writer = {
        let (s2, key) = (s2.clone(), key.clone());
        tokio::spawn(async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut started_tx = Some(started_tx);
            let mut updates_before_delete = 0;
            for i in 0..10_000 {
                assert!(std::time::Instant::now() < deadline, "the delete never showed within 10 s");
                let st = as_state::AgentState { cur_iter: i, ..Default::default() };
                match s2.update_session_state(&key, &st, None).await {
                    Ok(_) => updates_before_delete += 1,
                    Err(e) => {
                        assert_eq!(e.kind(), StorageErrorKind::NotFound, "{e}");
                        // Once deleted, it stays deleted for every later update.
                        for _ in 0..20 {
                            let e = s2.update_session_state(&key, &st, None).await.unwrap_err();
                            assert_eq!(e.kind(), StorageErrorKind::NotFound, "{e}");
                        }
                        return updates_before_delete;
                    }
                }
                if updates_before_delete == 10 {
                    started_tx.take().unwrap().send(()).unwrap();
                }
            }
            panic!("no NotFound after 10 000 updates: the delete never raced them");
        })
    };
    started_rx.await.expect("the writer died before its 10th update");
    assert!(s.delete_session(&key).await.unwrap());
    let updates_before_delete = writer.await.unwrap();
    assert!(updates_before_delete >= 10, "{updates_before_delete}");
    assert!(s.get_session(&key).await.unwrap().is_none(), "no zombie record");
    assert!(s2.get_session(&key).await.unwrap().is_none(), "no zombie record for the writer either");
    let r = raw(&server.url()).await;
    // Neither the record nor its index entry (nor anything else) came back.
    assert!(common::all_keys(&r).await.is_empty());
}

#[tokio::test]
async fn listing_sorts_pages_prunes_and_reports_corrupt_records() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let mut ids = Vec::new();
    for i in 0..7 {
        let rec = s.upsert_session(req(&o).with_state(common::state_with(i))).await.unwrap();
        ids.push(rec.id);
    }
    let index = "agentscope:user:user-1:agent:agent-1:sessions";
    r.sadd::<(), _, _>(index, "dangling").await.unwrap();
    r.sadd::<(), _, _>(index, "corrupt").await.unwrap();
    r.set::<(), _, _>("agentscope:user:user-1:session:corrupt", "{not json", None, None, false).await.unwrap();
    // A record key of another Redis type reads as nil in an MGET, like a gone one: it must be
    // reported, not pruned and not silently skipped.
    r.sadd::<(), _, _>(index, "wrongtype").await.unwrap();
    r.rpush::<(), _, _>("agentscope:user:user-1:session:wrongtype", "x").await.unwrap();
    // A record in this agent's index that says it is another agent's (edited, or a stale entry):
    // reported too, so `sessions validate` sees it (no listing would show it otherwise).
    let other = s.upsert_session(req(&as_storage::Owner::new("user-1", "agent-2"))).await.unwrap();
    r.sadd::<(), _, _>(index, other.id.as_str()).await.unwrap();
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut errors = Vec::new();
    loop {
        let page = s.list_sessions(&o, &PageRequest { limit: 3, cursor: cursor.clone() }).await.unwrap();
        for e in &page.errors {
            errors.push(e.session_id.clone());
            assert_eq!(e.error.kind(), StorageErrorKind::Serialization);
            let key = format!("agentscope:user:user-1:session:{}", e.session_id);
            assert!(e.error.to_string().contains(&key), "{}", e.error);
        }
        seen.extend(page.sessions.iter().map(|x| (x.created_at, x.id.clone(), x.message_count)));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    // Each unreadable record is reported once in the whole listing, not on every page.
    errors.sort();
    let mut want = vec!["corrupt".to_owned(), "wrongtype".to_owned(), other.id.clone()];
    want.sort();
    assert_eq!(errors, want);
    assert_eq!(seen.len(), 7, "no session repeated or skipped across pages");
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    assert_eq!(seen, sorted, "newest first");
    assert!(seen.iter().any(|x| x.2 == Some(6)), "message counts come from the context");
    let members: Vec<String> = r.smembers(index).await.unwrap();
    assert!(!members.contains(&"dangling".to_owned()), "dangling ids are pruned");
    assert!(members.contains(&"corrupt".to_owned()), "corrupt records are reported, not pruned");
    assert!(members.contains(&"wrongtype".to_owned()), "wrong-type records are reported, not pruned");
    assert_eq!(members.len(), 10);
    // The other agent still lists its session normally.
    let theirs = s.list_sessions(&as_storage::Owner::new("user-1", "agent-2"), &PageRequest::default()).await.unwrap();
    assert_eq!(theirs.sessions.len(), 1);
    assert!(theirs.errors.is_empty());
}

#[tokio::test]
async fn listing_reads_in_batches_and_misses_nothing() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let o = owner();
    // 513 = two full MGET batches of 256 and a last batch of one key.
    let mut ids = BTreeSet::new();
    for _ in 0..513 {
        ids.insert(s.upsert_session(req(&o)).await.unwrap().id);
    }
    let page = s.list_sessions(&o, &PageRequest { limit: 1000, cursor: None }).await.unwrap();
    assert!(page.errors.is_empty());
    assert!(page.next_cursor.is_none());
    let listed: BTreeSet<String> = page.sessions.into_iter().map(|x| x.id).collect();
    assert_eq!(listed, ids);
}

#[tokio::test]
async fn bad_values_give_typed_errors_naming_the_key() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let cases: [(&str, &[u8]); 3] = [
        ("badjson", b"{\"id\": 3"),
        ("badutf8", b"{\"id\":\"\xff\xfe\"}"),
        ("notarecord", b"{\"id\":\"notarecord\",\"user_id\":7}"),
    ];
    for (id, bytes) in cases {
        let k = format!("agentscope:user:user-1:session:{id}");
        r.set::<(), _, _>(&k, bytes.to_vec(), None, None, false).await.unwrap();
        let e = s.get_session(&o.session(id)).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
        assert!(e.to_string().contains(&k), "{e}");
        let e = s.update_session_state(&o.session(id), &rich_state(), None).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
    }
    let k = "agentscope:user:user-1:session:wrongtype";
    r.rpush::<(), _, _>(k, "x").await.unwrap();
    let e = s.get_session(&o.session("wrongtype")).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
    assert!(e.to_string().contains(k) && e.to_string().contains("wrong Redis type"), "{e}");
    // Every operation that reads the record (message operations check the owner on it) reports
    // a bad one as a typed error naming the record's key, never as a missing session.
    for id in ["badjson", "badutf8", "notarecord", "wrongtype"] {
        let k = format!("agentscope:user:user-1:session:{id}");
        let sk = o.session(id);
        let errors = [
            ("upsert_message", s.upsert_message(&sk, &Msg::user("u", "x")).await.err()),
            ("list_messages", s.list_messages(&sk, 0, 0).await.err()),
            ("get_message", s.get_message(&sk, "m1").await.err()),
            ("delete_session", s.delete_session(&sk).await.err()),
        ];
        for (op, e) in errors {
            let e = e.unwrap_or_else(|| panic!("{op} on {id}: no error"));
            assert_eq!(e.kind(), StorageErrorKind::Serialization, "{op} on {id}: {e}");
            assert!(e.to_string().contains(&k), "{op} on {id}: {e}");
        }
    }
    // A corrupt message is reported with its key.
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let mk = format!("agentscope:user:user-1:session:{}:messages", rec.id);
    r.rpush::<(), _, _>(&mk, "[oops").await.unwrap();
    let e = s.list_messages(&o.session(rec.id.clone()), 0, 0).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Serialization);
    assert!(e.to_string().contains(&mk), "{e}");
}

#[tokio::test]
async fn lifecycle_and_caller_provided_clients() {
    let Some(server) = RedisServer::start() else { return };
    let s = RedisStorage::from_url(&server.url()).unwrap();
    let k = owner().session("s1");
    assert_eq!(s.get_session(&k).await.unwrap_err().kind(), StorageErrorKind::Unavailable, "not open yet");
    s.open().await.unwrap();
    s.open().await.unwrap();
    assert!(s.get_session(&k).await.unwrap().is_none());
    s.close().await.unwrap();
    s.close().await.unwrap();
    assert_eq!(s.get_session(&k).await.unwrap_err().kind(), StorageErrorKind::Unavailable, "closed");

    // A caller's client is used as is and never closed.
    let client = raw(&server.url()).await;
    let wrapped = RedisStorage::from_client(client.clone(), RedisStorageConfig::default()).unwrap();
    wrapped.open().await.unwrap();
    wrapped.upsert_session(req(&owner())).await.unwrap();
    wrapped.close().await.unwrap();
    assert!(client.is_connected());
    assert_eq!(client.dbsize::<i64>().await.unwrap(), 2);
}

#[tokio::test]
async fn session_lock_is_exclusive_token_checked_and_2_0_4_compatible() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let locks = SessionLock::new(&s).unwrap().with_ttl(Duration::from_secs(600));
    let g = locks.try_acquire("sess-1").await.unwrap().unwrap();
    assert_eq!(g.key(), "agentscope:session:lock:sess-1");
    let v: String = r.get(g.key()).await.unwrap();
    assert_eq!(v, g.token());
    assert_eq!(v.len(), 32, "uuid4 hex like 2.0.4");
    let ttl: i64 = r.ttl(g.key()).await.unwrap();
    assert!((595..=600).contains(&ttl));
    assert!(locks.try_acquire("sess-1").await.unwrap().is_none(), "exclusive");
    let e = locks.acquire("sess-1", Duration::from_millis(120)).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Conflict);

    // Someone else takes over the key (e.g. after expiry): our heartbeat must not extend it
    // and our release must not delete it.
    r.set::<(), _, _>(g.key(), "python-token", None, None, false).await.unwrap();
    assert!(!g.extend().await.unwrap());
    assert!(g.is_lost());
    g.lost().await;
    assert_eq!(r.ttl::<i64, _>("agentscope:session:lock:sess-1").await.unwrap(), -1, "not extended");
    assert!(!g.release().await.unwrap());
    assert_eq!(r.get::<String, _>("agentscope:session:lock:sess-1").await.unwrap(), "python-token");
    r.del::<(), _>("agentscope:session:lock:sess-1").await.unwrap();

    // Acquire waits for a release; the heartbeat keeps a short lock alive.
    let short =
        SessionLock::new(&s).unwrap().with_ttl(Duration::from_secs(3)).with_heartbeat(Duration::from_millis(100));
    let g1 = short.try_acquire("sess-2").await.unwrap().unwrap();
    let waiter = {
        let short = short.clone();
        tokio::spawn(async move { short.acquire("sess-2", Duration::from_secs(10)).await })
    };
    // Held 1 s past its 3 s TTL thanks to the heartbeat (without it, the key would expire at
    // 3 s: the waiter would get it and the guard would say lost).
    tokio::time::timeout(Duration::from_secs(4), g1.lost()).await.unwrap_err();
    assert!(!g1.is_lost());
    assert_eq!(r.get::<String, _>(g1.key()).await.unwrap(), g1.token(), "still ours");
    assert!(!waiter.is_finished());
    assert!(g1.release().await.unwrap());
    let g2 = waiter.await.unwrap().unwrap();
    assert!(g2.release().await.unwrap());
}

#[tokio::test]
async fn an_account_without_dangerous_commands_can_open_and_work() {
    // The Redis ACL docs' hardened account: everything but the @dangerous category (INFO, KEYS,
    // FLUSHALL, ...). AgentScope 2.0.4 works with it, so must we.
    let Some(server) = RedisServer::start() else {
        println!("skipped: redis-server is not installed");
        return;
    };
    let reply =
        as_storage_redis::testing::raw_command(server.port(), "ACL SETUSER app on >s3cret +@all -@dangerous ~*")
            .unwrap();
    assert!(reply.starts_with("+OK"), "{reply}");
    let url = format!("redis://app:s3cret@127.0.0.1:{}/0", server.port());
    let store = RedisStorage::new(RedisStorageConfig::from_url(&url).unwrap()).unwrap();
    store.open().await.unwrap();
    let o = owner();
    let rec = store.upsert_session(req(&o)).await.unwrap();
    let k = o.session(rec.id.clone());
    store.update_session_state(&k, &rich_state(), Some(&rec.revision())).await.unwrap();
    store.upsert_message(&k, &Msg::user("user", "hi")).await.unwrap();
    assert_eq!(store.list_sessions(&o, &PageRequest::first(10)).await.unwrap().sessions.len(), 1);
    assert!(store.delete_session(&k).await.unwrap());
    store.close().await.unwrap();
}

/// A message list whose record is gone (it expired first, or a 2.0.4 delete stopped halfway)
/// belongs to no session: a session created again under that id, by any agent, starts empty.
#[tokio::test]
async fn a_session_created_again_under_an_old_id_starts_with_an_empty_log() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let a = owner();
    let rec = s.upsert_session(req(&a).with_session_id("chat-1")).await.unwrap();
    s.upsert_message(&a.session(rec.id.clone()), &Msg::user("u", "agent-1's secret")).await.unwrap();
    // The record goes; its log stays (what an expiry of the record alone, or a crash, leaves).
    r.del::<(), _>("agentscope:user:user-1:session:chat-1").await.unwrap();
    let b = Owner::new("user-1", "agent-2");
    let again = s.upsert_session(req(&b).with_session_id("chat-1")).await.unwrap();
    assert_eq!(again.id, "chat-1");
    assert!(s.list_messages(&b.session("chat-1"), 0, 0).await.unwrap().is_empty());
    let left: i64 = r.llen("agentscope:user:user-1:session:chat-1:messages").await.unwrap();
    assert_eq!(left, 0, "the orphaned log was removed");
}

/// With a sliding TTL, a message write restarts the record's TTL too: the record never expires
/// before the conversation written after it.
#[tokio::test]
async fn a_sliding_message_write_restarts_the_records_ttl() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Sliding(Duration::from_secs(3600))).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let rkey = format!("agentscope:user:user-1:session:{}", rec.id);
    let index = "agentscope:user:user-1:agent:agent-1:sessions";
    r.expire::<(), _>(&rkey, 100, None).await.unwrap();
    r.expire::<(), _>(index, 100, None).await.unwrap();
    s.upsert_message(&o.session(rec.id.clone()), &Msg::user("u", "hi")).await.unwrap();
    let ttl: i64 = r.ttl(&rkey).await.unwrap();
    assert!(ttl > 3000, "record ttl {ttl}");
    // The listing entry lives as long as the session: its index set's TTL restarts too, and a
    // missing entry is re-added (as a state update re-adds it).
    let ttl: i64 = r.ttl(index).await.unwrap();
    assert!(ttl > 3000, "index ttl {ttl}");
    r.srem::<(), _, _>(index, rec.id.as_str()).await.unwrap();
    s.upsert_message(&o.session(rec.id.clone()), &Msg::user("u", "again")).await.unwrap();
    let listed = s.list_sessions(&o, &PageRequest::first(10)).await.unwrap();
    assert_eq!(listed.sessions.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), [rec.id.as_str()]);
}

/// An index key of another Redis type than a set fails a write before anything is written
/// (Redis does not roll a script back: a `SADD` failing after the `SET` would leave it written).
#[tokio::test]
async fn a_wrong_type_index_key_fails_writes_before_they_write() {
    let Some(server) = RedisServer::start() else { return };
    let r = raw(&server.url()).await;
    let index = "agentscope:user:user-1:agent:agent-1:sessions";
    // Both update paths: inline (small record) and staged (large record).
    for (i, state) in [rich_state(), common::state_with(60)].into_iter().enumerate() {
        let s = compat(&server).await;
        let o = owner();
        let rec = s.upsert_session(req(&o).with_session_id(format!("s{i}"))).await.unwrap();
        let key = o.session(rec.id.clone());
        r.del::<(), _>(index).await.unwrap();
        r.set::<(), _, _>(index, "x", None, None, false).await.unwrap();
        let before: String = r.get(format!("agentscope:user:user-1:session:{}", rec.id)).await.unwrap();
        let e = s.save_turn(&key, &state, None, &[Msg::user("u", "hi")]).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
        assert!(e.to_string().contains(index), "{e}");
        let after: String = r.get(format!("agentscope:user:user-1:session:{}", rec.id)).await.unwrap();
        assert_eq!(after, before, "the record was written although the write failed");
        let log: i64 = r.llen(format!("agentscope:user:user-1:session:{}:messages", rec.id)).await.unwrap();
        assert_eq!(log, 0, "the messages were written although the write failed");
        let e = s.upsert_message(&key, &Msg::user("u", "hi")).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
        let log: i64 = r.llen(format!("agentscope:user:user-1:session:{}:messages", rec.id)).await.unwrap();
        assert_eq!(log, 0, "the message was written although the write failed");
        let e = s.delete_session(&key).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
        assert!(s.get_session(&key).await.unwrap().is_some(), "the record was deleted although the delete failed");
        // A create writes no record nobody indexes.
        let e = s.upsert_session(req(&o).with_session_id("fresh")).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
        assert!(!r.exists::<bool, _>("agentscope:user:user-1:session:fresh").await.unwrap());
        r.del::<(), _>(index).await.unwrap();
    }
}

/// A listing with a single indexed id whose record key holds a list reports it as an error
/// item, like it does inside a larger batch.
#[tokio::test]
async fn a_one_session_listing_reports_a_wrong_type_record() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    r.sadd::<(), _, _>("agentscope:user:user-1:agent:agent-1:sessions", "wt").await.unwrap();
    r.rpush::<(), _, _>("agentscope:user:user-1:session:wt", "x").await.unwrap();
    let page = s.list_sessions(&o, &PageRequest::default()).await.unwrap();
    assert!(page.sessions.is_empty());
    let errors: Vec<&str> = page.errors.iter().map(|e| e.session_id.as_str()).collect();
    assert_eq!(errors, ["wt"]);
}

/// `get_message` never answers with an older copy when the newest one is corrupt.
#[tokio::test]
async fn get_message_reports_a_corrupt_newest_copy() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let key = o.session(rec.id.clone());
    let m = Msg::user("u", "old copy");
    s.upsert_message(&key, &m).await.unwrap();
    s.upsert_message(&key, &Msg::user("u", "other")).await.unwrap();
    let mk = format!("agentscope:user:user-1:session:{}:messages", rec.id);
    r.rpush::<(), _, _>(&mk, format!("{{\"id\":\"{}\",\"content\":[", m.id)).await.unwrap();
    let e = s.get_message(&key, &m.id).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
    assert!(e.to_string().contains(&mk), "{e}");
}

/// The key names the session: a record whose `id` field disagrees (a copied key) or is missing
/// is read and written under its key, never another session's.
#[tokio::test]
async fn writes_go_to_the_session_the_key_names() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let b = s.upsert_session(req(&o).with_session_id("b")).await.unwrap();
    let b_json: String = r.get("agentscope:user:user-1:session:b").await.unwrap();
    r.set::<(), _, _>("agentscope:user:user-1:session:a", b_json.clone(), None, None, false).await.unwrap();
    r.sadd::<(), _, _>("agentscope:user:user-1:agent:agent-1:sessions", "a").await.unwrap();
    let a = o.session("a");
    assert_eq!(s.get_session(&a).await.unwrap().unwrap().id, "a");
    let m = Msg::user("u", "for a");
    s.save_turn(&a, &b.state, None, std::slice::from_ref(&m)).await.unwrap();
    assert_eq!(s.list_messages(&a, 0, 0).await.unwrap(), vec![m.clone()]);
    assert!(s.list_messages(&o.session("b"), 0, 0).await.unwrap().is_empty());
    let stored: serde_json::Value =
        serde_json::from_str(&r.get::<String, _>("agentscope:user:user-1:session:a").await.unwrap()).unwrap();
    assert_eq!(stored["id"], "a");
    // No `id` at all: every write still lands in the same log.
    let mut doc: serde_json::Value = serde_json::from_str(&b_json).unwrap();
    doc.as_object_mut().unwrap().remove("id");
    r.set::<(), _, _>("agentscope:user:user-1:session:c", doc.to_string(), None, None, false).await.unwrap();
    let c = o.session("c");
    for text in ["one", "two"] {
        s.save_turn(&c, &b.state, None, &[Msg::user("u", text)]).await.unwrap();
    }
    assert_eq!(s.list_messages(&c, 0, 0).await.unwrap().len(), 2);
}

/// A record nobody can read (not JSON, not UTF-8, not a record, another Redis type) has no owner
/// to check on it: the agent's index decides, so `delete_session` can still remove it (with its
/// message list and index entry) instead of failing forever; one this agent's index does not
/// list stays an error.
#[tokio::test]
async fn an_unreadable_record_in_the_agents_index_can_be_deleted() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let index = "agentscope:user:user-1:agent:agent-1:sessions";
    let cases: [(&str, Option<&[u8]>); 4] = [
        ("badjson", Some(b"not json {")),
        ("badutf8", Some(b"{\"id\":\"\xff\xfe\"}")),
        ("notarecord", Some(b"{\"id\":\"notarecord\",\"user_id\":7}")),
        ("wrongtype", None),
    ];
    for (id, bytes) in cases {
        let k = format!("agentscope:user:user-1:session:{id}");
        match bytes {
            Some(b) => r.set::<(), _, _>(&k, b.to_vec(), None, None, false).await.unwrap(),
            None => r.rpush::<(), _, _>(&k, "x").await.unwrap(),
        }
        r.rpush::<(), _, _>(format!("{k}:messages"), "m").await.unwrap();
        // Not in this agent's index: whose it is cannot be told, so it stays an error.
        let e = s.delete_session(&o.session(id)).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "{id}: {e}");
        r.sadd::<(), _, _>(index, id).await.unwrap();
        assert!(s.delete_session(&o.session(id)).await.unwrap(), "{id}");
        assert!(!r.exists::<bool, _>(&k).await.unwrap(), "{id}: record left");
        assert!(!r.exists::<bool, _>(format!("{k}:messages")).await.unwrap(), "{id}: messages left");
        assert!(!r.sismember::<bool, _, _>(index, id).await.unwrap(), "{id}: index entry left");
        assert!(!s.delete_session(&o.session(id)).await.unwrap(), "{id}: deleted twice");
    }
    // A record this reader cannot decode (a bad timestamp) that names another agent as its owner
    // stays, even though this agent's index lists it (a stale entry).
    let theirs = r#"{"id":"theirs","updated_at":"not a time","created_at":"x","user_id":"user-1","agent_id":"agent-2","state":{}}"#;
    r.set::<(), _, _>("agentscope:user:user-1:session:theirs", theirs, None, None, false).await.unwrap();
    r.sadd::<(), _, _>(index, "theirs").await.unwrap();
    let e = s.delete_session(&o.session("theirs")).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
    assert!(r.exists::<bool, _>("agentscope:user:user-1:session:theirs").await.unwrap(), "another agent's record went");
    // Another agent's index entry does not let it delete this agent's readable session.
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let other = Owner::new("user-1", "agent-2");
    r.sadd::<(), _, _>("agentscope:user:user-1:agent:agent-2:sessions", rec.id.clone()).await.unwrap();
    assert!(!s.delete_session(&other.session(rec.id.clone())).await.unwrap());
    assert!(s.get_session(&o.session(rec.id)).await.unwrap().is_some());
}

/// An indexed id this store cannot address (AgentScope 2.0.4 checks none, so a Python writer may
/// make `"my chat"`; or bytes that are not UTF-8) is reported as an error item of the listing, not
/// silently left out, and its index entry is left alone.
#[tokio::test]
async fn a_listing_reports_ids_this_store_cannot_address() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let index = "agentscope:user:user-1:agent:agent-1:sessions";
    // What a Python writer leaves for `session_id="my chat"`: the record and its index entry.
    let text = s.get_session_raw(&o.session(rec.id.clone())).await.unwrap().unwrap();
    let theirs = text.replacen(&format!("\"id\":\"{}\"", rec.id), "\"id\":\"my chat\"", 1);
    assert_ne!(theirs, text);
    r.set::<(), _, _>("agentscope:user:user-1:session:my chat", theirs, None, None, false).await.unwrap();
    r.sadd::<(), _, _>(index, "my chat").await.unwrap();
    r.sadd::<(), _, _>(index, fred::bytes::Bytes::from_static(b"bad\xff")).await.unwrap();
    let page = s.list_sessions(&o, &PageRequest::default()).await.unwrap();
    assert_eq!(page.sessions.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), [rec.id.as_str()]);
    let mut errors: Vec<(&str, StorageErrorKind)> =
        page.errors.iter().map(|e| (e.session_id.as_str(), e.error.kind())).collect();
    errors.sort_by_key(|e| e.0);
    assert_eq!(errors, [("bad\u{fffd}", StorageErrorKind::InvalidKey), ("my chat", StorageErrorKind::InvalidKey)]);
    assert!(page.errors.iter().all(|e| e.error.to_string().contains(index)), "{:?}", page.errors);
    assert!(r.sismember::<bool, _, _>(index, "my chat").await.unwrap(), "the entry is Python's: left alone");
}

/// Whether a record is another agent's is told from its head (the compact envelope every writer
/// uses): the message scripts answer "not found" to another agent without decoding the whole
/// record in Lua (which blocks the server for a large one). Seen through a record whose head
/// is sound and whose tail is not JSON: decoding it would fail.
#[tokio::test]
async fn another_agents_message_calls_are_told_from_the_record_head() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let rec = s.upsert_session(req(&o).with_state(common::state_with(50))).await.unwrap();
    let rkey = format!("agentscope:user:user-1:session:{}", rec.id);
    let text = s.get_session_raw(&o.session(rec.id.clone())).await.unwrap().unwrap();
    // Cut in the middle of the context: not JSON, the envelope intact.
    r.set::<(), _, _>(&rkey, &text[..text.len() / 2], None, None, false).await.unwrap();
    let theirs = Owner::new("user-1", "agent-2").session(rec.id.clone());
    assert!(s.list_messages(&theirs, 0, 0).await.unwrap().is_empty());
    assert!(s.get_message(&theirs, "m").await.unwrap().is_none());
    let e = s.upsert_message(&theirs, &Msg::user("u", "hi")).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::NotFound, "{e}");
}

/// A record that cannot be decoded (here: no `config`) but names its schedule: deleting it
/// removes the schedule index entry too (nothing else ever would), and a schedule index of
/// another Redis type fails the delete before anything is deleted.
#[tokio::test]
async fn deleting_an_unreadable_record_removes_its_schedule_index_entry() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    s.upsert_session(req(&o).with_session_id("sched-s").with_schedule("sched-1")).await.unwrap();
    let key = o.session("sched-s");
    let rkey = "agentscope:user:user-1:session:sched-s";
    let sched = "agentscope:user:user-1:schedule:sched-1:sessions";
    let text: String = r.get(rkey).await.unwrap();
    let (from, to) = (text.find(",\"config\":").unwrap(), text.find(",\"state\":").unwrap());
    let broken = format!("{}{}", &text[..from], &text[to..]);
    r.set::<(), _, _>(rkey, broken, None, None, false).await.unwrap();
    assert_eq!(s.get_session(&key).await.unwrap_err().kind(), StorageErrorKind::Serialization);
    // The schedule index holds another type: nothing is deleted.
    r.del::<(), _>(sched).await.unwrap();
    r.set::<(), _, _>(sched, "x", None, None, false).await.unwrap();
    let e = s.delete_session(&key).await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Serialization, "{e}");
    assert!(e.to_string().contains(sched), "{e}");
    assert!(r.exists::<bool, _>(rkey).await.unwrap(), "the record went although the delete failed");
    r.del::<(), _>(sched).await.unwrap();
    r.sadd::<(), _, _>(sched, ["sched-s", "other"]).await.unwrap();
    assert!(s.delete_session(&key).await.unwrap());
    assert!(!r.exists::<bool, _>(rkey).await.unwrap());
    assert!(!r.sismember::<bool, _, _>(sched, "sched-s").await.unwrap(), "the schedule index entry was left");
    assert!(r.sismember::<bool, _, _>(sched, "other").await.unwrap());
}

/// A message list key holding another Redis type fails `save_turn` on both write paths (inline,
/// and staged for a large record) with an error naming that key, before anything is written,
/// and leaves no staging key behind.
#[tokio::test]
async fn a_wrong_type_message_list_fails_save_turn_naming_it() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    for (i, state) in [rich_state(), common::state_with(60)].into_iter().enumerate() {
        let rec = s.upsert_session(req(&o).with_session_id(format!("s{i}"))).await.unwrap();
        let key = o.session(rec.id.clone());
        let rkey = format!("agentscope:user:user-1:session:{}", rec.id);
        let mkey = format!("{rkey}:messages");
        r.set::<(), _, _>(&mkey, "x", None, None, false).await.unwrap();
        let before: String = r.get(&rkey).await.unwrap();
        let e = s.save_turn(&key, &state, None, &[Msg::user("u", "hi")]).await.unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization, "state {i}: {e}");
        assert!(e.to_string().contains(&format!("{mkey:?}")), "state {i}: {e}");
        assert_eq!(r.get::<String, _>(&rkey).await.unwrap(), before, "state {i}: the record was written");
        assert_eq!(r.get::<String, _>(&mkey).await.unwrap(), "x");
        let keys = common::all_keys(&r).await;
        assert!(keys.iter().all(|k| !k.contains(":stage:")), "state {i}: {keys:?}");
    }
}

/// A record with a repeated key (pydantic keeps the last value; 2.0.4 reads it) is listed like
/// `get_session` reads it, not reported as an error item.
#[tokio::test]
async fn a_listing_reads_repeated_keys_as_get_session_does() {
    let Some(server) = RedisServer::start() else { return };
    let s = compat(&server).await;
    let r = raw(&server.url()).await;
    let o = owner();
    let rec = s.upsert_session(req(&o).with_session_id("dup")).await.unwrap();
    let rkey = "agentscope:user:user-1:session:dup";
    let text: String = r.get(rkey).await.unwrap();
    let repeated = text.replacen("\"config\":{", "\"config\":{\"name\":\"first\",", 1);
    assert_ne!(repeated, text);
    r.set::<(), _, _>(rkey, repeated, None, None, false).await.unwrap();
    let got = s.get_session(&o.session("dup")).await.unwrap().unwrap();
    assert_eq!(got.config.name, rec.config.name);
    let page = s.list_sessions(&o, &PageRequest::default()).await.unwrap();
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    assert_eq!(page.sessions.iter().map(|x| (x.id.as_str(), x.name.as_str())).collect::<Vec<_>>(), [("dup", "test")]);
}

/// `open` asks `INFO cluster` once: the answer that decides whether to switch to a cluster client
/// also decides whether the key layout fits. (Counted in the slow log, which here logs every
/// command with its arguments: fred sends an `INFO` of its own on each connection.)
#[tokio::test]
async fn open_asks_info_cluster_once() {
    let Some(server) = RedisServer::start_with(&["--save", "", "--appendonly", "no", "--slowlog-log-slower-than", "0"])
    else {
        return;
    };
    let s = compat(&server).await;
    let log = as_storage_redis::testing::raw_command(server.port(), "SLOWLOG GET 1000").unwrap();
    let asked = log.to_ascii_lowercase().matches("\r\ninfo\r\n$7\r\ncluster\r\n").count();
    assert_eq!(asked, 1, "{log}");
    s.close().await.unwrap();
}
