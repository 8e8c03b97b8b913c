//! Provider conformance scenarios (feature `test-utils`; not covered by semver).
//!
//! A provider crate implements [`ConformanceHarness`] (a model that answers neutral [`Scripted`] turns, e.g. by
//! queueing replies on a local mock server) and runs [`run_all`] or the scenarios one by one. Each scenario checks
//! one clause of the [`crate::ChatModel`] contract and returns a [`ConformanceError`] naming it on failure.

use async_trait::async_trait;
use futures::StreamExt as _;

use crate::{
    ChatRequest, FinishReason, ModelErrorKind, SharedChatModel, StreamStatus, StructuredOutputRequest, ToolSchema,
};
use as_message::Msg;

/// A provider-neutral scripted turn.
#[derive(Clone, Debug, PartialEq)]
pub enum Scripted {
    /// Text streamed in these pieces, then a normal stop, usage `(input, output)`.
    Text(Vec<String>, (u64, u64)),
    /// Thinking, then text (one piece each).
    ThinkingThenText(String, String),
    /// Parallel tool calls: `(id, name, argument fragments)`.
    ToolCalls(Vec<(String, String, Vec<String>)>),
    /// The call fails with this kind (`Auth` or `RateLimited`).
    Fail(ModelErrorKind),
    /// This text, then the stream stays open until cancelled.
    TextThenHang(String),
}

/// What a provider crate provides to run the scenarios.
#[async_trait]
pub trait ConformanceHarness: Send + Sync {
    /// A model (without provider-level retries) whose next calls answer `turns` in order.
    async fn model(&self, turns: Vec<Scripted>) -> SharedChatModel;
}

/// A failed scenario.
#[derive(Debug, thiserror::Error)]
#[error("conformance scenario {scenario} failed: {details}")]
pub struct ConformanceError {
    /// The scenario.
    pub scenario: &'static str,
    /// What went wrong.
    pub details: String,
}

fn fail(scenario: &'static str, details: impl Into<String>) -> ConformanceError {
    ConformanceError { scenario, details: details.into() }
}

macro_rules! ensure {
    ($scenario:expr, $cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(fail($scenario, format!($($fmt)*)));
        }
    };
}

fn hi() -> ChatRequest {
    ChatRequest::new(vec![Msg::user("user", "hi")])
}

/// Streamed text accumulates in one block, completes with `Stop` and reports usage; a partial read is never complete.
pub async fn text_streaming(h: &dyn ConformanceHarness) -> Result<(), ConformanceError> {
    const S: &str = "text_streaming";
    let m = h.model(vec![Scripted::Text(vec!["Hel".into(), "lo".into()], (7, 2))]).await;
    let mut s = m.stream(hi()).await.map_err(|e| fail(S, e.to_string()))?;
    let mut n = 0;
    while let Some(c) = s.next().await {
        c.map_err(|e| fail(S, e.to_string()))?;
        n += 1;
        ensure!(S, s.response().is_interrupted(), "the response read as complete before the stream ended");
    }
    let r = s.response();
    ensure!(S, n == 2, "expected 2 delta chunks, got {n}");
    ensure!(S, r.text() == "Hello" && r.content.len() == 1, "content {:?}", r.content);
    ensure!(S, r.finish_reason == FinishReason::Stop, "finish reason {:?}", r.finish_reason);
    let usage = r.usage.as_ref().map(|u| (u.input_tokens, u.output_tokens));
    ensure!(S, usage == Some((7, 2)), "usage {usage:?}");
    Ok(())
}

/// Thinking comes before text, as a thinking block.
pub async fn thinking(h: &dyn ConformanceHarness) -> Result<(), ConformanceError> {
    const S: &str = "thinking";
    let m = h.model(vec![Scripted::ThinkingThenText("Hm.".into(), "Yes.".into())]).await;
    let r = m.call(hi()).await.map_err(|e| fail(S, e.to_string()))?;
    ensure!(S, r.thinking() == "Hm." && r.text() == "Yes.", "content {:?}", r.content);
    ensure!(S, matches!(r.content.first(), Some(as_message::ContentBlock::Thinking(_))), "thinking not first");
    Ok(())
}

/// Parallel tool calls with fragmented arguments come out whole, in order, executable.
pub async fn tool_calls(h: &dyn ConformanceHarness) -> Result<(), ConformanceError> {
    const S: &str = "tool_calls";
    let calls = vec![
        ("call_a".to_owned(), "get_weather".to_owned(), vec![r#"{"ci"#.to_owned(), r#"ty": "Paris"}"#.to_owned()]),
        ("call_b".to_owned(), "get_weather".to_owned(), vec![r#"{"city": "#.to_owned(), r#""Oslo"}"#.to_owned()]),
    ];
    let m = h.model(vec![Scripted::ToolCalls(calls)]).await;
    let tool = ToolSchema::new("get_weather", "Weather.", serde_json::json!({"type": "object"}));
    let r = m.call(hi().with_tools(vec![tool])).await.map_err(|e| fail(S, e.to_string()))?;
    let got: Vec<(String, String)> =
        r.executable_tool_calls().iter().map(|c| (c.id.clone(), c.input.clone())).collect();
    let want = vec![
        ("call_a".to_owned(), r#"{"city": "Paris"}"#.to_owned()),
        ("call_b".to_owned(), r#"{"city": "Oslo"}"#.to_owned()),
    ];
    ensure!(S, got == want, "tool calls {got:?}");
    ensure!(S, r.finish_reason == FinishReason::ToolCalls, "finish reason {:?}", r.finish_reason);
    Ok(())
}

/// Cancelling mid-stream ends the stream and leaves the partial response interrupted.
pub async fn cancel_mid_stream(h: &dyn ConformanceHarness) -> Result<(), ConformanceError> {
    const S: &str = "cancel_mid_stream";
    let m = h.model(vec![Scripted::TextThenHang("partial".into())]).await;
    let token = crate::CancellationToken::new();
    let mut s = m.stream(hi().with_cancel(token.clone())).await.map_err(|e| fail(S, e.to_string()))?;
    let first = s.next().await;
    ensure!(S, matches!(first, Some(Ok(_))), "no first chunk: {first:?}");
    token.cancel();
    ensure!(S, s.next().await.is_none(), "the stream went on after cancellation");
    ensure!(S, s.status() == StreamStatus::Interrupted, "status {:?}", s.status());
    let r = s.response();
    ensure!(S, r.is_interrupted() && r.text() == "partial", "response {r:?}");
    Ok(())
}

/// Errors keep their kind (auth is not retryable; rate limits are).
pub async fn error_kinds(h: &dyn ConformanceHarness) -> Result<(), ConformanceError> {
    const S: &str = "error_kinds";
    let m = h
        .model(vec![
            Scripted::Fail(ModelErrorKind::Auth),
            Scripted::Fail(ModelErrorKind::RateLimited { retry_after: None }),
        ])
        .await;
    let e = match m.call(hi()).await {
        Ok(r) => return Err(fail(S, format!("expected an auth error, got {r:?}"))),
        Err(e) => e,
    };
    ensure!(S, e.kind() == ModelErrorKind::Auth && !e.is_retryable(), "got {e}");
    let e = match m.call(hi()).await {
        Ok(r) => return Err(fail(S, format!("expected a rate limit, got {r:?}"))),
        Err(e) => e,
    };
    ensure!(S, matches!(e.kind(), ModelErrorKind::RateLimited { .. }) && e.is_retryable(), "got {e}");
    Ok(())
}

/// Structured output parses the forced tool call.
pub async fn structured_output(h: &dyn ConformanceHarness) -> Result<(), ConformanceError> {
    const S: &str = "structured_output";
    let call = (
        "call_s".to_owned(),
        crate::STRUCTURED_OUTPUT_TOOL.to_owned(),
        vec![r#"{"answer": "#.to_owned(), "42}".to_owned()],
    );
    let m = h.model(vec![Scripted::ToolCalls(vec![call])]).await;
    let schema = serde_json::json!({"type": "object", "required": ["answer"]});
    let r = m
        .generate_structured_output(StructuredOutputRequest::new(vec![Msg::user("user", "?")], schema))
        .await
        .map_err(|e| fail(S, e.to_string()))?;
    ensure!(S, r.content.get("answer").and_then(serde_json::Value::as_u64) == Some(42), "content {:?}", r.content);
    Ok(())
}

/// Every scenario, by name.
pub async fn run_all(h: &dyn ConformanceHarness) -> Vec<(&'static str, Result<(), ConformanceError>)> {
    vec![
        ("text_streaming", text_streaming(h).await),
        ("thinking", thinking(h).await),
        ("tool_calls", tool_calls(h).await),
        ("cancel_mid_stream", cancel_mid_stream(h).await),
        ("error_kinds", error_kinds(h).await),
        ("structured_output", structured_output(h).await),
    ]
}

/// The harness for [`crate::ScriptedModel`].
#[derive(Debug, Default)]
pub struct ScriptedHarness;

#[async_trait]
impl ConformanceHarness for ScriptedHarness {
    async fn model(&self, turns: Vec<Scripted>) -> SharedChatModel {
        use crate::{ModelError, ScriptedModel, ScriptedTurn};
        let turns = turns.into_iter().map(|t| match t {
            Scripted::Text(pieces, (i, o)) => ScriptedTurn::new().text_chunks(pieces).usage(i, o),
            Scripted::ThinkingThenText(th, te) => ScriptedTurn::new().thinking(th).text(te),
            Scripted::ToolCalls(calls) => {
                calls.into_iter().fold(ScriptedTurn::new(), |t, (id, name, frags)| t.tool_call_chunks(id, name, frags))
            }
            Scripted::Fail(kind) => ScriptedTurn::error(ModelError::new(kind, "scripted", "scripted failure")),
            Scripted::TextThenHang(text) => ScriptedTurn::new().text(text).pause(),
        });
        std::sync::Arc::new(ScriptedModel::new("scripted", turns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scripted_model_conforms() {
        for (name, r) in run_all(&ScriptedHarness).await {
            assert!(r.is_ok(), "{name}: {r:?}");
        }
    }
}
