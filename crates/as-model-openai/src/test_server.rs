//! A local HTTP server speaking the OpenAI chat completions protocol (JSON and SSE), for tests
//! (feature `test-utils`). It replays queued [`MockReply`]s in order and records every request.
//!
//! ```
//! use as_model_openai::test_server::{MockReply, MockServer, chunk};
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let server = MockServer::start().await?;
//! server.push(MockReply::sse([chunk::text("Hello"), chunk::finish("stop"), chunk::usage(5, 1)]));
//! // point an OpenAiCompatibleModel at server.base_url() ...
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! # Ok::<(), std::io::Error>(()) }).unwrap();
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;
use tokio::task::JoinHandle;

/// One step of a scripted SSE body.
#[derive(Clone, Debug)]
pub enum SseStep {
    /// `data: <json>\n\n`.
    Data(String),
    /// Bytes written verbatim (split events, malformed lines, ...).
    Raw(Vec<u8>),
    /// Waits before the next step.
    Delay(Duration),
    /// Aborts the connection (the client sees a broken body).
    Cut,
    /// Never sends anything more (the client must time out or cancel).
    Hang,
}

/// A scripted answer.
#[derive(Clone, Debug)]
pub enum MockReply {
    /// A JSON (or any text) body with a status and extra headers.
    Json {
        /// HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// A `text/event-stream` body.
    Sse(Vec<SseStep>),
    /// Waits, then answers with the inner reply (a slow server).
    Delayed(Duration, Box<MockReply>),
}

impl MockReply {
    /// A 200 JSON body.
    pub fn json(body: Value) -> Self {
        Self::Json { status: 200, headers: Vec::new(), body: body.to_string() }
    }

    /// An error answer: `{"error": {"message", "type", "code"}}` with this status.
    pub fn error(status: u16, message: &str, code: Option<&str>) -> Self {
        let body = serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}});
        Self::Json { status, headers: Vec::new(), body: body.to_string() }
    }

    /// Adds a header (to a `Json` reply).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Self::Json { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// An SSE body of these chunks followed by `data: [DONE]`.
    pub fn sse(chunks: impl IntoIterator<Item = Value>) -> Self {
        let mut steps: Vec<SseStep> = chunks.into_iter().map(|c| SseStep::Data(c.to_string())).collect();
        steps.push(SseStep::Data("[DONE]".into()));
        Self::Sse(steps)
    }

    /// An SSE body of these raw steps.
    pub fn sse_steps(steps: impl IntoIterator<Item = SseStep>) -> Self {
        Self::Sse(steps.into_iter().collect())
    }

    /// Answers after `delay`.
    pub fn delayed(self, delay: Duration) -> Self {
        Self::Delayed(delay, Box::new(self))
    }
}

/// Builders of OpenAI stream chunks (`chat.completion.chunk`) and completions.
pub mod chunk {
    use serde_json::{Value, json};

    fn wrap(delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    }

    /// A text delta.
    pub fn text(t: &str) -> Value {
        wrap(json!({"role": "assistant", "content": t}), None)
    }

    /// A `reasoning_content` delta.
    pub fn reasoning(t: &str) -> Value {
        wrap(json!({"reasoning_content": t}), None)
    }

    /// A tool-call delta; `id`/`name` are sent only when given (first delta of a call).
    pub fn tool_call(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
        let mut call = json!({"index": index, "function": {"arguments": arguments}});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        wrap(json!({"tool_calls": [call]}), None)
    }

    /// Several tool-call deltas in one chunk: `(index, id, name, arguments)`.
    pub fn tool_calls(calls: &[(u32, Option<&str>, Option<&str>, &str)]) -> Value {
        let list: Vec<Value> = calls
            .iter()
            .map(|(i, id, name, args)| {
                let mut c = json!({"index": i, "function": {"arguments": args}});
                if let Some(id) = id {
                    c["id"] = json!(id);
                    c["type"] = json!("function");
                }
                if let Some(n) = name {
                    c["function"]["name"] = json!(n);
                }
                c
            })
            .collect();
        wrap(json!({"tool_calls": list}), None)
    }

    /// An empty delta with a finish reason.
    pub fn finish(reason: &str) -> Value {
        wrap(json!({}), Some(reason))
    }

    /// The usage-only last chunk (`choices: []`), as with `stream_options.include_usage`.
    pub fn usage(prompt: u64, completion: u64) -> Value {
        json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "mock-model",
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                      "prompt_tokens_details": {"cached_tokens": 0}}
        })
    }

    /// A non-streamed completion with this message.
    pub fn completion(message: Value, finish: &str, prompt: u64, completion: u64) -> Value {
        json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "mock-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        })
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Method.
    pub method: String,
    /// Path (`/v1/chat/completions`).
    pub path: String,
    /// The query string, without its `?`, if any.
    pub query: Option<String>,
    /// Headers, lower-case names.
    pub headers: Vec<(String, String)>,
    /// The body, parsed as JSON (`Value::String` of the raw text when it is not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<MockReply>,
    requests: Vec<RecordedRequest>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The mock server; stops when dropped.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").field("queued", &self.replies.len()).field("requests", &self.requests.len()).finish()
    }
}

impl MockServer {
    /// Starts on a free loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let st = Arc::clone(&state);
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let st = Arc::clone(&st);
            async move { handle(st, method, uri, headers, body).await }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, state, task })
    }

    /// `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a reply.
    pub fn push(&self, reply: MockReply) {
        lock(&self.state).replies.push_back(reply);
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }

    /// Replies not used yet.
    pub fn queued(&self) -> usize {
        lock(&self.state).replies.len()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(st: Arc<Mutex<State>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    let rec = RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_ascii_lowercase(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        body: json,
    };
    let reply = {
        let mut s = lock(&st);
        s.requests.push(rec);
        s.replies.pop_front()
    };
    let reply = reply.unwrap_or_else(|| MockReply::error(500, "mock server: no reply queued", None));
    respond(reply).await
}

async fn respond(mut reply: MockReply) -> Response {
    while let MockReply::Delayed(d, inner) = reply {
        tokio::time::sleep(d).await;
        reply = *inner;
    }
    match reply {
        MockReply::Json { status, headers, body } => {
            let mut b =
                Response::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
            b = b.header("content-type", "application/json");
            for (k, v) in headers {
                b = b.header(k, v);
            }
            b.body(Body::from(body)).unwrap_or_else(|_| Response::new(Body::empty()))
        }
        MockReply::Sse(steps) => {
            let stream = futures::stream::unfold(VecDeque::from(steps), |mut steps| async move {
                loop {
                    match steps.pop_front()? {
                        SseStep::Data(d) => return Some((Ok(Bytes::from(format!("data: {d}\n\n"))), steps)),
                        SseStep::Raw(r) => return Some((Ok(Bytes::from(r)), steps)),
                        SseStep::Delay(d) => tokio::time::sleep(d).await,
                        SseStep::Cut => {
                            steps.clear();
                            return Some((Err(std::io::Error::other("connection cut by the mock server")), steps));
                        }
                        SseStep::Hang => futures::future::pending::<()>().await,
                    }
                }
            });
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(Body::from_stream(stream))
                .unwrap_or_else(|_| Response::new(Body::empty()))
        }
        MockReply::Delayed(..) => Response::new(Body::empty()),
    }
}
