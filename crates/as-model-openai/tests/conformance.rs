//! `as_model::conformance` scenarios against `OpenAiCompatibleModel` and the local mock server.
// Test helpers outside #[test] fns are not covered by clippy.toml's allow-*-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use as_model::conformance::{self, ConformanceHarness, Scripted};
use as_model::{ModelErrorKind, RetryPolicy, SharedChatModel};
use as_model_openai::test_server::{MockReply, MockServer, SseStep, chunk};
use as_model_openai::{ApiKey, OpenAiCompatibleConfig, OpenAiCompatibleModel, Preset};
use async_trait::async_trait;

struct Harness {
    server: MockServer,
}

#[async_trait]
impl ConformanceHarness for Harness {
    async fn model(&self, turns: Vec<Scripted>) -> SharedChatModel {
        for t in turns {
            self.server.push(match t {
                Scripted::Text(pieces, (i, o)) => {
                    let mut c: Vec<_> = pieces.iter().map(|p| chunk::text(p)).collect();
                    c.push(chunk::finish("stop"));
                    c.push(chunk::usage(i, o));
                    MockReply::sse(c)
                }
                Scripted::ThinkingThenText(th, te) => {
                    MockReply::sse([chunk::reasoning(&th), chunk::text(&te), chunk::finish("stop")])
                }
                Scripted::ToolCalls(calls) => {
                    let mut c = vec![];
                    for (index, (id, name, frags)) in calls.iter().enumerate() {
                        for (k, f) in frags.iter().enumerate() {
                            let first = k == 0;
                            c.push(chunk::tool_call(
                                index as u32,
                                first.then_some(id.as_str()),
                                first.then_some(name.as_str()),
                                f,
                            ));
                        }
                    }
                    c.push(chunk::finish("tool_calls"));
                    MockReply::sse(c)
                }
                Scripted::Fail(ModelErrorKind::Auth) => MockReply::error(401, "bad key", Some("invalid_api_key")),
                Scripted::Fail(_) => MockReply::error(429, "slow down", None).with_header("retry-after", "1"),
                Scripted::TextThenHang(t) => {
                    MockReply::sse_steps([SseStep::Data(chunk::text(&t).to_string()), SseStep::Hang])
                }
            });
        }
        let cfg = OpenAiCompatibleConfig::preset(Preset::OpenAi, "conformance")
            .with_base_url(self.server.base_url())
            .with_api_key(ApiKey::new("sk-conformance"))
            .with_retry(RetryPolicy::none())
            .with_timeouts(Duration::from_secs(2), Duration::from_secs(5), Duration::from_secs(5));
        Arc::new(OpenAiCompatibleModel::new(cfg).unwrap())
    }
}

async fn harness() -> Harness {
    Harness { server: MockServer::start().await.unwrap() }
}

macro_rules! scenario {
    ($($name:ident),*) => {$(
        #[tokio::test]
        async fn $name() {
            let h = harness().await;
            conformance::$name(&h).await.unwrap();
        }
    )*};
}

scenario!(text_streaming, thinking, tool_calls, cancel_mid_stream, error_kinds, structured_output);
