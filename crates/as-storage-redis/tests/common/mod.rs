//! Helpers shared by the Redis test binaries.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod fault_proxy;

use std::time::Duration;

use as_storage::{Owner, SessionConfig, StorageBase, UpsertSession};
use as_storage_redis::{KeyLayout, RedisStorage, RedisStorageConfig, TtlPolicy};
use fred::prelude::{Builder, Client, ClientLike, Config};

/// A raw fred client for inspecting and planting keys.
pub async fn raw(url: &str) -> Client {
    let client = Builder::from_config(Config::from_url(url).unwrap()).build().unwrap();
    client.init().await.unwrap();
    client
}

/// An open store on `url`.
pub async fn store(url: &str, layout: KeyLayout, ttl: TtlPolicy) -> RedisStorage {
    let cfg = RedisStorageConfig::from_url(url)
        .unwrap()
        .with_layout(layout)
        .with_ttl_policy(ttl)
        .with_timeout(Duration::from_secs(2));
    let s = RedisStorage::new(cfg).unwrap();
    s.open().await.unwrap();
    s
}

pub fn owner() -> Owner {
    Owner::new("user-1", "agent-1")
}

pub fn req(owner: &Owner) -> UpsertSession {
    UpsertSession::new(owner.clone(), SessionConfig::new("ws-1").with_name("test"))
}

/// The rich golden AgentState (every block type, big ints, unicode).
pub fn rich_state() -> as_state::AgentState {
    as_message::from_json(include_str!("../../../../tests/fixtures/agentscope-2.0.4/rich_agent_state.compact.json"))
        .unwrap()
}

/// A state whose context holds `n` messages of about 500 bytes each.
pub fn state_with(n: usize) -> as_state::AgentState {
    let mut s = as_state::AgentState::default();
    for i in 0..n {
        let text = format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(17));
        s.context.push(as_message::Msg::user("user", text));
    }
    s
}

/// Every key in the (single-server) database.
pub async fn all_keys(client: &Client) -> Vec<String> {
    let mut keys: Vec<String> = client.custom(fred::cmd!("KEYS"), vec!["*"]).await.unwrap();
    keys.sort();
    keys
}
