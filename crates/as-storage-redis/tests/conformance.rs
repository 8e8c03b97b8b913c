//! The as-storage conformance suite against RedisStorage, in both key layouts, on a private
//! redis-server per scenario, and once more (the cluster layout) on a real 3-master cluster.
//! The fault sweep runs the store through a proxy that refuses chosen writes
//! (`common::fault_proxy`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // helpers outside #[test] fns

mod common;

use std::sync::Arc;
use std::time::Duration;

use as_storage::conformance::{BuildOptions, Faulty, StorageFactory};
use as_storage::{SharedStorage, StorageBase, StorageError};
use as_storage_redis::testing::{RedisCluster, RedisServer, redis_server_or_skip};
use as_storage_redis::{KeyConfig, KeyLayout, RedisStorage, RedisStorageConfig, TtlPolicy};
use common::fault_proxy::FaultProxy;

/// The layout's templates under a random prefix, so several stores can share one server.
fn prefixed(layout: KeyLayout, prefix: &str) -> KeyConfig {
    let k = layout.key_config();
    KeyConfig {
        session: format!("{prefix}{}", k.session),
        session_index: format!("{prefix}{}", k.session_index),
        messages: format!("{prefix}{}", k.messages),
        schedule_session_index: format!("{prefix}{}", k.schedule_session_index),
    }
}

async fn open(
    url: &str,
    layout: KeyLayout,
    prefix: &str,
    options: &BuildOptions,
) -> Result<SharedStorage, StorageError> {
    let mut cfg = RedisStorageConfig::from_url(url)?
        .with_layout(layout)
        .with_key_config(prefixed(layout, prefix))
        .with_timeout(Duration::from_secs(5));
    if let Some(max) = options.max_record_bytes {
        cfg = cfg.with_max_record_bytes(max);
    }
    if let Some(ttl) = options.ttl {
        cfg = cfg.with_ttl_policy(TtlPolicy::Sliding(ttl));
    }
    let s = RedisStorage::new(cfg)?;
    s.open().await?;
    Ok(Arc::new(s))
}

/// A fresh private redis-server per scenario.
struct ServerFactory {
    layout: KeyLayout,
}

/// A scenario's server, and the fault proxy in front of it for the fault sweep (dropped first).
struct Served {
    _proxy: Option<FaultProxy>,
    server: RedisServer,
}

fn start_server() -> Result<RedisServer, StorageError> {
    RedisServer::start().ok_or_else(|| {
        StorageError::new(as_storage::StorageErrorKind::Unavailable, "redis", "build", "redis-server not found")
    })
}

impl StorageFactory for ServerFactory {
    type Guard = Served;

    async fn build(&self, options: &BuildOptions) -> Result<(Served, SharedStorage), StorageError> {
        let server = start_server()?;
        let s = open(&server.url(), self.layout, "", options).await?;
        Ok((Served { _proxy: None, server }, s))
    }

    async fn reopen(&self, guard: &Served) -> Result<Option<SharedStorage>, StorageError> {
        Ok(Some(open(&guard.server.url(), self.layout, "", &BuildOptions::default()).await?))
    }

    /// The store connects through a [`FaultProxy`] in front of the server: its faults are writes
    /// the proxy refuses instead of forwarding (the server never sees them).
    async fn build_faulty(&self, options: &BuildOptions) -> Result<Option<Faulty<Served>>, StorageError> {
        let server = start_server()?;
        let proxy = FaultProxy::start(([127, 0, 0, 1], server.port()).into()).await.map_err(|e| {
            StorageError::new(as_storage::StorageErrorKind::Backend, "redis-test", "build_faulty", "start the proxy")
                .with_source(e)
        })?;
        let s = open(&format!("redis://{}", proxy.addr()), self.layout, "", options).await?;
        let faults = proxy.faults();
        Ok(Some(Faulty::new(Served { _proxy: Some(proxy), server }, s, faults)))
    }

    fn skip_reason(&self) -> Option<String> {
        redis_server_or_skip().is_none().then(|| "redis-server not found".to_owned())
    }
}

// Each layout pins its exact skips (a new one fails its test): none. The fault sweep runs through
// `FaultProxy` (`ServerFactory::build_faulty`); only the real cluster below still skips it.

mod compat {
    as_storage::storage_conformance_tests!(
        super::ServerFactory { layout: as_storage_redis::KeyLayout::Compat },
        skipped = []
    );
}

mod cluster_layout {
    as_storage::storage_conformance_tests!(
        super::ServerFactory { layout: as_storage_redis::KeyLayout::Cluster },
        skipped = []
    );
}

/// One shared cluster; each build gets its own random key prefix.
struct ClusterFactory {
    url: String,
}

impl StorageFactory for ClusterFactory {
    type Guard = String;

    async fn build(&self, options: &BuildOptions) -> Result<(String, SharedStorage), StorageError> {
        let prefix = format!("t{}:", uuid::Uuid::new_v4().simple());
        let s = open(&self.url, KeyLayout::Cluster, &prefix, options).await?;
        Ok((prefix, s))
    }

    async fn reopen(&self, prefix: &String) -> Result<Option<SharedStorage>, StorageError> {
        Ok(Some(open(&self.url, KeyLayout::Cluster, prefix, &BuildOptions::default()).await?))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_suite_on_a_real_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    let report = as_storage::conformance::run_all(&ClusterFactory { url: cluster.url() }).await;
    println!("{report}");
    assert!(report.is_success(), "{report}");
    // Only the fault sweep skips: this factory has no fault hook (StorageFactory::build_faulty) yet.
    let skipped: Vec<&str> = report.skipped().map(|(n, _)| n).collect();
    assert_eq!(skipped, ["save_turn_failure_at_any_write_leaves_nothing"], "skipped on the cluster:\n{report}");
}
