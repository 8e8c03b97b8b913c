//! Reliability, cancellation: `as_agent::testkit::interrupt_at_every_await_point` (a reply with sequential and
//! concurrent tool calls, stopped after each of its events by drop and by cancellation, then resumed in a fresh
//! agent from the stored state) on memory, SQLite and Redis; the history is checked valid at every point and the
//! number of points tried is reported.

// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod reliability;

use std::sync::Arc;

use as_agent::testkit::{StopBy, interrupt_at_every_await_point};
use as_storage::SharedStorage;
use as_storage_redis::testing::RedisServer;
use reliability::figure;

async fn every_point(backend: &str, storage: SharedStorage) {
    let (mut total, mut failed) = (0, Vec::new());
    for (stop, name) in [(StopBy::Drop, "drop"), (StopBy::Cancel, "cancel")] {
        // The helper checks the history at every point and stops at the first invalid one (an `Err`, counted
        // here as a failed run); `n` counts the points it checked valid.
        match interrupt_at_every_await_point(Arc::clone(&storage), stop).await {
            Ok(n) => {
                figure(&format!("cancellation.{backend}.{name}.points"), n);
                // The multi-tool reply has well over 25 events; fewer means the scenario stopped early.
                assert!(n > 25, "{backend}/{name}: only {n} points");
                total += n;
            }
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    figure(&format!("cancellation.{backend}.points"), total);
    figure(&format!("cancellation.{backend}.failed_runs"), failed.len());
    assert!(failed.is_empty(), "{backend}: {failed:?}");
}

#[tokio::test]
async fn every_await_point_memory() {
    every_point("memory", reliability::memory().await).await;
}

#[tokio::test]
async fn every_await_point_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    every_point("sqlite", reliability::sqlite(&dir.path().join("s.db")).await).await;
}

#[tokio::test]
async fn every_await_point_redis() {
    let Some(server) = RedisServer::start() else { return };
    every_point("redis", reliability::redis(&server.url()).await).await;
}
