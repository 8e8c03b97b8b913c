//! Redis Cluster specifics on a real local 3-master cluster: the compat layout is refused, a
//! plain `redis://` URL to one node switches to a cluster client, users spread over the shards,
//! and the session lock works.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // helpers outside #[test] fns

mod common;

use std::time::Duration;

use as_storage::{PageRequest, StorageBase, StorageErrorKind};
use as_storage_redis::testing::{RedisCluster, raw_command};
use as_storage_redis::{KeyLayout, RedisStorage, RedisStorageConfig, SessionLock};
use common::req;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_layout_spreads_users_and_compat_is_refused() {
    let Some(cluster) = RedisCluster::start() else { return };

    // The 2.0.4 layout cannot run its multi-key scripts on a cluster: refused at open.
    let compat = RedisStorage::from_url(&cluster.url()).unwrap();
    let e = compat.open().await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Unsupported);
    assert!(e.to_string().contains("CROSSSLOT") && e.to_string().contains("layout=cluster"), "{e}");

    // A plain redis:// URL naming one node, with layout=cluster: works as a cluster client.
    let url = format!("redis://127.0.0.1:{}?layout=cluster", cluster.ports()[1]);
    let s =
        RedisStorage::new(RedisStorageConfig::from_url(&url).unwrap().with_timeout(Duration::from_secs(5))).unwrap();
    s.open().await.unwrap();
    assert_eq!(s.config().layout, KeyLayout::Cluster);
    for u in 0..24 {
        let o = as_storage::Owner::new(format!("user-{u}"), "agent-1");
        let rec = s.upsert_session(req(&o).with_schedule("sched-1").with_state(common::rich_state())).await.unwrap();
        let key = o.session(rec.id.clone());
        s.upsert_message(&key, &as_message::Msg::user("u", "hi")).await.unwrap();
        s.update_session_state(&key, &rec.state, Some(&rec.revision())).await.unwrap();
        let page = s.list_sessions(&o, &PageRequest::default()).await.unwrap();
        assert_eq!(page.sessions.len(), 1);
        assert_eq!(s.list_messages(&key, 0, 0).await.unwrap().len(), 1);
        if u % 3 == 0 {
            assert!(s.delete_session(&key).await.unwrap());
        }
    }
    assert_eq!(s.session_key("user-7", "s1"), "agentscope:user:{user-7}:session:s1");
    // Every master holds some users' keys.
    for port in cluster.ports() {
        let n = raw_command(port, "DBSIZE").unwrap();
        let n: i64 = n.trim().trim_start_matches(':').parse().unwrap();
        assert!(n > 0, "node {port} holds no keys");
    }

    // A large state goes through the staging key, which shares the record's slot.
    let o = as_storage::Owner::new("user-big", "agent-1");
    let rec = s.upsert_session(req(&o)).await.unwrap();
    let key = o.session(rec.id.clone());
    let big = common::state_with(60);
    s.update_session_state(&key, &big, Some(&rec.revision())).await.unwrap();
    assert_eq!(s.get_session(&key).await.unwrap().unwrap().state.context, big.context);

    // Agents of a user: found on the node owning the user's slot, or on every primary when the
    // user id holds a `\` (escaped in the SCAN pattern, so the pattern's hash tag differs).
    for user in ["user-agents", r"user\agents"] {
        for agent in ["agent-a", "agent-b", "agent-c"] {
            let o = as_storage::Owner::new(user, agent);
            s.upsert_session(req(&o)).await.unwrap();
        }
        let mut agents = s.list_agents(user).await.unwrap();
        agents.sort();
        assert_eq!(agents, ["agent-a", "agent-b", "agent-c"], "{user}");
    }

    // The session lock on a cluster.
    let locks = SessionLock::new(&s).unwrap();
    let g = locks.try_acquire("sess-1").await.unwrap().unwrap();
    assert!(locks.try_acquire("sess-1").await.unwrap().is_none());
    assert!(g.release().await.unwrap());
    s.close().await.unwrap();
}

/// A cluster client with the compat layout is refused at open even when the account may not run
/// `INFO` (a hardened account without `@dangerous`), which is then no evidence of a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compat_on_a_cluster_client_is_refused_without_info() {
    let Some(cluster) = RedisCluster::start() else { return };
    for port in cluster.ports() {
        let reply = raw_command(port, "ACL SETUSER app on >s3cret +@all -@dangerous ~*").unwrap();
        assert!(reply.starts_with("+OK"), "{reply}");
    }
    let url = cluster.url().replacen("redis-cluster://", "redis-cluster://app:s3cret@", 1);
    let compat =
        RedisStorage::new(RedisStorageConfig::from_url(&url).unwrap().with_timeout(Duration::from_secs(5))).unwrap();
    let e = compat.open().await.unwrap_err();
    assert_eq!(e.kind(), StorageErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("layout=cluster"), "{e}");
    assert!(!compat.is_open());
    // The cluster layout works on the same account.
    let s = RedisStorage::new(
        RedisStorageConfig::from_url(&format!("{url}&layout=cluster")).unwrap().with_timeout(Duration::from_secs(5)),
    )
    .unwrap();
    s.open().await.unwrap();
    let o = as_storage::Owner::new("user-1", "agent-1");
    s.upsert_session(req(&o)).await.unwrap();
    s.close().await.unwrap();
}
