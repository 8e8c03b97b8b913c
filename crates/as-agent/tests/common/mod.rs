//! Shared test harness: the tools and helpers of `events_generate.py`, in Rust.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use as_agent::{Agent, AgentEvent, ReplyInput, ReplyOutcome};
use as_message::{Msg, PermissionBehavior, PermissionRule};
use as_state::AgentState;
use as_tools::{FunctionTool, ToolChunk, ToolError, ToolStream};
use futures::StreamExt;
use serde_json::Value;

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/agentscope-2.0.4")
}

/// The `type`s of a recorded event file, in order.
pub fn fixture_types(file: &str) -> Vec<String> {
    std::fs::read_to_string(fixtures().join(file))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_owned())
        .collect()
}

pub fn scenario(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join(format!("scenario-{name}.json"))).unwrap()).unwrap()
}

/// The recorded input message of a phase.
pub fn phase_input_msg(s: &Value, phase: usize) -> Msg {
    as_message::from_value(s["phases"][phase]["input"].clone()).unwrap()
}

pub fn types(events: &[AgentEvent]) -> Vec<String> {
    events.iter().map(|e| serde_json::to_value(e.event_type()).unwrap().as_str().unwrap().to_owned()).collect()
}

fn is_generated_id(s: &str) -> bool {
    s.len() == 32 && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// Replaces generated ids and timestamps so two runs compare equal ("ids and timestamps aside").
pub fn norm(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("created_at" | "finished_at" | "updated_at", Value::String(_)) => Value::String("<ts>".into()),
                        _ => norm(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(norm).collect()),
        Value::String(s) if is_generated_id(s) => Value::String("<id>".into()),
        other => other.clone(),
    }
}

pub fn state_json(state: &AgentState) -> Value {
    serde_json::from_str(&as_message::to_json(state)).unwrap()
}

/// Asserts two normalized JSON values are equal, printing a readable diff.
pub fn assert_same(ours: &Value, theirs: &Value, what: &str) {
    let (a, b) = (norm(ours), norm(theirs));
    if a != b {
        panic!(
            "{what} differs\n--- ours\n{}\n--- 2.0.4\n{}",
            serde_json::to_string_pretty(&a).unwrap(),
            serde_json::to_string_pretty(&b).unwrap()
        );
    }
}

/// Runs a reply to its end, collecting the events.
pub async fn run(
    agent: &Agent,
    state: &mut AgentState,
    input: impl Into<ReplyInput>,
) -> (Vec<AgentEvent>, as_agent::Result<ReplyOutcome>) {
    let mut events = Vec::new();
    let mut stream = agent.reply_stream(state, input);
    let mut err = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(e) => events.push(e),
            Err(e) => err = Some(e),
        }
    }
    let outcome = match err {
        Some(e) => Err(e),
        None => Ok(stream.into_outcome().unwrap()),
    };
    (events, outcome)
}

pub fn allow_rule(tool: &str) -> PermissionRule {
    PermissionRule::new(tool, None, PermissionBehavior::Allow, "userSettings")
}

/// Arguments of get_weather.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Weather {
    /// The city name.
    pub city: String,
    /// The temperature unit, "celsius" or "fahrenheit".
    #[serde(default = "celsius")]
    pub unit: String,
}

fn celsius() -> String {
    "celsius".into()
}

pub fn get_weather() -> FunctionTool {
    FunctionTool::new("get_weather", "Get the current weather of a city.", |a: Weather, _ctx| async move {
        Ok::<_, ToolError>(format!("Sunny, {} degrees {} in {}.", 25, a.unit, a.city))
    })
}

/// Arguments of stream_numbers.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Count {
    /// How many numbers to stream.
    pub count: u32,
}

pub fn stream_numbers() -> FunctionTool {
    FunctionTool::new("stream_numbers", "Stream the numbers from 1 to count.", |a: Count, _ctx| async move {
        Ok::<_, ToolError>(ToolStream::from_chunks((1..=a.count).map(|i| ToolChunk::text(format!("{i};"))).collect()))
    })
    .concurrency_safe(false)
}

/// 2.0.4's scripted `AllowTool`: echoes `text`; ALLOW (or ASK); optionally external or blocking.
pub use as_agent::testkit::EchoTool as AllowTool;
