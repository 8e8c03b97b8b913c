//! AgentState serialize and parse at 10, 100 and 1000 messages shaped like a real conversation.
//!
//! Reference (AgentScope Python 2.0.4, pydantic 2.14): 1000 messages (~500 KB) dump 1.4 ms, parse 9.4 ms.
//! `parse` is [`as_state::state_from_json`] (the fast canonical reader, what storage backends use);
//! `parse_serde` is the generic `as_message::from_json::<AgentState>` (serde) path.
//! Run with `cargo bench -p as-state`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use as_state::AgentState;
use as_state::test_utils::conversation_state;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn bench_state(c: &mut Criterion) {
    for n in [10usize, 100, 1000] {
        let state = conversation_state(n);
        let json = as_message::to_json(&state);
        let mut group = c.benchmark_group("agent_state");
        group.throughput(Throughput::Bytes(json.len() as u64));
        group.bench_with_input(BenchmarkId::new("serialize", n), &state, |b, s| {
            b.iter(|| black_box(as_message::to_json(black_box(s))))
        });
        group.bench_with_input(BenchmarkId::new("parse", n), &json, |b, j| {
            b.iter(|| black_box(as_state::state_from_json(black_box(j)).unwrap()))
        });
        group.bench_with_input(BenchmarkId::new("parse_serde", n), &json, |b, j| {
            b.iter(|| black_box(as_message::from_json::<AgentState>(black_box(j)).unwrap()))
        });
        group.finish();
    }
}

criterion_group!(benches, bench_state);
criterion_main!(benches);
