//! One chat turn against `InMemoryStorage`: `get_session` + `update_session_state` (with CAS),
//! for sessions holding 10, 100 and 1000 messages of a realistic tool-using conversation.
//! The store keeps canonical JSON bytes, so this measures parse + serialize of the whole record,
//! which is what a turn costs against any backend before the network or disk.

// A benchmark aborts on a failed setup or turn: there is no caller to report to.
#![allow(clippy::expect_used)]

use std::sync::Arc;

use as_message::{ContentBlock, Msg, ThinkingBlock, ToolCallBlock, ToolResultBlock, ToolResultState, Usage};
use as_state::AgentState;
use as_storage::{InMemoryStorage, Owner, SessionConfig, SharedStorage, UpsertSession};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// `n` messages: user question, assistant thinking + tool call, tool result, final answer, repeated.
fn conversation(n: usize) -> AgentState {
    let mut st = AgentState::default();
    let mut i = 0;
    while st.context.len() < n {
        let m = match st.context.len() % 4 {
            0 => Msg::user(
                "user",
                format!(
                    "Can you look at src/module_{i}.rs and tell me why `parse_config` returns an error when the file has a trailing comma? I pasted the failing input below:\n{{\"name\": \"svc-{i}\", \"retries\": 3,}}"
                ),
            ),
            1 => {
                let mut m = Msg::new(
                    "Friday",
                    as_message::Role::Assistant,
                    vec![ContentBlock::Thinking(ThinkingBlock::new(format!(
                        "The user reports a parse failure in module_{i}; read the file before answering."
                    )))],
                );
                m.content.push(ContentBlock::ToolCall(ToolCallBlock::new(
                    format!("call_{i}"),
                    "Read",
                    format!(r#"{{"file_path":"src/module_{i}.rs","offset":1,"limit":200}}"#),
                )));
                m.usage = Some(Usage::default());
                m
            }
            2 => Msg::new(
                "Friday",
                as_message::Role::Assistant,
                vec![ContentBlock::ToolResult(ToolResultBlock::new(
                    format!("call_{i}"),
                    "Read",
                    as_message::TextOrBlocks::Text(
                        (1..=40)
                            .map(|l| {
                                format!("{l:>4}\tlet field_{l} = value.get(\"field_{l}\").ok_or(Error::Missing)?;\n")
                            })
                            .collect(),
                    ),
                    ToolResultState::Success,
                ))],
            ),
            _ => {
                i += 1;
                Msg::assistant(
                    "Friday",
                    "The parser uses `serde_json` in strict mode, which rejects trailing commas. Either strip them before parsing or switch to `json5` for configuration files; I would do the former, since the rest of the code expects strict JSON.",
                )
            }
        };
        st.context.push(m);
    }
    st
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("memory_turn");
    group.sample_size(30);
    for n in [10usize, 100, 1000] {
        let store: SharedStorage = Arc::new(InMemoryStorage::new());
        let owner = Owner::new("user-1", "agent-1");
        let (key, bytes) = rt.block_on(async {
            store.open().await.expect("open");
            let rec = store
                .upsert_session(UpsertSession::new(owner.clone(), SessionConfig::new("ws")).with_state(conversation(n)))
                .await
                .expect("create");
            (owner.session(rec.id.clone()), rec.to_canonical_json().len())
        });
        group.throughput(Throughput::Bytes(bytes as u64));
        let label = format!("{n} msgs ({} KiB)", bytes / 1024);
        group.bench_with_input(BenchmarkId::new("get+update_cas", &label), &n, |b, _| {
            b.to_async(&rt).iter(|| async {
                let rec = store.get_session(&key).await.expect("get").expect("exists");
                let rev = rec.revision();
                let mut state = rec.state;
                state.cur_iter += 1;
                store.update_session_state(&key, &state, Some(&rev)).await.expect("update")
            });
        });
        // Where the time goes: the read (parse) and the write (serialize) alone.
        group.bench_with_input(BenchmarkId::new("get", &label), &n, |b, _| {
            b.to_async(&rt).iter(|| async { store.get_session(&key).await.expect("get").expect("exists") });
        });
        let state = rt.block_on(store.get_session(&key)).expect("get").expect("exists").state;
        group.bench_with_input(BenchmarkId::new("update", &label), &n, |b, _| {
            b.to_async(&rt).iter(|| async { store.update_session_state(&key, &state, None).await.expect("update") });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
