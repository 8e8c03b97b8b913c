//! [`OpenAiCompatibleModel`]: the [`ChatModel`] for any OpenAI-compatible chat completions endpoint.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use as_message::{ContentBlock, JsonMap, Msg};
use as_model::{
    ChatChunk, ChatModel, ChatRequest, ChatStream, HeuristicTokenCounter, ModelError, ModelErrorKind, Result,
    RetryPolicy, StructuredOutputRequest, StructuredResponse, ToolChoice, ToolChoiceMode, ToolSchema,
    parse_structured_output, structured_output_request,
};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::{Flavor, OpenAiCompatibleConfig, Preset};
use crate::error::{from_status, from_transport, retry_after, should_retry};
use crate::format::{ChatFormatter, FormatterOptions};
use crate::parse::{ReasoningField, StreamState};
use crate::sse::SseParser;

/// A chat model on an OpenAI-compatible `/chat/completions` endpoint (OpenAI, DashScope compatible mode,
/// DeepSeek, Ollama, vLLM, ...).
///
/// HTTP is done with `reqwest` directly and responses are parsed with this crate's own serde types (see the crate
/// docs for why not `async-openai`). `Debug` shows the config as its own `Debug` does (no
/// credential).
pub struct OpenAiCompatibleModel {
    config: OpenAiCompatibleConfig,
    client: reqwest::Client,
    formatter: ChatFormatter,
}

impl std::fmt::Debug for OpenAiCompatibleModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiCompatibleModel")
            .field("config", &self.config)
            .field("formatter", &self.formatter)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatibleModel {
    /// Builds the model and its HTTP client.
    pub fn new(config: OpenAiCompatibleConfig) -> Result<Self> {
        // reqwest is built without a bundled crypto provider; use ring (already in the tree through fred).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder().connect_timeout(config.connect_timeout).build().map_err(|e| {
            ModelError::new(
                ModelErrorKind::InvalidRequest,
                config.provider,
                format!("cannot build the HTTP client: {e}"),
            )
        })?;
        let mut opts = match config.flavor {
            Flavor::OpenAi => {
                FormatterOptions { reasoning_content: config.send_reasoning_content, ..FormatterOptions::openai() }
            }
            Flavor::DashScope => FormatterOptions::dashscope(config.send_reasoning_content),
        };
        opts.local_files.clone_from(&config.local_files);
        let formatter = ChatFormatter::new(opts);
        Ok(Self { config, client, formatter })
    }

    /// Replaces the formatter options.
    pub fn with_formatter(mut self, opts: FormatterOptions) -> Self {
        self.formatter = ChatFormatter::new(opts);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiCompatibleConfig {
        &self.config
    }

    /// The JSON body sent for `request` (public for snapshots and debugging; contains no credential).
    pub fn request_body(&self, request: &ChatRequest) -> Result<Value> {
        let c = &self.config;
        let p = &c.parameters;
        let mut body = JsonMap::new();
        body.insert("model".into(), json!(c.model));
        body.insert("messages".into(), Value::Array(self.formatter.format(&request.messages)));
        body.insert("stream".into(), json!(c.stream));
        if c.stream {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let tools = request.effective_tools()?;
        if !tools.is_empty() {
            let list: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let t = if c.flavor == Flavor::OpenAi {
                        ToolSchema::new(t.name.clone(), t.description.clone(), inline_refs(&t.parameters))
                    } else {
                        (*t).clone()
                    };
                    t.to_function_value()
                })
                .collect();
            body.insert("tools".into(), Value::Array(list));
            if let Some(choice) = &request.tool_choice {
                let v = match &choice.mode {
                    ToolChoiceMode::Auto => json!("auto"),
                    ToolChoiceMode::None => json!("none"),
                    ToolChoiceMode::Required if c.flavor == Flavor::DashScope => {
                        tracing::warn!("DashScope does not support tool_choice \"required\"; using \"auto\"");
                        json!("auto")
                    }
                    ToolChoiceMode::Required => json!("required"),
                    ToolChoiceMode::Tool(name) => json!({"type": "function", "function": {"name": name}}),
                };
                body.insert("tool_choice".into(), v);
            }
            if !p.parallel_tool_calls {
                body.insert("parallel_tool_calls".into(), json!(false));
            }
        }
        if let Some(m) = p.max_tokens {
            body.insert("max_tokens".into(), json!(m));
        }
        if let Some(t) = p.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(t) = p.top_p {
            body.insert("top_p".into(), json!(t));
        }
        match c.flavor {
            Flavor::OpenAi => {
                if p.thinking_enable
                    && let Some(e) = &p.reasoning_effort
                {
                    body.insert("reasoning_effort".into(), json!(e));
                }
            }
            Flavor::DashScope => {
                body.insert("enable_thinking".into(), json!(p.thinking_enable));
                if let Some(b) = p.thinking_budget {
                    body.insert("thinking_budget".into(), json!(b));
                }
                if let Some(k) = p.top_k {
                    body.insert("top_k".into(), json!(k));
                }
            }
        }
        for (k, v) in &p.extra_body {
            body.insert(k.clone(), v.clone());
        }
        Ok(Value::Object(body))
    }

    fn secret(&self) -> Option<&str> {
        self.config.api_key.as_ref().map(|k| k.expose_secret())
    }

    /// Sends with provider-level retries. `Ok(None)`: cancelled.
    async fn send(&self, body: Bytes, cancel: &CancellationToken) -> Result<Option<reqwest::Response>> {
        let c = &self.config;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            tracing::debug!(provider = c.provider, model = %c.model, attempt, "chat completion request");
            let mut rb = self
                .client
                .post(c.endpoint())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(reqwest::header::ACCEPT, if c.stream { "text/event-stream" } else { "application/json" })
                .body(body.clone());
            if let Some(k) = &c.api_key {
                rb = rb.bearer_auth(k.expose_secret());
            }
            if let Some(org) = &c.organization {
                rb = rb.header("OpenAI-Organization", org);
            }
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(None),
                r = tokio::time::timeout(c.request_timeout, self.response_or_error(rb)) => r,
            };
            let (err, answer) = match outcome {
                Err(_) => (
                    ModelError::new(
                        ModelErrorKind::Timeout,
                        c.provider,
                        format!("no response within {:.3}s", c.request_timeout.as_secs_f64()),
                    ),
                    None,
                ),
                Ok(Ok(resp)) => return Ok(Some(resp)),
                Ok(Err(Failed { err, answer })) => (err, answer),
            };
            // An HTTP error answer is sent again when 2.0.4 would send it again (by its status and
            // `x-should-retry`, not by the error's kind); a failure without an answer when its kind
            // is retryable. The server's hint is waited instead of `retry_delay`; beyond
            // `max_retry_after` the call fails now.
            let delay = match answer {
                Some(a) => delay_after(&c.retry, attempt, a.retry, a.hint),
                None => c.retry.delay_for(attempt, &err),
            };
            match delay {
                Some(delay) => {
                    tracing::warn!(provider = c.provider, attempt, error = %err, delay_ms = delay.as_millis() as u64, "retrying");
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => return Ok(None),
                        () = tokio::time::sleep(delay) => {}
                    }
                }
                None => return Err(err),
            }
        }
    }

    /// The response, or the error (with the server's retry hint, see [`crate::error::retry_hint`]) and, for
    /// an HTTP error answer, whether to send the request again.
    async fn response_or_error(&self, rb: reqwest::RequestBuilder) -> Result<reqwest::Response, Failed> {
        let provider = self.config.provider;
        let resp =
            rb.send().await.map_err(|e| Failed { err: from_transport(provider, e, self.secret()), answer: None })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let headers = resp.headers().clone();
        let answer = Answer { retry: should_retry(status.as_u16(), &headers), hint: retry_after(&headers) };
        // Only a snippet goes into the error: read at most MAX_ERROR_BODY_BYTES of it.
        let body = match read_body(resp, MAX_ERROR_BODY_BYTES).await {
            Ok(Body::Whole(b)) | Ok(Body::Truncated(b)) => String::from_utf8_lossy(&b).into_owned(),
            Err(_) => String::new(),
        };
        Err(Failed {
            err: from_status(provider, status.as_u16(), &headers, &body, self.secret()),
            answer: Some(answer),
        })
    }

    fn reasoning_field(&self) -> ReasoningField {
        match self.config.flavor {
            Flavor::OpenAi => ReasoningField::ContentOrReasoning,
            Flavor::DashScope => ReasoningField::ContentOnly,
        }
    }
}

#[async_trait]
impl ChatModel for OpenAiCompatibleModel {
    fn model_name(&self) -> &str {
        &self.config.model
    }

    fn provider(&self) -> &'static str {
        self.config.provider
    }

    fn count_tokens_of_parts(&self, parts: &[&[Msg]], tools: &[ToolSchema]) -> usize {
        HeuristicTokenCounter.count_parts(parts, tools)
    }
    fn context_size(&self) -> usize {
        self.config.context_size
    }

    async fn stream(&self, request: ChatRequest) -> Result<ChatStream> {
        let started = Instant::now();
        let body = self.request_body(&request)?;
        let bytes = Bytes::from(serde_json::to_vec(&body).map_err(|e| {
            ModelError::new(
                ModelErrorKind::InvalidRequest,
                self.config.provider,
                format!("cannot encode the body: {e}"),
            )
        })?);
        let cancel = request.cancel.clone();
        let Some(resp) = self.send(bytes, &cancel).await? else {
            return Ok(ChatStream::interrupted());
        };
        let history = request.messages.iter().flat_map(|m| &m.content).filter_map(|b| match b {
            ContentBlock::ToolCall(c) => Some(c.id.clone()),
            ContentBlock::ToolResult(r) => Some(r.id.clone()),
            _ => None,
        });
        let mut state = StreamState::new(self.config.provider, self.reasoning_field())
            .with_taken_ids(history)
            .with_started(started)
            .with_secret(self.secret());
        // A server (or a proxy in front of it) that answers a streaming request with one JSON body
        // (`stream` ignored, or a 200 carrying `{"error": ...}`): read it whole, so its error or its
        // answer is seen instead of an SSE parse failure.
        let json_body = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().to_ascii_lowercase().starts_with("application/json"));
        if !self.config.stream || json_body {
            let provider = self.config.provider;
            let text = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(ChatStream::interrupted()),
                r = tokio::time::timeout(self.config.request_timeout, read_body(resp, self.config.max_response_bytes)) => match r {
                    Err(_) => return Err(ModelError::new(ModelErrorKind::Timeout, provider, "the response body did not arrive in time")),
                    Ok(Err(e)) => return Err(from_transport(provider, e, self.secret())),
                    Ok(Ok(Body::Truncated(_))) => return Err(ModelError::new(
                        ModelErrorKind::InvalidResponse,
                        provider,
                        format!("the response body is over {} bytes", self.config.max_response_bytes),
                    )),
                    Ok(Ok(Body::Whole(b))) => String::from_utf8_lossy(&b).into_owned(),
                },
            };
            let response = state.parse_response(&text)?;
            return Ok(ChatStream::from_response(response));
        }
        let driver = Driver {
            body: resp.bytes_stream().boxed(),
            parser: SseParser::new(),
            state,
            queue: VecDeque::new(),
            done: false,
            saw_done: false,
            usage_requested: true,
            idle: self.config.idle_timeout,
            finish_grace: self.config.finish_grace,
            received: 0,
            max_bytes: self.config.max_response_bytes,
            provider: self.config.provider,
            secret: self.secret().map(str::to_owned),
        };
        Ok(ChatStream::new(driver.into_stream(), cancel))
    }

    /// The base behaviour of [`ChatModel::generate_structured_output`], except that DashScope with thinking enabled
    /// gets `tool_choice: "auto"` (it rejects forced tool calls while thinking), and a `400` whose error
    /// message names `tool_choice` (an endpoint whose reasoning mode rejects a forced tool) is retried
    /// once with `"auto"`, both as in 2.0.4 (which matches `str(BadRequestError)`: with the openai SDK
    /// it installs, the status and the error's `message` only, so a `param` naming it does not count).
    async fn generate_structured_output(&self, request: StructuredOutputRequest) -> Result<StructuredResponse> {
        let mut chat = structured_output_request(&request);
        if self.config.flavor == Flavor::DashScope && self.config.parameters.thinking_enable {
            chat.tool_choice = Some(ToolChoice::auto());
        }
        let forced = chat.tool_choice != Some(ToolChoice::auto());
        let response = match self.call(chat).await {
            Err(e) if forced && e.status() == Some(400) && e.message().contains("tool_choice") => {
                tracing::warn!(
                    target: "as_model_openai",
                    error = %e,
                    "forced tool_choice rejected by the provider; retrying with tool_choice=auto"
                );
                let mut again = structured_output_request(&request);
                again.tool_choice = Some(ToolChoice::auto());
                self.call(again).await?
            }
            r => r?,
        };
        parse_structured_output(self.config.provider, &request.schema, &response)
    }
}

/// An attempt that failed: its error and, when the server answered with an HTTP error status, what
/// that answer says about retrying.
struct Failed {
    err: ModelError,
    answer: Option<Answer>,
}

/// What an HTTP error answer says about retrying.
struct Answer {
    /// Whether 2.0.4 sends the request again after it ([`should_retry`]).
    retry: bool,
    /// Its `retry-after-ms` / `retry-after`, whatever the status (the SDK waits it on every answer
    /// it retries).
    hint: Option<Duration>,
}

/// [`RetryPolicy::delay_for`]'s rule for an attempt whose retry is decided apart from its error's
/// kind: none when `retry` is false or the policy's retries are used up (`attempt` counts from 1);
/// else the hint when the policy honours it (none, failing at once, when it is beyond
/// `max_retry_after`), or `retry_delay`.
fn delay_after(policy: &RetryPolicy, attempt: u32, retry: bool, hint: Option<Duration>) -> Option<Duration> {
    if !retry || attempt > policy.max_retries {
        return None;
    }
    match hint {
        Some(d) if policy.honor_retry_after => (d <= policy.max_retry_after).then_some(d),
        _ => Some(policy.retry_delay),
    }
}

/// Reads the SSE body and turns events into chunks.
struct Driver {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    parser: SseParser,
    state: StreamState,
    queue: VecDeque<Result<ChatChunk>>,
    done: bool,
    saw_done: bool,
    /// Whether the request asked for a usage chunk (`stream_options.include_usage`): the response is
    /// whole once it follows the finish reason.
    usage_requested: bool,
    idle: Duration,
    /// The longest wait after the finish reason (see [`OpenAiCompatibleConfig::finish_grace`]).
    finish_grace: Duration,
    /// Body bytes read so far, and the most allowed: a server that never ends the stream cannot grow
    /// the accumulated response without bound.
    received: usize,
    max_bytes: usize,
    provider: &'static str,
    secret: Option<String>,
}

impl Driver {
    fn into_stream(self) -> BoxStream<'static, Result<ChatChunk>> {
        futures::stream::unfold(self, |mut d| async move {
            loop {
                if let Some(item) = d.queue.pop_front() {
                    return Some((item, d));
                }
                if d.done {
                    return None;
                }
                d.step().await;
            }
        })
        .boxed()
    }

    fn fail(&mut self, kind: ModelErrorKind, msg: impl Into<String>) {
        self.done = true;
        self.queue.push_back(Err(ModelError::new(kind, self.provider, msg)));
    }

    fn handle_event(&mut self, data: &str) {
        if self.saw_done {
            return;
        }
        if data.trim() == "[DONE]" {
            self.saw_done = true;
            self.done = true;
            return;
        }
        match self.state.parse_event(data) {
            Ok(c) => {
                // The usage chunk at or after the finish reason is the last one the protocol sends:
                // the response is whole even if the server neither sends `[DONE]` nor closes.
                if self.usage_requested && c.usage.is_some() && self.state.saw_finish() {
                    self.done = true;
                }
                self.queue.push_back(Ok(c));
            }
            Err(e) => {
                self.done = true;
                self.queue.push_back(Err(e));
            }
        }
    }

    async fn step(&mut self) {
        // After the finish reason only the usage chunk and `[DONE]` may follow: wait for them at
        // most the grace period, then take the response as whole.
        let finished = self.state.saw_finish();
        let wait = if finished { self.idle.min(self.finish_grace) } else { self.idle };
        match tokio::time::timeout(wait, self.body.next()).await {
            Err(_) if finished => {
                tracing::debug!(
                    provider = self.provider,
                    grace_ms = wait.as_millis() as u64,
                    "nothing after the finish reason within the grace period; the response is whole"
                );
                self.done = true;
            }
            Err(_) => {
                self.fail(ModelErrorKind::Timeout, format!("the stream was silent for {:.3}s", self.idle.as_secs_f64()))
            }
            // A connection reset after the finish reason (or `[DONE]`), before the body's end: the
            // response is whole, as when the last line is torn there.
            Ok(Some(Err(_))) if self.saw_done || self.state.saw_finish() => {
                if let Some(last) = self.parser.take_pending() {
                    self.handle_event(&last);
                }
                self.done = true;
            }
            Ok(Some(Err(e))) => {
                self.done = true;
                let e = from_transport(self.provider, e, self.secret.as_deref());
                self.queue.push_back(Err(ModelError::new(
                    e.kind(),
                    self.provider,
                    format!("the stream broke: {}", e.message()),
                )));
            }
            Ok(Some(Ok(bytes))) => {
                self.received = self.received.saturating_add(bytes.len());
                if self.received > self.max_bytes {
                    let msg = format!("the streamed response is over {} bytes", self.max_bytes);
                    return self.fail(ModelErrorKind::InvalidResponse, msg);
                }
                let mut events = Vec::new();
                match self.parser.feed(&bytes, &mut events) {
                    Ok(()) => {}
                    Err(crate::sse::SseError::TooLarge { limit }) => {
                        let msg = format!("an SSE event is larger than {limit} bytes");
                        return self.fail(ModelErrorKind::InvalidResponse, msg);
                    }
                    Err(_) => return self.fail(ModelErrorKind::InvalidResponse, "the stream is not valid UTF-8"),
                }
                for e in events {
                    if self.done {
                        break;
                    }
                    self.handle_event(&e);
                }
            }
            Ok(None) => {
                match self.parser.finish() {
                    // After `[DONE]` or a finish reason a torn last line is noise; the response is whole
                    // (an event completed before it, such as the usage chunk, still counts).
                    Err(_) if self.saw_done || self.state.saw_finish() => {
                        if let Some(last) = self.parser.take_pending() {
                            self.handle_event(&last);
                        }
                    }
                    Err(_) => {
                        return self.fail(ModelErrorKind::Transport, "the stream was cut in the middle of an event");
                    }
                    Ok(Some(last)) => self.handle_event(&last),
                    Ok(None) => {}
                }
                if !self.done && !self.saw_done {
                    if self.state.saw_finish() {
                        self.done = true;
                    } else {
                        self.fail(ModelErrorKind::Transport, "the stream ended before the response finished");
                    }
                }
                self.done = true;
            }
        }
    }
}

/// The most JSON values [`inline_refs`] produces; a schema whose flattened form would be larger is
/// sent as it is.
pub const MAX_INLINED_VALUES: usize = 100_000;

/// The deepest nesting [`inline_refs`] follows, in schema levels (a `$ref` object and the
/// definition it expands to count one each, so a chain of about 255 references fits): a deeper
/// schema is sent as it is, so a long chain of references cannot exhaust the stack (2.0.4 raises
/// `RecursionError` instead).
pub const MAX_INLINE_DEPTH: usize = 512;

/// Inlines local `$ref`s and drops the `$defs` / `definitions` sections, as 2.0.4's
/// `_flatten_json_schema` does before `OpenAIChatModel` sends tool schemas (the goldens in
/// `tests/goldens/flatten-json-schema.json` were made with it):
///
/// * both root sections are read and merged (`definitions` wins a name both have); a schema
///   without an object-valued section is returned as it is;
/// * a `$ref` of the form `#/$defs/…` or `#/definitions/…` names the definition by its last path
///   segment. It is replaced by the definition, flattened, with the `$ref` object's other keys
///   (flattened) set on it; a reference to a definition already being expanded on the way there
///   becomes `{"type": "object", "description": "(circular: Name)"}`. A `$ref` object that cannot be
///   resolved (unknown name, remote URL, not a string) is left as it is, untouched;
/// * elsewhere, keys named `$defs` / `definitions` are dropped.
///
/// Two deliberate differences: the keys of a `properties` object are parameter names, so a
/// parameter called `definitions`, `$defs` or `$ref` is kept and walked (2.0.4 drops the first
/// two and leaves the whole `properties` object unresolved for the third); and a schema whose
/// flattened form would hold more than [`MAX_INLINED_VALUES`] values (references that fan out
/// without recursion, `A` using `B` twice, `B` using `C` twice, …) or nest deeper than
/// [`MAX_INLINE_DEPTH`] is sent unflattened, with a warning, instead of growing without bound.
pub fn inline_refs(schema: &Value) -> Value {
    let Value::Object(root) = schema else { return schema.clone() };
    let sections = ["$defs", "definitions"].map(|k| root.get(k).and_then(Value::as_object));
    if sections.iter().all(Option::is_none) {
        return schema.clone();
    }
    let mut defs = JsonMap::new();
    for section in sections.into_iter().flatten() {
        for (name, def) in section {
            defs.insert(name.clone(), def.clone());
        }
    }
    let kept: JsonMap = root
        .iter()
        .filter(|(k, v)| !(matches!(k.as_str(), "$defs" | "definitions") && v.is_object()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if defs.is_empty() {
        return Value::Object(kept);
    }
    let mut flattener = Flattener { defs: &defs, visiting: Vec::new(), budget: MAX_INLINED_VALUES, depth: 0 };
    match flattener.schema(&Value::Object(kept)) {
        Some(flat) => flat,
        None => {
            tracing::warn!(
                limit = MAX_INLINED_VALUES,
                depth = MAX_INLINE_DEPTH,
                "a tool schema's inlined form is too large or too deep; sent with its $defs and $refs as they are"
            );
            schema.clone()
        }
    }
}

/// The walk of [`inline_refs`]; `None`: over the budget.
struct Flattener<'a> {
    defs: &'a JsonMap,
    /// The definitions being expanded on the way to the current value.
    visiting: Vec<&'a str>,
    /// Values that may still be produced.
    budget: usize,
    /// Schema levels open around the current value.
    depth: usize,
}

impl<'a> Flattener<'a> {
    fn spend(&mut self) -> Option<()> {
        self.budget = self.budget.checked_sub(1)?;
        Some(())
    }

    /// A value in schema position (`None` past [`MAX_INLINE_DEPTH`] levels).
    fn schema(&mut self, v: &Value) -> Option<Value> {
        if self.depth >= MAX_INLINE_DEPTH {
            return None;
        }
        self.depth += 1;
        let out = self.schema_at(v);
        self.depth -= 1;
        out
    }

    fn schema_at(&mut self, v: &Value) -> Option<Value> {
        self.spend()?;
        let m = match v {
            Value::Array(a) => return a.iter().map(|x| self.schema(x)).collect::<Option<Vec<_>>>().map(Value::Array),
            Value::Object(m) => m,
            other => return Some(other.clone()),
        };
        if let Some(r) = m.get("$ref") {
            return self.reference(r, m);
        }
        let mut out = JsonMap::new();
        for (k, x) in m {
            match k.as_str() {
                "$defs" | "definitions" => {}
                "properties" => {
                    out.insert(k.clone(), self.properties(x)?);
                }
                _ => {
                    out.insert(k.clone(), self.schema(x)?);
                }
            }
        }
        Some(Value::Object(out))
    }

    /// The value of `properties`: its keys are parameter names, each value a schema.
    fn properties(&mut self, v: &Value) -> Option<Value> {
        let Value::Object(m) = v else { return self.schema(v) };
        self.spend()?;
        let mut out = JsonMap::new();
        for (k, x) in m {
            out.insert(k.clone(), self.schema(x)?);
        }
        Some(Value::Object(out))
    }

    /// An object `m` holding `"$ref": r`.
    fn reference(&mut self, r: &Value, m: &JsonMap) -> Option<Value> {
        let local = r.as_str().filter(|r| r.starts_with("#/$defs/") || r.starts_with("#/definitions/"));
        let Some(path) = local else { return self.copy(m) };
        let name = path.rsplit('/').next().unwrap_or(path);
        if self.visiting.contains(&name) {
            self.spend()?;
            return Some(json!({"type": "object", "description": format!("(circular: {name})")}));
        }
        let Some((name, def)) = self.defs.get_key_value(name) else { return self.copy(m) };
        self.visiting.push(name.as_str());
        let resolved = self.with_siblings(def, m);
        self.visiting.pop();
        resolved
    }

    /// The definition `def`, flattened, with the other keys of the `$ref` object `m` set on it.
    fn with_siblings(&mut self, def: &Value, m: &JsonMap) -> Option<Value> {
        let mut resolved = self.schema(def)?;
        if let Value::Object(rm) = &mut resolved {
            for (k, x) in m {
                if k != "$ref" {
                    let x = self.schema(x)?;
                    rm.insert(k.clone(), x);
                }
            }
        }
        Some(resolved)
    }

    /// `m` as it is (a reference left unresolved), counted against the budget.
    fn copy(&mut self, m: &JsonMap) -> Option<Value> {
        fn count(v: &Value) -> usize {
            match v {
                Value::Array(a) => 1 + a.iter().map(count).sum::<usize>(),
                Value::Object(m) => 1 + m.values().map(count).sum::<usize>(),
                _ => 1,
            }
        }
        let v = Value::Object(m.clone());
        self.budget = self.budget.checked_sub(count(&v))?;
        Some(v)
    }
}

macro_rules! preset_type {
    ($(#[$doc:meta])* $name:ident, $preset:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl $name {
            /// The preset's config for `model`, without a key (set one with `with_api_key`).
            pub fn config(model: impl Into<String>) -> OpenAiCompatibleConfig {
                OpenAiCompatibleConfig::preset($preset, model)
            }

            /// The preset's config for `model` with the key and base URL read from the environment.
            pub fn config_from_env(model: impl Into<String>) -> Result<OpenAiCompatibleConfig> {
                OpenAiCompatibleConfig::from_env($preset, model)
            }

            /// A ready model for `model`, key and base URL from the environment.
            pub fn from_env(model: impl Into<String>) -> Result<OpenAiCompatibleModel> {
                OpenAiCompatibleModel::new(Self::config_from_env(model)?)
            }
        }
    };
}

preset_type!(
    /// OpenAI: `OPENAI_API_KEY`, optional `OPENAI_BASE_URL` (2.0.4's `OpenAIChatModel`).
    OpenAiChatModel,
    Preset::OpenAi
);
preset_type!(
    /// DashScope through its OpenAI-compatible endpoint: `DASHSCOPE_API_KEY` (2.0.4's `DashScopeChatModel`).
    DashScopeChatModel,
    Preset::DashScope
);
preset_type!(
    /// DeepSeek: `DEEPSEEK_API_KEY`.
    DeepSeekChatModel,
    Preset::DeepSeek
);
preset_type!(
    /// Ollama's OpenAI-compatible endpoint (no key): `OLLAMA_BASE_URL`, default `http://localhost:11434/v1`.
    OllamaChatModel,
    Preset::Ollama
);

/// The most of an error response body that is read (the error message quotes a snippet of it).
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// A response body read up to a limit.
enum Body {
    /// All of it.
    Whole(Vec<u8>),
    /// Its first `limit` bytes; there was more.
    Truncated(Vec<u8>),
}

/// Reads `resp`'s body, stopping after `limit` bytes (a server cannot make us buffer more).
async fn read_body(mut resp: reqwest::Response, limit: usize) -> std::result::Result<Body, reqwest::Error> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = limit - out.len();
        if chunk.len() > room {
            out.extend_from_slice(chunk.get(..room).unwrap_or_default());
            return Ok(Body::Truncated(out));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Body::Whole(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_credential() {
        let config = OpenAiCompatibleConfig::custom("https://user:hunter2@gw.example/v1?key=sk-gateway-secret", "m")
            .with_api_key(crate::ApiKey::new("sk-very-secret"));
        let model = OpenAiCompatibleModel::new(config).unwrap();
        let dbg = format!("{model:?}");
        for secret in ["hunter2", "sk-gateway-secret", "sk-very-secret"] {
            assert!(!dbg.contains(secret), "{secret} in {dbg}");
        }
        assert!(dbg.contains(r#"base_url: "https://***:***@gw.example/v1?key=***""#), "{dbg}");
    }

    #[test]
    fn refs_are_inlined() {
        let s = json!({
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/P", "description": "where"}},
            "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}}
        });
        assert_eq!(
            inline_refs(&s),
            json!({"type": "object", "properties": {"p": {"type": "object", "properties": {"x": {"type": "integer"}}, "description": "where"}}})
        );
        let rec = json!({"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}});
        let out = inline_refs(&rec).to_string();
        assert!(!out.contains("$ref"));
        // A parameter named like a definitions keyword is a parameter: kept, with or without
        // root definitions.
        let params = json!({
            "type": "object",
            "properties": {"definitions": {"type": "string"}, "$defs": {"type": "string"}},
            "required": ["definitions"]
        });
        assert_eq!(inline_refs(&params), params);
        let mut with_defs = params.clone();
        with_defs["properties"]["p"] = json!({"$ref": "#/$defs/P"});
        with_defs["$defs"] = json!({"P": {"type": "integer"}});
        let out = inline_refs(&with_defs);
        assert_eq!(out["properties"]["definitions"], json!({"type": "string"}));
        assert_eq!(out["properties"]["p"], json!({"type": "integer"}));
        assert!(out.get("$defs").is_none());
    }

    /// For an answer that is retried, the wait is the one `RetryPolicy::delay_for` gives a retryable
    /// error with the same hint, for every policy, attempt and hint; an answer that is not retried
    /// gets none.
    #[test]
    fn delay_after_is_delay_for_with_the_decision_given() {
        let ms = Duration::from_millis;
        let policies = [
            RetryPolicy::default(),
            RetryPolicy::none(),
            RetryPolicy::new(2, ms(10)),
            RetryPolicy { honor_retry_after: false, ..RetryPolicy::new(3, ms(5)) },
            RetryPolicy { max_retry_after: ms(100), ..RetryPolicy::new(3, ms(5)) },
        ];
        let hints = [None, Some(Duration::ZERO), Some(ms(1)), Some(ms(100)), Some(ms(101)), Some(ms(120_000))];
        for policy in &policies {
            for attempt in 1..=5 {
                for hint in hints {
                    let err = ModelError::new(ModelErrorKind::ServerError, "p", "down").with_retry_after(hint);
                    let case = format!("{policy:?} attempt {attempt} hint {hint:?}");
                    assert_eq!(delay_after(policy, attempt, true, hint), policy.delay_for(attempt, &err), "{case}");
                    assert_eq!(delay_after(policy, attempt, false, hint), None, "{case}");
                }
            }
        }
    }

    /// A chain of references D0 → D1 → … (no cycle) is followed to MAX_INLINE_DEPTH levels; a
    /// longer one is sent as it is instead of exhausting the stack.
    #[test]
    fn long_reference_chains_stop_at_the_depth_limit() {
        let chain = |links: usize| {
            let mut defs = JsonMap::new();
            for i in 0..links {
                defs.insert(
                    format!("D{i}"),
                    json!({"type": "object", "properties": {"next": {"$ref": format!("#/$defs/D{}", i + 1)}}}),
                );
            }
            defs.insert(format!("D{links}"), json!({"type": "string"}));
            json!({"$ref": "#/$defs/D0", "$defs": defs})
        };
        let short = inline_refs(&chain(100));
        assert!(!short.to_string().contains("$ref"), "a 100-link chain is inlined");
        let long = chain(5_000);
        assert_eq!(inline_refs(&long), long, "a 5,000-link chain is sent as it is");
    }
}
