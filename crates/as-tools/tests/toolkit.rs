//! Toolkit behaviour: groups and reset_tools, lookup, call_tool's contract (chunks then one
//! response; every failure an observation), and schema snapshots for every built-in tool.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use as_message::{Base64Source, DataBlock, Source, TextBlock, TextOrData, ToolResultState, UrlSource};
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

fn text_block(id: &str, text: &str) -> TextOrData {
    TextOrData::Text(TextBlock { text: text.into(), id: id.into() })
}

fn data_block(id: &str, b64: &str, media_type: &str, name: Option<&str>) -> TextOrData {
    TextOrData::Data(DataBlock {
        id: id.into(),
        source: Source::Base64(Base64Source { data: b64.into(), media_type: media_type.into() }),
        name: name.map(str::to_owned),
    })
}

fn url_block(id: &str, url: &str) -> TextOrData {
    TextOrData::Data(DataBlock {
        id: id.into(),
        source: Source::Url(UrlSource { url: url.into(), media_type: "image/png".into() }),
        name: None,
    })
}

/// The content as 2.0.4's `model_dump` writes it, with an id no chunk gave replaced by `<new>`.
fn dumped(r: &ToolResponse, chunks: &[Vec<TextOrData>]) -> serde_json::Value {
    let given: Vec<String> = chunks
        .iter()
        .flatten()
        .map(|b| match b {
            TextOrData::Text(t) => t.id.clone(),
            TextOrData::Data(d) => d.id.clone(),
        })
        .collect();
    let mut content = serde_json::to_value(&r.content).unwrap();
    for block in content.as_array_mut().unwrap() {
        if !given.iter().any(|id| block["id"] == id.as_str()) {
            block["id"] = json!("<new>");
        }
    }
    content
}

/// `ToolResponse.append_chunk` against 2.0.4: each case's chunks and the content agentscope 2.0.4
/// (Python 3.11.7) leaves, `[b.model_dump() for b in response.content]` with generated ids written
/// `<new>`. Before the fix Rust merged text only at the end (`acb` for the first case), replaced a
/// text block by a data block with its id, and dropped an unpadded base64 part (`IQ==`).
#[test]
fn append_chunk_matches_2_0_4() {
    let t = text_block;
    let d = |id: &str, b64: &str| data_block(id, b64, "text/plain", None);
    let cases: Vec<(&str, Vec<Vec<TextOrData>>, serde_json::Value)> = vec![
        (
            "interleaved text ids merge after every chunk",
            vec![vec![t("out", "a")], vec![t("err", "b")], vec![t("out", "c")]],
            json!([{"type": "text", "text": "abc", "id": "out"}]),
        ),
        (
            "text then data under one id: both kept",
            vec![vec![t("x", "a")], vec![d("x", "aGk=")]],
            json!([
                {"type": "text", "text": "a", "id": "x"},
                {"type": "data", "id": "<new>", "source": {"type": "base64", "data": "aGk=", "media_type": "text/plain"}, "name": null}
            ]),
        ),
        (
            "data then text under one id: both kept",
            vec![vec![d("x", "aGk=")], vec![t("x", "a")]],
            json!([
                {"type": "data", "id": "x", "source": {"type": "base64", "data": "aGk=", "media_type": "text/plain"}, "name": null},
                {"type": "text", "text": "a", "id": "<new>"}
            ]),
        ),
        (
            "unpadded base64 is concatenated as text",
            vec![vec![d("d", "aGVsbG8")], vec![d("d", "IQ==")]],
            json!([{"type": "data", "id": "d", "source": {"type": "base64", "data": "aGVsbG8IQ==", "media_type": "text/plain"}, "name": null}]),
        ),
        (
            "padded base64 is decoded, joined, re-encoded",
            vec![vec![d("d", "aGVs")], vec![d("d", "bG8=")]],
            json!([{"type": "data", "id": "d", "source": {"type": "base64", "data": "aGVsbG8=", "media_type": "text/plain"}, "name": null}]),
        ),
        (
            "trailing bits are ignored",
            vec![vec![d("d", "QR==")], vec![d("d", "QQ==")]],
            json!([{"type": "data", "id": "d", "source": {"type": "base64", "data": "QUE=", "media_type": "text/plain"}, "name": null}]),
        ),
        (
            "excess padding after a whole quad is accepted",
            vec![vec![d("d", "QUJD==")], vec![d("d", "QQ==")]],
            json!([{"type": "data", "id": "d", "source": {"type": "base64", "data": "QUJDQQ==", "media_type": "text/plain"}, "name": null}]),
        ),
        (
            "a non-empty name and media type replace the block's",
            vec![
                vec![data_block("d", "QQ==", "text/plain", Some("a.txt"))],
                vec![data_block("d", "QQ==", "", Some(""))],
                vec![data_block("d", "QQ==", "image/png", Some("b.png"))],
            ],
            json!([{"type": "data", "id": "d", "source": {"type": "base64", "data": "QUFB", "media_type": "image/png"}, "name": "b.png"}]),
        ),
        (
            "one id twice in a chunk, then data of the other kind",
            vec![vec![t("t", "a"), t("t", "b"), d("t", "QQ==")], vec![d("t", "QQ==")]],
            json!([
                {"type": "text", "text": "ab", "id": "t"},
                {"type": "data", "id": "<new>", "source": {"type": "base64", "data": "QQ==", "media_type": "text/plain"}, "name": null},
                {"type": "data", "id": "<new>", "source": {"type": "base64", "data": "QQ==", "media_type": "text/plain"}, "name": null}
            ]),
        ),
        (
            "the id of a text merged away starts a new block",
            vec![vec![t("a", "1"), t("b", "2")], vec![t("b", "3")], vec![d("z", "QQ==")], vec![t("b", "4")]],
            json!([
                {"type": "text", "text": "123", "id": "a"},
                {"type": "data", "id": "z", "source": {"type": "base64", "data": "QQ==", "media_type": "text/plain"}, "name": null},
                {"type": "text", "text": "4", "id": "b"}
            ]),
        ),
        (
            "text on both sides of data is not merged across it",
            vec![vec![t("t1", "a"), d("d", "QQ=="), t("t2", "b")], vec![t("t1", "c")]],
            json!([
                {"type": "text", "text": "ac", "id": "t1"},
                {"type": "data", "id": "d", "source": {"type": "base64", "data": "QQ==", "media_type": "text/plain"}, "name": null},
                {"type": "text", "text": "b", "id": "t2"}
            ]),
        ),
    ];
    for (name, chunks, expect) in cases {
        let mut r = ToolResponse::new("c");
        for c in &chunks {
            r.append_chunk(&ToolChunk::new(c.clone())).unwrap();
        }
        assert_eq!(dumped(&r, &chunks), expect, "{name}");
        let ids: std::collections::HashSet<&str> = r
            .content
            .iter()
            .map(|b| match b {
                TextOrData::Text(t) => t.id.as_str(),
                TextOrData::Data(d) => d.id.as_str(),
            })
            .collect();
        assert_eq!(ids.len(), r.content.len(), "{name}: ids stay distinct");
    }

    // State and metadata: an error chunk overwrites the state, a later running one does not.
    let mut r = ToolResponse::new("c");
    let mut meta = as_message::JsonMap::new();
    meta.insert("k".into(), json!(1));
    r.append_chunk(&ToolChunk::with_state("c", ToolResultState::Error).metadata(meta)).unwrap();
    r.append_chunk(&ToolChunk::text("d")).unwrap();
    assert_eq!((r.state, r.metadata["k"].clone(), r.text()), (ToolResultState::Error, json!(1), "cd".to_owned()));

    // URL data cannot be merged: 2.0.4 raises ValueError with this text (pydantic shows the URL
    // normalised, as as-message stores it); the blocks before it stay merged, the chunk's state
    // and metadata are not applied.
    let mut r = ToolResponse::new("c");
    r.append_chunk(&ToolChunk::new(vec![url_block("u", "http://a/")])).unwrap();
    let err = r
        .append_chunk(
            &ToolChunk::new(vec![text_block("t", "x"), url_block("u", "http://b/")])
                .metadata([("k".to_owned(), json!(1))].into_iter().collect()),
        )
        .unwrap_err();
    assert_eq!(
        err.model_text(),
        "Cannot append DataBlock with URL source or different source types: type='url' url=AnyUrl('http://a/') \
         media_type='image/png' vs type='url' url=AnyUrl('http://b/') media_type='image/png'"
    );
    assert_eq!(r.content.len(), 2);
    assert!(r.metadata.is_empty());
    let err = r.append_chunk(&ToolChunk::new(vec![data_block("u", "QQ==", "text/plain", None)])).unwrap_err();
    assert_eq!(
        err.model_text(),
        "Cannot append DataBlock with URL source or different source types: type='url' url=AnyUrl('http://a/') \
         media_type='image/png' vs type='base64' data='QQ==' media_type='text/plain'"
    );
}

/// `Toolkit::call_tool` against 2.0.4's `Toolkit.call_tool` (agentscope 2.0.4; the installed `mcp`
/// names its error `MCPError`, so 2.0.4's `except mcp.shared.exceptions.McpError` clause itself
/// raises `AttributeError` there: recorded with `McpError` aliased to it): text under alternating
/// ids reads `abc`; a URL merge ends the call with an error chunk holding the `ValueError`'s text,
/// no later chunk is read, and the failed chunk's metadata is not merged.
#[tokio::test]
async fn call_tool_merges_chunks_like_2_0_4() {
    let streams = FunctionTool::new("streams", "Streams.", |_: Count, _| async move {
        Ok::<_, ToolError>(vec![
            ToolChunk::new(vec![text_block("out", "a")]),
            ToolChunk::new(vec![text_block("err", "b")]),
            ToolChunk::new(vec![text_block("out", "c")]),
        ])
    });
    let urls = FunctionTool::new("urls", "Streams URLs.", |_: Count, _| async move {
        Ok::<_, ToolError>(vec![
            ToolChunk::new(vec![text_block("t", "before ")]),
            ToolChunk::new(vec![url_block("u", "http://a/")]),
            ToolChunk::new(vec![url_block("u", "http://b/")])
                .metadata([("k".to_owned(), json!(1))].into_iter().collect()),
            ToolChunk::new(vec![text_block("t", "after")]),
        ])
    });
    let toolkit = Toolkit::new().with(streams).with(urls);
    let state = SharedToolState::default();

    let out = run(&toolkit, "streams", r#"{"count": 0}"#, &state).await;
    let r = response(&out);
    assert_eq!(serde_json::to_value(&r.content).unwrap(), json!([{"type": "text", "text": "abc", "id": "out"}]));
    assert_eq!(r.state, ToolResultState::Success);

    let out = run(&toolkit, "urls", r#"{"count": 0}"#, &state).await;
    let message = "Cannot append DataBlock with URL source or different source types: type='url' \
                   url=AnyUrl('http://a/') media_type='image/png' vs type='url' url=AnyUrl('http://b/') \
                   media_type='image/png'";
    assert_eq!(out.len(), 5, "three chunks, the error chunk, the response: {out:?}");
    let ToolOutput::Chunk(error) = &out[3] else { panic!("{out:?}") };
    assert_eq!((error.state, error.content.len()), (ToolResultState::Error, 1));
    let r = response(&out);
    let content = serde_json::to_value(&r.content).unwrap();
    assert_eq!(content[0], json!({"type": "text", "text": "before ", "id": "t"}));
    assert_eq!(
        content[1],
        json!({"type": "data", "id": "u", "source": {"type": "url", "url": "http://a/", "media_type": "image/png"}, "name": null})
    );
    assert_eq!(content[2]["text"], message);
    assert_eq!(content.as_array().unwrap().len(), 3);
    assert_eq!(r.state, ToolResultState::Error);
    assert!(r.metadata.is_empty());
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
