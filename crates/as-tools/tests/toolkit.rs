//! Toolkit behaviour: groups and reset_tools, lookup, call_tool's contract (chunks then one
//! response; every failure an observation), and schema snapshots for every built-in tool.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use as_message::{Base64Source, DataBlock, Source, TextBlock, TextOrData, ToolResultState};
use as_tools::{
    CancellationToken, FunctionTool, INTERRUPTED_TEXT, SharedToolState, ToolCallContext, ToolChunk, ToolError,
    ToolErrorKind, ToolGroup, ToolLookup, ToolOutput, ToolResponse, ToolStream, Toolkit,
};
use futures::StreamExt;
use serde_json::json;

/// Params of the test tools.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Count {
    /// How many.
    count: i64,
}

fn ctx(state: &SharedToolState) -> ToolCallContext {
    ToolCallContext::new("call_1", state.clone(), "/")
}

async fn run(toolkit: &Toolkit, name: &str, input: &str, state: &SharedToolState) -> Vec<ToolOutput> {
    toolkit.call(name, input, ctx(state)).collect().await
}

fn response(out: &[ToolOutput]) -> &ToolResponse {
    assert_eq!(out.iter().filter(|o| matches!(o, ToolOutput::Response(_))).count(), 1, "exactly one response");
    match out.last() {
        Some(ToolOutput::Response(r)) => r,
        other => panic!("the response must come last: {other:?}"),
    }
}

fn weather_toolkit() -> Toolkit {
    let weather = FunctionTool::new("get_weather", "Get the weather.", |a: Count, _| async move {
        Ok::<_, ToolError>(format!("{} suns", a.count))
    });
    let maps = FunctionTool::new("get_map", "Get a map.", |_: Count, _| async move { Ok::<_, ToolError>("map") });
    let mut toolkit = Toolkit::new()
        .with(FunctionTool::new("echo", "Echo.", |a: Count, _| async move { Ok::<_, ToolError>(a.count.to_string()) }));
    toolkit
        .add_group(ToolGroup::new("weather", "Weather tools.").instructions("Always state the unit.").tool(weather))
        .unwrap();
    toolkit.add_group(ToolGroup::new("maps", "Map tools.").tool(maps)).unwrap();
    toolkit
}

#[tokio::test]
async fn reset_tools_replaces_the_active_groups() {
    let toolkit = weather_toolkit();
    let state = SharedToolState::default();
    let names = |groups: &[String]| -> Vec<String> {
        toolkit.schemas(groups).iter().map(|s| s["function"]["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names(&[]), ["reset_tools", "echo"]);

    // the fixture's text for one group with instructions
    let out = run(&toolkit, "reset_tools", r#"{"weather": true}"#, &state).await;
    assert_eq!(
        response(&out).text(),
        "The currently activated tool group(s): weather.\n<tool-instructions>\nThe tool instructions are a collection of \
         suggestions, rules and notifications about how to use the tools in the activated groups.\n<group \
         name=\"weather\">Always state the unit.</group>\n</tool-instructions>"
    );
    let active = state.snapshot().tool_context.activated_groups;
    assert_eq!(active, ["weather"]);
    assert_eq!(names(&active), ["reset_tools", "echo", "get_weather"]);

    // the input is the final state, not a delta; a group without instructions adds no tag
    let out = run(&toolkit, "reset_tools", r#"{"maps": true}"#, &state).await;
    assert_eq!(response(&out).text(), "The currently activated tool group(s): maps.");
    assert_eq!(state.snapshot().tool_context.activated_groups, ["maps"]);
    let out = run(&toolkit, "reset_tools", r#"{"maps": true, "weather": true}"#, &state).await;
    assert!(
        response(&out).text().starts_with("The currently activated tool group(s): maps, weather.\n<tool-instructions>")
    );
    let out = run(&toolkit, "reset_tools", r#"{"weather": false}"#, &state).await;
    assert_eq!(response(&out).text(), "All tool groups are currently deactivated.");
    assert!(state.snapshot().tool_context.activated_groups.is_empty());
}

#[tokio::test]
async fn lookup_tells_unknown_from_inactive() {
    let toolkit = weather_toolkit();
    let state = SharedToolState::default();
    assert!(matches!(toolkit.lookup("nope", &[]), ToolLookup::Unknown));
    assert!(matches!(toolkit.lookup("get_weather", &[]), ToolLookup::Inactive { ref group, .. } if group == "weather"));
    assert!(matches!(toolkit.lookup("get_weather", &["weather".into()]), ToolLookup::Available(_)));
    assert!(toolkit.get_tool("get_weather").is_some(), "get_tool looks at inactive groups too");

    let out = run(&toolkit, "nope", "{}", &state).await;
    assert_eq!(response(&out).state, ToolResultState::Error);
    assert_eq!(response(&out).text(), "ToolNotFoundError: The tool named 'nope' doesn't exist.");
    let out = run(&toolkit, "get_weather", r#"{"count": 1}"#, &state).await;
    assert_eq!(response(&out).state, ToolResultState::Error);
    assert!(
        response(&out)
            .text()
            .starts_with("ToolInactiveError: The tool named 'get_weather' belongs to the tool group 'weather'")
    );
    state.with(|p| p.tool_context.activated_groups = vec!["weather".into()]);
    let out = run(&toolkit, "get_weather", r#"{"count": 2}"#, &state).await;
    assert_eq!(response(&out).text(), "2 suns");
    assert_eq!(response(&out).state, ToolResultState::Success);
    assert_eq!(response(&out).id, "call_1");
}

#[test]
fn group_registration_errors() {
    let mut toolkit = Toolkit::new();
    assert_eq!(toolkit.add_group(ToolGroup::new("basic", "x")).unwrap_err().kind(), ToolErrorKind::Registration);
    toolkit.add_group(ToolGroup::new("g", "x")).unwrap();
    assert_eq!(toolkit.add_group(ToolGroup::new("g", "y")).unwrap_err().kind(), ToolErrorKind::Registration);
}

#[tokio::test]
async fn input_errors_are_observations_with_2_0_4_texts() {
    let toolkit = weather_toolkit();
    let state = SharedToolState::default();
    let text = |out: Vec<ToolOutput>| {
        let r = response(&out).clone();
        assert_eq!(r.state, ToolResultState::Error);
        r.text()
    };
    assert!(text(run(&toolkit, "echo", "[1, 2]", &state).await).starts_with(
        "<system-reminder>Error: Your argument string is decoded into a <class 'list'> object, but a dict object is expected!"
    ));
    assert_eq!(
        text(run(&toolkit, "echo", r#"{"count": "5"}"#, &state).await),
        "Input validation failed for tool 'echo': '5' is not of type 'integer'"
    );
    // truncated JSON is repaired and runs
    let out = run(&toolkit, "echo", r#"{"count": 7"#, &state).await;
    assert_eq!(response(&out).text(), "7");
}

#[tokio::test]
async fn chunks_stream_then_one_merged_response() {
    let streaming = FunctionTool::new("stream_numbers", "Stream.", |a: Count, _| async move {
        let id = as_message::generate_id();
        let chunks: Vec<ToolChunk> = (1..=a.count)
            .map(|i| ToolChunk::new(vec![TextOrData::Text(TextBlock { text: format!("{i}"), id: id.clone() })]))
            .collect();
        Ok::<_, ToolError>(chunks)
    });
    let toolkit = Toolkit::new().with(streaming);
    let out = run(&toolkit, "stream_numbers", r#"{"count": 3}"#, &SharedToolState::default()).await;
    assert_eq!(out.len(), 4);
    assert!(out[..3].iter().all(|o| matches!(o, ToolOutput::Chunk(_))));
    let r = response(&out);
    assert_eq!(r.content.len(), 1, "same block id: merged");
    assert_eq!(r.text(), "123");
    assert_eq!(r.state, ToolResultState::Success);
}

#[test]
fn append_chunk_merges_like_2_0_4() {
    let mut r = ToolResponse::new("c");
    let data = |id: &str, b64: &str| {
        TextOrData::Data(DataBlock {
            id: id.into(),
            source: Source::Base64(Base64Source { data: b64.into(), media_type: "text/plain".into() }),
            name: None,
        })
    };
    let text = |id: &str, t: &str| TextOrData::Text(TextBlock { text: t.into(), id: id.into() });
    r.append_chunk(&ToolChunk::new(vec![text("t1", "a"), data("d", "aGVs")]));
    r.append_chunk(&ToolChunk::new(vec![data("d", "bG8="), text("t2", "b")]));
    let mut meta = as_message::JsonMap::new();
    meta.insert("k".into(), json!(1));
    r.append_chunk(&ToolChunk::with_state("c", ToolResultState::Error).metadata(meta));
    r.append_chunk(&ToolChunk::text("d"));
    r.merge_consecutive_text();
    assert_eq!(r.state, ToolResultState::Error, "an error chunk overwrites the state; a later running one does not");
    assert_eq!(r.metadata["k"], 1);
    let TextOrData::Data(d) = &r.content[1] else { panic!() };
    let Source::Base64(s) = &d.source else { panic!() };
    assert_eq!(s.data, "aGVsbG8=", "base64 decoded, joined, re-encoded");
    assert_eq!(r.content.len(), 3);
    assert_eq!(r.text(), "abcd");
}

#[tokio::test]
async fn tool_failures_never_escape() {
    let erroring =
        FunctionTool::new(
            "fails",
            "Fails.",
            |_: Count, _| async move { Err::<String, _>(ToolError::execution("boom")) },
        );
    let panicking = FunctionTool::new("panics", "Panics.", |a: Count, _| async move {
        if a.count > 0 {
            panic!("tool bug");
        }
        Ok::<_, ToolError>("fine")
    });
    let mid_stream = FunctionTool::new("mid", "Fails mid-stream.", |_: Count, _| async move {
        Ok::<_, ToolError>(ToolStream::new(futures::stream::iter(vec![
            Ok(ToolChunk::text("partial ")),
            Err(ToolError::execution("then broke")),
        ])))
    });
    let toolkit = Toolkit::new().with(erroring).with(panicking).with(mid_stream);
    let state = SharedToolState::default();
    let r = run(&toolkit, "fails", r#"{"count": 1}"#, &state).await;
    assert_eq!((response(&r).state, response(&r).text()), (ToolResultState::Error, "boom".to_owned()));
    let r = run(&toolkit, "panics", r#"{"count": 1}"#, &state).await;
    assert_eq!(
        (response(&r).state, response(&r).text()),
        (ToolResultState::Error, "the tool 'panics' panicked".to_owned())
    );
    let r = run(&toolkit, "mid", r#"{"count": 1}"#, &state).await;
    assert_eq!((response(&r).state, response(&r).text()), (ToolResultState::Error, "partial then broke".to_owned()));
}

#[tokio::test]
async fn cancellation_gives_an_interrupted_result() {
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(std::sync::Mutex::new(Some(started_tx)));
    let hangs = FunctionTool::new("hangs", "Never finishes.", move |_: Count, _| {
        let started_tx = Arc::clone(&started_tx);
        async move {
            if let Some(tx) = started_tx.lock().unwrap().take() {
                let _ = tx.send(());
            }
            futures::future::pending::<()>().await;
            Ok::<_, ToolError>("unreachable")
        }
    });
    let toolkit = Toolkit::new().with(hangs);
    let cancel = CancellationToken::new();
    let ctx = ctx(&SharedToolState::default()).with_cancel(cancel.clone());
    let call = tokio::spawn({
        let toolkit = toolkit.clone();
        async move { toolkit.call("hangs", r#"{"count": 1}"#, ctx).collect::<Vec<_>>().await }
    });
    started_rx.await.unwrap();
    cancel.cancel();
    let out = call.await.unwrap();
    let r = response(&out);
    assert_eq!(r.state, ToolResultState::Interrupted);
    assert_eq!(r.text(), INTERRUPTED_TEXT);
    assert!(matches!(&out[0], ToolOutput::Chunk(c) if c.state == ToolResultState::Interrupted));
}

#[test]
fn builtin_and_task_tool_schemas() {
    let mut toolkit = as_tools::builtin::builtin_tools().into_iter().fold(Toolkit::new(), |k, t| k.with(t));
    for t in as_tools::task_tools::task_tools() {
        toolkit.register(t);
    }
    toolkit.add_group(ToolGroup::new("web", "Web tools.")).unwrap();
    let schemas = toolkit.schemas(&[]);
    // every schema is a valid JSON Schema object with no titles
    for s in &schemas {
        let params = &s["function"]["parameters"];
        assert_eq!(params["type"], "object");
        assert!(jsonschema_ok(params), "{params}");
        assert!(!params.to_string().contains("\"title\""));
    }
    // a string snapshot: insta's own JSON serializer does not understand arbitrary_precision numbers
    insta::assert_snapshot!("toolkit_schemas", serde_json::to_string_pretty(&schemas).unwrap());
}

fn jsonschema_ok(schema: &serde_json::Value) -> bool {
    let empty = as_message::JsonMap::new();
    // validating an empty object either passes or fails on `required`, never on a bad schema
    match as_tools::validate_arguments("t", schema, &empty) {
        Ok(()) => true,
        Err(e) => e.kind() == ToolErrorKind::InvalidInput,
    }
}
