//! Provider overhead per streamed chunk.
//!
//! * `parse_accumulate/*`: SSE parsing + chunk JSON parsing + accumulation into a `ChatResponse`, no I/O.
//! * `local_server/provider`: a whole streamed call through `OpenAiCompatibleModel` against the local mock server.
//! * `local_server/raw_bytes`: the same HTTP response read with plain reqwest and thrown away (the I/O baseline).
//!
//! Per-chunk overhead = (provider − raw_bytes) / chunks. Run: `cargo bench -p as-model-openai`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use as_message::Msg;
use as_model::{ChatModel, ChatRequest, ChatResponse, RetryPolicy};
use as_model_openai::test_server::{MockReply, MockServer, SseStep, chunk};
use as_model_openai::{
    ApiKey, OpenAiCompatibleConfig, OpenAiCompatibleModel, Preset, ReasoningField, SseParser, StreamState,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;

const CHUNKS: usize = 1000;

/// A realistic mix: thinking, text, then two parallel tool calls whose arguments stream in small fragments.
fn chunk_values() -> Vec<serde_json::Value> {
    let mut v = Vec::with_capacity(CHUNKS + 2);
    for i in 0..CHUNKS {
        v.push(match i % 4 {
            0 => chunk::reasoning("thinking about it "),
            1 => chunk::text("some streamed words "),
            2 => chunk::tool_call(0, (i == 2).then_some("call_a"), (i == 2).then_some("get_weather"), r#"{"ci"#),
            _ => chunk::tool_call(1, (i == 3).then_some("call_b"), (i == 3).then_some("get_weather"), r#"ty": "#),
        });
    }
    v.push(chunk::finish("tool_calls"));
    v.push(chunk::usage(1000, CHUNKS as u64));
    v
}

fn sse_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunk_values() {
        out.extend_from_slice(format!("data: {c}\n\n").as_bytes());
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

fn parse_accumulate(c: &mut Criterion) {
    let bytes = sse_bytes();
    let mut g = c.benchmark_group("parse_accumulate");
    g.throughput(Throughput::Elements(CHUNKS as u64));
    // Network-like reads of 1400 bytes.
    g.bench_function("1000_chunks", |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            let mut state = StreamState::new("bench", ReasoningField::ContentOrReasoning);
            let mut response = ChatResponse::new(Vec::new());
            let mut events = Vec::new();
            for piece in bytes.chunks(1400) {
                events.clear();
                parser.feed(piece, &mut events).unwrap();
                for e in &events {
                    if e == "[DONE]" {
                        continue;
                    }
                    let chunk = state.parse_event(e).unwrap();
                    response.apply(&chunk);
                }
            }
            black_box(response)
        });
    });
    // The same without accumulation: what the SSE + JSON parsing alone costs.
    g.bench_function("1000_chunks_parse_only", |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            let mut state = StreamState::new("bench", ReasoningField::ContentOrReasoning);
            let mut events = Vec::new();
            let mut n = 0usize;
            for piece in bytes.chunks(1400) {
                events.clear();
                parser.feed(piece, &mut events).unwrap();
                for e in &events {
                    if e != "[DONE]" {
                        n += state.parse_event(e).unwrap().content.len();
                    }
                }
            }
            black_box(n)
        });
    });
    g.finish();
}

fn local_server(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = rt.block_on(MockServer::start()).unwrap();
    let steps: Vec<SseStep> = {
        let mut s: Vec<SseStep> = chunk_values().into_iter().map(|v| SseStep::Data(v.to_string())).collect();
        s.push(SseStep::Data("[DONE]".into()));
        s
    };
    let cfg = OpenAiCompatibleConfig::preset(Preset::OpenAi, "bench")
        .with_base_url(server.base_url())
        .with_api_key(ApiKey::new("sk-bench"))
        .with_retry(RetryPolicy::none());
    let model = OpenAiCompatibleModel::new(cfg).unwrap();
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.base_url());

    let mut g = c.benchmark_group("local_server");
    g.throughput(Throughput::Elements(CHUNKS as u64));
    g.sample_size(30);
    g.bench_function("provider", |b| {
        b.iter(|| {
            server.push(MockReply::sse_steps(steps.clone()));
            rt.block_on(async {
                let r = model.call(ChatRequest::new(vec![Msg::user("user", "hi")])).await.unwrap();
                assert_eq!(r.tool_calls().count(), 2);
                black_box(r)
            })
        });
    });
    g.bench_function("raw_bytes", |b| {
        b.iter(|| {
            server.push(MockReply::sse_steps(steps.clone()));
            rt.block_on(async {
                let resp = client.post(&url).body("{}").send().await.unwrap();
                let mut s = resp.bytes_stream();
                let mut n = 0usize;
                while let Some(b) = s.next().await {
                    n += b.unwrap().len();
                }
                black_box(n)
            })
        });
    });
    g.finish();
}

criterion_group!(benches, parse_accumulate, local_server);
criterion_main!(benches);
