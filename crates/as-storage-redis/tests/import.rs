//! `import_record` and `list_agents` against a private redis-server: the exact keys, bytes, index
//! sets and TTLs a 2.0.4 create would leave, and agent discovery from 2.0.4's index sets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // helpers outside #[test] fns

mod common;

use std::time::Duration;

use as_message::Msg;
use as_storage::{ImportMode, ImportOutcome, SessionRecord, SessionSource, StorageBase, Timestamp};
use as_storage_redis::testing::RedisServer;
use as_storage_redis::{KeyLayout, TtlPolicy};
use common::{all_keys, owner, raw, rich_state, store};
use fred::prelude::{KeysInterface, ListInterface, SetsInterface};

fn record(id: &str, schedule: Option<&str>) -> SessionRecord {
    let o = owner();
    let mut state = rich_state();
    state.session_id = "foreign".into();
    SessionRecord {
        id: id.into(),
        updated_at: "2024-05-01T09:30:00.5".parse::<Timestamp>().unwrap(),
        created_at: "2024-04-30T08:00:00".parse::<Timestamp>().unwrap(),
        user_id: o.user_id.clone(),
        agent_id: o.agent_id.clone(),
        source: if schedule.is_some() { SessionSource::Schedule } else { SessionSource::User },
        source_schedule_id: schedule.map(str::to_owned),
        team_id: Some("team-1".into()),
        config: as_storage::SessionConfig::new("ws-1").with_name("imported"),
        state,
    }
}

fn msg(id: &str, text: &str) -> Msg {
    let mut m = Msg::assistant("Friday", text);
    m.id = id.into();
    m
}

#[tokio::test]
async fn import_writes_the_2_0_4_keys_bytes_and_ttls() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Sliding(Duration::from_secs(3600))).await;
    let r = raw(&server.url()).await;
    let rec = record("s1", Some("sched-1"));
    let log = [msg("m1", "one"), msg("m2", "two")];
    assert_eq!(s.import_record(&rec, &log, ImportMode::CreateOnly).await.unwrap(), ImportOutcome::Created);

    let rkey = "agentscope:user:user-1:session:s1";
    let mkey = "agentscope:user:user-1:session:s1:messages";
    let ikey = "agentscope:user:user-1:agent:agent-1:sessions";
    let hkey = "agentscope:user:user-1:schedule:sched-1:sessions";
    let mut want = vec![rkey, mkey, ikey, hkey];
    want.sort_unstable();
    assert_eq!(all_keys(&r).await, want, "exactly the keys of a 2.0.4 create with a schedule");
    let stored: String = r.get(rkey).await.unwrap();
    assert_eq!(stored, rec.to_canonical_json(), "the record's bytes, timestamps and team as given");
    assert!(stored.contains(r#""updated_at":"2024-05-01T09:30:00.500000","created_at":"2024-04-30T08:00:00""#));
    assert!(stored.contains(r#""team_id":"team-1""#) && stored.contains(r#""state":{"session_id":"s1""#));
    let msgs: Vec<String> = r.lrange(mkey, 0, -1).await.unwrap();
    assert_eq!(msgs, log.iter().map(as_message::to_json).collect::<Vec<_>>());
    assert_eq!(r.smembers::<Vec<String>, _>(ikey).await.unwrap(), ["s1"]);
    assert_eq!(r.smembers::<Vec<String>, _>(hkey).await.unwrap(), ["s1"]);
    for k in [rkey, mkey] {
        let ttl: i64 = r.ttl(k).await.unwrap();
        assert!((3590..=3600).contains(&ttl), "{k}: ttl {ttl}");
    }

    // Overwrite with another schedule (and no messages): the schedule entry moves, the log empties.
    let mut again = record("s1", Some("sched-2"));
    again.team_id = None;
    assert_eq!(s.import_record(&again, &[], ImportMode::Overwrite).await.unwrap(), ImportOutcome::Replaced);
    assert_eq!(r.get::<String, _>(rkey).await.unwrap(), again.to_canonical_json());
    assert_eq!(r.exists::<i64, _>(mkey).await.unwrap(), 0, "the old log is gone");
    assert_eq!(r.exists::<i64, _>(hkey).await.unwrap(), 0, "the old schedule index lost its only member");
    let h2 = "agentscope:user:user-1:schedule:sched-2:sessions";
    assert_eq!(r.smembers::<Vec<String>, _>(h2).await.unwrap(), ["s1"]);
}

#[tokio::test]
async fn import_without_ttl_persists_like_2_0_4_without_key_ttl() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await;
    let r = raw(&server.url()).await;
    s.import_record(&record("s1", None), &[msg("m1", "x")], ImportMode::CreateOnly).await.unwrap();
    for k in [
        "agentscope:user:user-1:session:s1",
        "agentscope:user:user-1:session:s1:messages",
        "agentscope:user:user-1:agent:agent-1:sessions",
    ] {
        assert_eq!(r.ttl::<i64, _>(k).await.unwrap(), -1, "{k}");
    }
    assert_eq!(all_keys(&r).await.len(), 3, "no schedule index without a schedule");
}

#[tokio::test]
async fn an_overwrite_import_in_keep_mode_changes_no_expiry() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Keep).await;
    let r = raw(&server.url()).await;
    s.import_record(&record("s1", None), &[msg("m1", "x")], ImportMode::CreateOnly).await.unwrap();
    let rkey = "agentscope:user:user-1:session:s1";
    let mkey = "agentscope:user:user-1:session:s1:messages";
    // Someone else manages the expiry of these keys.
    for k in [rkey, mkey] {
        let () = r.expire(k, 3600, None).await.unwrap();
    }
    let log = [msg("m1", "x"), msg("m2", "y")];
    assert_eq!(
        s.import_record(&record("s1", None), &log, ImportMode::Overwrite).await.unwrap(),
        ImportOutcome::Replaced
    );
    assert_eq!(r.llen::<i64, _>(mkey).await.unwrap(), 2, "the log was replaced");
    for k in [rkey, mkey] {
        let ttl: i64 = r.ttl(k).await.unwrap();
        assert!((3590..=3600).contains(&ttl), "{k}: ttl {ttl} (the expiry must be kept)");
    }
}

#[tokio::test]
async fn list_agents_reads_2_0_4_index_sets_and_nothing_else() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await;
    let r = raw(&server.url()).await;
    // What a Python 2.0.4 writer leaves: index sets per agent.
    let () = r.sadd("agentscope:user:user-1:agent:py-agent:sessions", "s9").await.unwrap();
    let () = r.sadd("agentscope:user:user-1:agent:other.agent:sessions", "s8").await.unwrap();
    // Lookalikes that are not agent index sets of user-1.
    let () = r.set("agentscope:user:user-1:agent:not-a-set:sessions", "x", None, None, false).await.unwrap();
    let () = r.sadd("agentscope:user:user-1:agent:a:b:sessions", "s7").await.unwrap();
    let () = r.sadd("agentscope:user:user-10:agent:theirs:sessions", "s6").await.unwrap();
    let () = r.sadd("agentscope:user:user-1:schedule:h:sessions", "s5").await.unwrap();
    let () = r.sadd("agentscope:user:user-1:agents", "registered-only").await.unwrap();
    assert_eq!(s.list_agents("user-1").await.unwrap(), ["other.agent", "py-agent"]);
    assert_eq!(s.list_agents("user-10").await.unwrap(), ["theirs"]);
    assert!(s.list_agents("user-2").await.unwrap().is_empty());
}

#[tokio::test]
async fn list_agents_in_the_cluster_layout_on_one_server() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Cluster, TtlPolicy::Persist).await;
    let rec = {
        let mut r = record("s1", None);
        r.agent_id = "zeta".into();
        r
    };
    s.import_record(&rec, &[], ImportMode::CreateOnly).await.unwrap();
    s.upsert_session(common::req(&owner())).await.unwrap();
    // A backslash in the user id is escaped in the pattern and still found.
    let odd = as_storage::Owner::new(r"back\slash", "agent-x");
    s.upsert_session(common::req(&odd)).await.unwrap();
    assert_eq!(s.list_agents("user-1").await.unwrap(), ["agent-1", "zeta"]);
    assert_eq!(s.list_agents(r"back\slash").await.unwrap(), ["agent-x"]);
    assert!(s.list_agents("back").await.unwrap().is_empty());
}

/// Every schedule index member is a live session of that schedule, whatever a delete raced with.
async fn schedule_indexes_are_exact(r: &fred::prelude::Client, s: &as_storage_redis::RedisStorage, id: &str) {
    let rec = s.get_session(&owner().session(id)).await.unwrap();
    for h in ["sched-a", "sched-b"] {
        let hkey = format!("agentscope:user:user-1:schedule:{h}:sessions");
        let members: Vec<String> = r.smembers(&hkey).await.unwrap();
        let listed = members.iter().any(|m| m == id);
        let live = rec.as_ref().is_some_and(|rec| rec.source_schedule_id.as_deref() == Some(h));
        assert_eq!(
            listed,
            live,
            "{hkey} lists {id}: {listed}, record {:?}",
            rec.as_ref().map(|r| &r.source_schedule_id)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_racing_an_import_that_moves_the_schedule_leaves_no_stale_index_entry() {
    let Some(server) = RedisServer::start() else { return };
    let s = store(&server.url(), KeyLayout::Compat, TtlPolicy::Persist).await;
    let r = raw(&server.url()).await;
    for round in 0..300 {
        let id = format!("race-{round}");
        s.import_record(&record(&id, Some("sched-a")), &[], ImportMode::CreateOnly).await.unwrap();
        let (s1, s2, moved) = (s.clone(), s.clone(), record(&id, Some("sched-b")));
        let key = owner().session(id.clone());
        let import = tokio::spawn(async move { s1.import_record(&moved, &[], ImportMode::Overwrite).await.unwrap() });
        let delete = tokio::spawn(async move { s2.delete_session(&key).await.unwrap() });
        import.await.unwrap();
        delete.await.unwrap();
        schedule_indexes_are_exact(&r, &s, &id).await;
    }
}
