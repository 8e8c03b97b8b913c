//! A full chat turn through `as_agent::SessionRunner` (load, reply with a constant model, conditional state
//! write, two message-log writes) on each durable store: SQLite (a temp file, WAL) and Redis (a private
//! `redis-server`, skipped when not installed). The in-memory figure is in `crates/as-agent/benches`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench harness code

use std::hint::black_box;
use std::sync::Arc;

use as_agent::testkit::RunnerTurnBench;
use as_storage::SharedStorage;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

fn bench_store(c: &mut Criterion, name: &str, rt: &tokio::runtime::Runtime, storage: SharedStorage) {
    let fixture = RunnerTurnBench::new(storage).unwrap();
    c.bench_function(&format!("session_runner/turn_{name}_20_msgs"), |b| {
        b.iter_batched(
            || rt.block_on(fixture.reset()).unwrap(),
            |()| black_box(rt.block_on(fixture.turn()).unwrap()),
            BatchSize::SmallInput,
        );
    });
}

fn turns(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite: SharedStorage = Arc::new(as_storage_sqlite::SqliteStorage::new(dir.path().join("bench.db")));
    rt.block_on(sqlite.open()).unwrap();
    bench_store(c, "sqlite", &rt, sqlite);
    if let Some(server) = as_storage_redis::testing::RedisServer::start() {
        let config = as_storage_redis::RedisStorageConfig::from_url(&server.url()).unwrap();
        let redis: SharedStorage = Arc::new(as_storage_redis::RedisStorage::new(config).unwrap());
        rt.block_on(redis.open()).unwrap();
        bench_store(c, "redis", &rt, redis);
    }
}

criterion_group!(benches, turns);
criterion_main!(benches);
