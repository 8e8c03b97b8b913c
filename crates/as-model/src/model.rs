//! The [`ChatModel`] trait.

use std::fmt;
use std::sync::Arc;

use as_message::{ContentBlock, JsonMap, Msg, Role, TextBlock};
use async_trait::async_trait;
use serde_json::Value;

use crate::error::{ModelError, ModelErrorKind, Result};
use crate::request::{ChatRequest, StructuredOutputRequest, ToolChoice, ToolSchema};
use crate::response::StructuredResponse;
use crate::stream::ChatStream;
use crate::tokens::{HeuristicTokenCounter, TokenCounter};

/// The name of the tool forced by [`ChatModel::generate_structured_output`] (2.0.4's).
pub const STRUCTURED_OUTPUT_TOOL: &str = "generate_structured_output";

/// The reminder appended to the last user message by [`ChatModel::generate_structured_output`]
/// (2.0.4's, verbatim).
pub const STRUCTURED_OUTPUT_REMINDER: &str = "<system-reminder>Now you **MUST** call the tool named \
     'generate_structured_output' to generate the structured output required by the user. DON'T do anything \
     else.</system-reminder>";

/// The description of the tool [`ChatModel::generate_structured_output`] forces (2.0.4's, verbatim).
pub const STRUCTURED_OUTPUT_TOOL_DESCRIPTION: &str =
    "Call this function to generate structured output required by the user.";

/// A chat model: what the agent reasons through.
///
/// # Contract
/// * [`ChatModel::stream`] is the one required call. It returns once the provider accepted the request; the
///   [`ChatStream`] then yields delta chunks and accumulates the response. Providers configured not to stream
///   return [`ChatStream::from_response`], so callers have one code path.
/// * Cancellation uses [`ChatRequest::cancel`]: cancelled before the stream starts, `stream` returns
///   `Ok(ChatStream::interrupted())` (an empty interrupted response, not an error); cancelled mid-stream, the
///   stream ends and its response is marked [`crate::FinishReason::Interrupted`]. An interrupted response's tool
///   calls are partial and must not be executed ([`crate::ChatResponse::executable_tool_calls`] is empty).
/// * Errors are [`ModelError`]s whose kind says whether a retry may help. Provider-level retries (see
///   [`crate::RetryPolicy`]) happen before the first chunk, by the provider's rule: the OpenAI-compatible
///   provider retries an HTTP error answer by its status as 2.0.4 does, whatever the error's kind (a 429
///   `insufficient_quota` is retried though not [`ModelError::is_retryable`]). Once chunks were streamed an
///   error is yielded by the stream.
/// * No credential ever appears in `Debug` output, logs or errors.
#[async_trait]
pub trait ChatModel: Send + Sync + fmt::Debug {
    /// The model name (`ModelCallStartEvent.model_name`).
    fn model_name(&self) -> &str;

    /// The provider name (`"openai"`, `"dashscope"`, `"scripted"`, ...).
    fn provider(&self) -> &'static str;

    /// The context window in tokens (used by compression).
    fn context_size(&self) -> usize {
        32768
    }

    /// Starts a call and streams it.
    async fn stream(&self, request: ChatRequest) -> Result<ChatStream>;

    /// A whole response: [`ChatModel::stream`] read to its end (interrupted if the token fired).
    async fn call(&self, request: ChatRequest) -> Result<ChatResponse> {
        self.stream(request).await?.collect().await
    }

    /// The token count of an input (default: the 2.0.4 heuristic, [`HeuristicTokenCounter`]).
    fn count_tokens(&self, messages: &[Msg], tools: &[ToolSchema]) -> usize {
        HeuristicTokenCounter.count_tokens(messages, tools)
    }

    /// The token count of the concatenation of `parts` (compression counts the system prompt, summary and a
    /// suffix of the context many times). Must equal [`ChatModel::count_tokens`] of the concatenated messages.
    /// The default concatenates clones; a model that keeps the default [`ChatModel::count_tokens`] should
    /// override it with [`HeuristicTokenCounter::count_parts`], which copies nothing.
    fn count_tokens_of_parts(&self, parts: &[&[Msg]], tools: &[ToolSchema]) -> usize {
        let all: Vec<Msg> = parts.iter().flat_map(|p| p.iter().cloned()).collect();
        self.count_tokens(&all, tools)
    }

    /// Asks for an object matching `request.schema` (2.0.4's base `generate_structured_output`): forces the tool
    /// [`STRUCTURED_OUTPUT_TOOL`] with the schema as parameters, appends [`STRUCTURED_OUTPUT_REMINDER`] to the last
    /// user message (or adds a user message), parses the call's arguments (repairing almost-JSON) and validates
    /// them against the schema (2.0.4's `jsonschema.validate`). A missing, unparsable or invalid call, or one the
    /// provider cut short ([`ChatResponse::truncated_tool_call`]; 2.0.4 repairs and accepts it), is
    /// [`ModelErrorKind::InvalidResponse`]; an interrupted call is [`ModelErrorKind::Cancelled`]; a schema that
    /// is not a valid JSON Schema is [`ModelErrorKind::InvalidRequest`].
    async fn generate_structured_output(&self, request: StructuredOutputRequest) -> Result<StructuredResponse> {
        let chat = structured_output_request(&request);
        let response = self.call(chat).await?;
        parse_structured_output(self.provider(), &request.schema, &response)
    }
}

use crate::response::ChatResponse;

/// How models are held: `Arc<dyn ChatModel>`.
pub type SharedChatModel = Arc<dyn ChatModel>;

#[async_trait]
impl<T: ChatModel + ?Sized> ChatModel for Arc<T> {
    fn model_name(&self) -> &str {
        (**self).model_name()
    }
    fn provider(&self) -> &'static str {
        (**self).provider()
    }
    fn context_size(&self) -> usize {
        (**self).context_size()
    }
    async fn stream(&self, request: ChatRequest) -> Result<ChatStream> {
        (**self).stream(request).await
    }
    async fn call(&self, request: ChatRequest) -> Result<ChatResponse> {
        (**self).call(request).await
    }
    fn count_tokens(&self, messages: &[Msg], tools: &[ToolSchema]) -> usize {
        (**self).count_tokens(messages, tools)
    }
    fn count_tokens_of_parts(&self, parts: &[&[Msg]], tools: &[ToolSchema]) -> usize {
        (**self).count_tokens_of_parts(parts, tools)
    }
    async fn generate_structured_output(&self, request: StructuredOutputRequest) -> Result<StructuredResponse> {
        (**self).generate_structured_output(request).await
    }
}

/// The chat request [`ChatModel::generate_structured_output`] sends (public so providers overriding it can reuse
/// it and change the tool choice).
pub fn structured_output_request(request: &StructuredOutputRequest) -> ChatRequest {
    let mut messages = request.messages.clone();
    match messages.last_mut() {
        Some(last) if last.role == Role::User => {
            last.content.push(ContentBlock::Text(TextBlock::new(STRUCTURED_OUTPUT_REMINDER)));
        }
        _ => messages.push(Msg::user("user", STRUCTURED_OUTPUT_REMINDER)),
    }
    let tool = ToolSchema::new(STRUCTURED_OUTPUT_TOOL, STRUCTURED_OUTPUT_TOOL_DESCRIPTION, request.schema.clone());
    ChatRequest::new(messages)
        .with_tools(vec![tool])
        .with_tool_choice(ToolChoice::tool(STRUCTURED_OUTPUT_TOOL))
        .with_cancel(request.cancel.clone())
}

/// Extracts the structured object from a response to [`structured_output_request`] and validates it against
/// `schema` (see [`ChatModel::generate_structured_output`] for the errors).
pub fn parse_structured_output(
    provider: &'static str,
    schema: &Value,
    response: &ChatResponse,
) -> Result<StructuredResponse> {
    if response.is_interrupted() {
        return Err(ModelError::new(ModelErrorKind::Cancelled, provider, "structured output call was interrupted"));
    }
    let call = response.tool_calls().find(|c| c.name == STRUCTURED_OUTPUT_TOOL).ok_or_else(|| {
        ModelError::new(ModelErrorKind::InvalidResponse, provider, "the model did not call generate_structured_output")
    })?;
    // 2.0.4 ignores the finish reason and repairs a call cut by `max_tokens` into an answer; a cut
    // summary would then replace the history it summarizes.
    if response.truncated_tool_call().is_some_and(|cut| std::ptr::eq(cut, call)) {
        return Err(ModelError::new(
            ModelErrorKind::InvalidResponse,
            provider,
            format!("the provider cut the structured output call short (finish reason {:?})", response.finish_reason),
        ));
    }
    let input = if call.input.trim().is_empty() { "{}" } else { call.input.as_str() };
    // As 2.0.4's `_json_loads_with_repair`: strict first, then a repair of almost-JSON (a trailing
    // comma, a code fence, a truncated end); the strict error is the one reported.
    let content: JsonMap = match as_message::free_form::from_str(input) {
        Ok(map) => map,
        Err(e) => match as_message::repair_json(input) {
            Some(Value::Object(map)) => map,
            _ => {
                return Err(ModelError::new(
                    ModelErrorKind::InvalidResponse,
                    provider,
                    format!("structured output is not a JSON object: {}", e.message()),
                ));
            }
        },
    };
    validate_structured_output(provider, schema, &content)?;
    Ok(StructuredResponse::new(content, response.id.clone(), response.usage.clone(), response.finish_reason.clone()))
}

/// The longest validation message kept (it quotes the offending value, which may be long).
const MAX_VALIDATION_MESSAGE: usize = 500;

/// Validates the structured object against its schema, as 2.0.4's `jsonschema.validate` does (the
/// draft named by `$schema`, else 2020-12; `format` is not checked). A mismatch is
/// [`ModelErrorKind::InvalidResponse`] naming the path of the first error; a schema that is not a
/// valid JSON Schema is [`ModelErrorKind::InvalidRequest`] (2.0.4's `SchemaError`).
fn validate_structured_output(provider: &'static str, schema: &Value, content: &JsonMap) -> Result<()> {
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        ModelError::new(ModelErrorKind::InvalidRequest, provider, format!("invalid structured output schema: {e}"))
    })?;
    let instance = Value::Object(content.clone());
    if let Err(e) = validator.validate(&instance) {
        let path = e.instance_path().to_string();
        let at = if path.is_empty() { "the root".to_owned() } else { path };
        let mut why = e.to_string();
        if let Some((cut, _)) = why.char_indices().nth(MAX_VALIDATION_MESSAGE) {
            why.truncate(cut);
            why.push('…');
        }
        return Err(ModelError::new(
            ModelErrorKind::InvalidResponse,
            provider,
            format!("structured output does not match its schema at {at}: {why}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use as_message::ToolCallBlock;
    use serde_json::json;

    use super::*;
    use crate::FinishReason;

    fn answer(input: &str) -> ChatResponse {
        ChatResponse::new(vec![ContentBlock::ToolCall(ToolCallBlock::new("c1", STRUCTURED_OUTPUT_TOOL, input))])
    }

    /// A structured-output call the provider cut off (`max_tokens` reached, or filtered) is not
    /// repaired into an answer: compression would keep a cut summary and drop the history.
    #[test]
    fn a_truncated_structured_output_call_is_invalid() {
        let schema = json!({"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]});
        for reason in [FinishReason::Length, FinishReason::ContentFilter] {
            let cut = answer(r#"{"summary": "cut mid"#).with_finish_reason(reason.clone());
            let e = parse_structured_output("t", &schema, &cut).unwrap_err();
            assert_eq!(e.kind(), ModelErrorKind::InvalidResponse, "{reason:?}: {e}");
            // The call is whole when something came after it.
            let mut whole = answer(r#"{"summary": "done"}"#).with_finish_reason(reason.clone());
            whole.content.push(ContentBlock::Text(TextBlock::new("and then")));
            assert_eq!(parse_structured_output("t", &schema, &whole).unwrap().content["summary"], "done");
        }
    }

    /// The object is validated against the whole schema, as 2.0.4's `jsonschema.validate`: a
    /// mismatch is an `InvalidResponse` naming where it is.
    #[test]
    fn structured_output_is_validated_against_its_schema() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let e = parse_structured_output("t", &schema, &answer(r#"{"n": "many"}"#)).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::InvalidResponse, "{e}");
        assert!(e.message().contains("/n"), "{e}");
        assert_eq!(parse_structured_output("t", &schema, &answer(r#"{"n": 3}"#)).unwrap().content["n"], json!(3));
        let e = parse_structured_output("t", &schema, &answer("{}")).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::InvalidResponse, "{e}");
        assert!(e.message().contains("\"n\""), "{e}");
        // Deeper: the path names the item.
        let schema = json!({
            "type": "object",
            "properties": {"steps": {"type": "array", "items": {"type": "string", "maxLength": 3}}},
        });
        let e = parse_structured_output("t", &schema, &answer(r#"{"steps": ["ok", "too long"]}"#)).unwrap_err();
        assert!(e.message().contains("/steps/1"), "{e}");
        // A schema that is no JSON Schema is the request's fault (2.0.4: `SchemaError`).
        let e = parse_structured_output("t", &json!({"type": "nonsense"}), &answer("{}")).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::InvalidRequest, "{e}");
        // A repaired answer is validated too.
        let schema = json!({"type": "object", "properties": {"summary": {"type": "string"}}});
        let e = parse_structured_output("t", &schema, &answer(r#"{"summary": 7,}"#)).unwrap_err();
        assert_eq!(e.kind(), ModelErrorKind::InvalidResponse, "{e}");
    }

    /// What the model wrote as the structured-output call's arguments, and the object read from
    /// it (`None`: an `InvalidResponse`). 2.0.4 (`_json_loads_with_repair`) reads every repaired case.
    #[test]
    fn structured_output_is_read_strictly_then_repaired() {
        let schema = json!({"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]});
        for (input, want) in [
            (r#"{"summary": "x"}"#, Some(json!({"summary": "x"}))),
            ("", None), // `{}` misses the required key
            (r#"{"summary": "x",}"#, Some(json!({"summary": "x"}))),
            ("```json\n{\"summary\": \"x\"}\n```", Some(json!({"summary": "x"}))),
            (r#"{"summary": "cut mid"#, Some(json!({"summary": "cut mid"}))),
            (r#"{"summary": 1}"#, None), // not a string (jsonschema.validate)
            ("[1, 2]", None),
            ("no json here", None),
        ] {
            let got = parse_structured_output("t", &schema, &answer(input));
            match want {
                Some(Value::Object(want)) => assert_eq!(got.unwrap().content, want, "{input}"),
                _ => assert_eq!(got.unwrap_err().kind(), ModelErrorKind::InvalidResponse, "{input}"),
            }
        }
        // Read as json.loads reads it: an object, not serde_json's private number form.
        let any = json!({"type": "object", "required": ["summary"]});
        let input = r#"{"summary": {"$serde_json::private::Number": "1"}}"#;
        let got = parse_structured_output("t", &any, &answer(input)).unwrap();
        assert_eq!(got.content["summary"], json!({"$serde_json::private::Number": "1"}));
    }
}
