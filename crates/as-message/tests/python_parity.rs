//! Messages read as AgentScope Python 2.0.4 reads them. Every expected value below was produced by
//! the real package (agentscope==2.0.4 on pydantic 2.14.4), not written by hand:
//! `Msg.model_validate_json(input).model_dump_json()`, or `None` where pydantic refuses the input.
//! Every read path must give those bytes (or refuse), and what it writes must read back unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers outside #[test] fns

use as_message::read::{Cursor, fast_or_from_json, msg};
use as_message::{Msg, from_json, from_json_slice, to_json};

/// (input, what Python writes after reading it, or `None` when it refuses it).
type Case = (&'static str, Option<&'static str>);

/// One way of reading a message; `Ok(None)` means "declined, another reader decides".
type Reader = fn(&str) -> Result<Option<Msg>, String>;

const FROM_JSON: (&str, Reader) = ("from_json", |s| from_json::<Msg>(s).map(Some).map_err(|e| e.to_string()));
const FROM_SLICE: (&str, Reader) =
    ("from_json_slice", |s| from_json_slice::<Msg>(s.as_bytes()).map(Some).map_err(|e| e.to_string()));
const FAST: (&str, Reader) = ("fast_or_from_json", |s| fast_or_from_json(s, msg).map(Some).map_err(|e| e.to_string()));
/// The hand-written reader alone: it may decline, but what it reads must be right.
const CURSOR: (&str, Reader) = ("cursor", |s| {
    let mut c = Cursor::new(s);
    Ok(msg(&mut c).filter(|_| c.is_at_end()))
});
/// The serde impls alone (what a caller of `serde_json::from_str` gets).
const SERDE: (&str, Reader) = ("serde_json", |s| serde_json::from_str::<Msg>(s).map(Some).map_err(|e| e.to_string()));

fn check(cases: &[Case], readers: &[(&str, Reader)]) {
    for &(input, want) in cases {
        for &(name, read) in readers {
            match (read(input), want) {
                (Ok(Some(m)), Some(out)) => {
                    assert_eq!(to_json(&m), out, "{name} on {input}");
                    // The derived serialization (any serializer but `to_json`'s) writes the same bytes.
                    assert_eq!(serde_json::to_string(&m).unwrap(), out, "{name}: serde_json::to_string");
                    assert_eq!(to_json(&from_json::<Msg>(out).unwrap()), out, "{name}: written bytes read back");
                }
                (Ok(None), _) | (Err(_), None) => {}
                (Ok(Some(m)), None) => panic!("{name} accepted {input} (Python refuses it): {}", to_json(&m)),
                (Err(e), Some(_)) => panic!("{name} refused {input} (Python reads it): {e}"),
            }
        }
        if want.is_some() {
            assert!(from_json::<Msg>(input).is_ok(), "some reader must read {input}");
        }
    }
}

/// An object in free-form data whose key is one of serde_json's private markers
/// (`$serde_json::private::Number`, `…RawValue`) is an ordinary object to Python; serde_json's `Value`
/// reader took it for a number or raw JSON (or refused the message).
#[test]
fn marker_keys_in_free_form_data_are_ordinary_keys() {
    check(MARKERS, &[FROM_JSON, FROM_SLICE, FAST, CURSOR, SERDE]);
}

const MARKERS: &[Case] = &[
    // Free-form metadata holding objects with serde_json's private marker keys.
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"123"}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"123"}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"abc"}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"abc"}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":[{"$serde_json::private::Number":"1.50"}]},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":[{"$serde_json::private::Number":"1.50"}]},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::RawValue":"{\"a\":1}"}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::RawValue":"{\"a\":1}"}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"1","y":2}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"1","y":2}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"$serde_json::private::Number":"123"},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"$serde_json::private::Number":"123"},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"$serde_json::private::RawValue":"[1,2]"},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"$serde_json::private::RawValue":"[1,2]"},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Not canonical (key order, whitespace): read by serde.
    (
        r#"{"role":"user","name":"u","content":[],"id":"m","created_at":"t","metadata":{ "x" : { "$serde_json::private::Number" : "9e9" } , "y":1E2}}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":{"$serde_json::private::Number":"9e9"},"y":100.0},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Tool result metadata, with `type` first (streamed) and last (buffered).
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"x":{"$serde_json::private::Number":"123"}}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"x":{"$serde_json::private::Number":"123"}}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":"o","state":"success","metadata":{"$serde_json::private::Number":"123"},"type":"tool_result"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"$serde_json::private::Number":"123"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":"o","state":"success","metadata":{"x":{"$serde_json::private::RawValue":"7"}},"type":"tool_result"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"x":{"$serde_json::private::RawValue":"7"}}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Thinking extras.
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","sig":{"$serde_json::private::Number":"123"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","sig":{"$serde_json::private::Number":"123"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","$serde_json::private::Number":"123"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","$serde_json::private::Number":"123"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","id":"c","sig":{"$serde_json::private::Number":"abc"},"type":"thinking"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","sig":{"$serde_json::private::Number":"abc"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Typed fields: an object is not a number, whatever its key.
    (
        r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":{"$serde_json::private::Number":"5"},"output_tokens":1}}"#,
        None,
    ),
    (
        r#"{"name":"a","content":[{"type":"text","text":{"$serde_json::private::RawValue":"\"x\""},"id":"b"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
];

/// Free-form values are read from their text on every path, within pydantic's nesting limit for the
/// whole document (200 levels of non-empty containers): `metadata` (level 2 of a message) holding
/// 198 arrays around a number is read by Python 2.0.4, 199 are refused (measured).
#[test]
fn free_form_nesting_stops_where_python_stops() {
    let doc = |n: usize| {
        let nested = format!("{}1{}", "[".repeat(n), "]".repeat(n));
        format!(r#"{{"name":"u","content":[],"role":"user","id":"m","metadata":{{"a":{nested}}},"created_at":"t"}}"#)
    };
    // On a thread with a tokio worker's stack (2 MiB): the deep reads are recursive.
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            for (n, python_reads) in [(64, true), (130, true), (198, true), (199, false), (100_000, false)] {
                let text = doc(n);
                for (name, read) in [FROM_JSON, FROM_SLICE, FAST, CURSOR] {
                    match read(&text) {
                        Ok(Some(m)) => {
                            assert!(python_reads, "{name} read {n} levels");
                            assert_eq!(
                                to_json(&m),
                                text.replace(
                                    r#""created_at":"t"}"#,
                                    r#""created_at":"t","finished_at":null,"usage":null}"#
                                )
                            );
                        }
                        Ok(None) => assert_eq!(name, "cursor"),
                        Err(e) => {
                            assert!(!python_reads, "{name} refused {n} levels: {e}");
                            assert!(e.contains("recursion limit"), "{name}: {e}");
                        }
                    }
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A repeated key is read as pydantic reads it: the last value counts, in typed objects (a repeated
/// `type` decides the block) as in free-form maps (where it keeps the first key's position, as a
/// Python dict does). serde's derived readers refused a repeated field, or read the first `type`.
/// (`serde_json::from_str` alone still refuses a repeated typed field: only the crate's readers.)
#[test]
fn repeated_keys_keep_the_last_value() {
    check(DUPLICATES, &[FROM_JSON, FROM_SLICE, FAST, CURSOR]);
}

const DUPLICATES: &[Case] = &[
    // A repeated key of a typed object: the last value counts.
    (
        r#"{"name":"a","name":"b","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"b","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":5,"content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"name":"late"}"#,
        Some(
            r#"{"name":"late","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"name":5}"#,
        None,
    ),
    (
        r#"{"name":"a","content":[{"type":"text","text":"x","id":"1"}],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"content":[]}"#,
        Some(
            r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":2,"input_tokens":7}}"#,
        Some(
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":7,"output_tokens":2}}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"role":"user"}"#,
        Some(
            r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"Bash","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null,"role":"user"}"#,
        None,
    ),
    // A repeated `type` decides the block: the last one.
    (
        r#"{"name":"a","content":[{"type":"text","text":"x","id":"1","type":"tool_call","name":"Bash","input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"1","name":"Bash","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","type":"tool_call","id":"1","name":"Bash","input":"{}","type":"text"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"1"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"1","type":"text","text":"x"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"1"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"text","text":"x","id":"1","type":"bogus"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"a","content":[{"type":"bogus","text":"x","id":"1","type":"text"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"1"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"text","text":"o","id":"t","type":"data","source":{"type":"url","url":"https://a.b","media_type":"text/html"}}],"state":"success","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"data","id":"t","source":{"type":"url","url":"https://a.b/","media_type":"text/html"},"name":null}],"state":"success","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"data","id":"d","source":{"type":"base64","data":"AA==","media_type":"image/png","type":"url","url":"https://a.b"},"name":null}],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"d","source":{"type":"url","url":"https://a.b/","media_type":"image/png"},"name":null}],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Repeated keys inside a block.
    (
        r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"Read","input":"{}","state":"pending","suggested_rules":[],"state":"finished","name":"Bash"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"Bash","input":"{}","state":"finished","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"a","sig":1,"id":"c","sig":{"k":2},"thinking":"b"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"b","id":"c","sig":{"k":2}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"a":1,"b":2,"a":3},"metadata":{"z":1,"y":2,"z":0}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"z":0,"y":2}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Free-form maps: the last value in the first position, at every level.
    (
        r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{"a":1,"b":{"x":1,"y":2,"x":[3]},"a":{"c":1}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[],"role":"user","id":"m","metadata":{"a":{"c":1},"b":{"x":[3],"y":2}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
];

/// `NaN`, `Infinity` and `-Infinity` (Python's `json` spellings) in free-form data are read, and
/// written back as `null` as pydantic writes a non-finite float; serde_json refused the document.
/// Other spellings, and integer or string fields holding one, are refused as pydantic refuses them.
#[test]
fn non_finite_floats_in_free_form_data_are_read() {
    check(NON_FINITE, &[FROM_JSON, FROM_SLICE, FAST, CURSOR]);
}

/// A `NaN` in a nullable typed field is refused at that field, the error naming it.
#[test]
fn nan_in_a_nullable_field_is_an_error_naming_it() {
    let text =
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":NaN},"created_at":"t","finished_at":NaN}"#;
    for e in [from_json::<Msg>(text).unwrap_err(), fast_or_from_json(text, msg).unwrap_err()] {
        assert_eq!(e.path(), "finished_at", "{e}");
        assert_eq!(e.message(), "invalid type: NaN, expected a string", "{e}");
    }
}

const NON_FINITE: &[Case] = &[
    // Python's non-finite floats in free-form data are read, and written back as null.
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":NaN,"b":Infinity,"c":-Infinity},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":null,"b":null,"c":null},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":[NaN ,Infinity , -Infinity],"b":{"c":[{"d":NaN}]}},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":[null,null,null],"b":{"c":[{"d":null}]}},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"role":"user","name":"u","content":[],"id":"m","created_at":"t","metadata":{ "x" : NaN }}"#,
        Some(
            r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"x":null},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"ratio":NaN,"max":Infinity}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"ratio":null,"max":null}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":"o","state":"success","metadata":{"ratio":-Infinity},"type":"tool_result"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{"ratio":null}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","score":NaN,"range":[-Infinity,Infinity]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","score":null,"range":[null,null]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Only those three spellings, and not in typed fields that refuse them.
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":-NaN},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":+Infinity},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":nan},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":inf},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":Infinityx},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{"a":- Infinity},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":NaN,"content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    // A NaN is a float to pydantic, not a None: nullable typed fields refuse it as an infinity.
    (
        r#"{"name":"u","content":[],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":NaN,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":NaN}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[{"type":"hint","hint":"h","id":"b","source":NaN}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[{"type":"data","id":"b","source":{"type":"url","url":"http://a.com/x.png","media_type":"image/png"},"name":NaN}],"role":"user","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[{"type":"data","id":"b","source":{"type":"url","url":"http://a.com/x.png","media_type":"image/png"},"name":NaN}],"role":"user","id":"m","metadata":{"x":NaN},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":NaN,"output_tokens":1}}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":Infinity}}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":-Infinity}}"#,
        None,
    ),
];

/// A `Literal` or `StrEnum` field (`role`, a tool call's or result's `state`) is read from its string
/// alone; serde's derived enum reader also took the externally tagged map `{"user":null}`.
#[test]
fn wire_enums_are_read_from_strings_only() {
    check(WIRE_ENUMS, &[FROM_JSON, FROM_SLICE, FAST, CURSOR, SERDE]);
}

const WIRE_ENUMS: &[Case] = &[
    (r#"{"name":"u","content":[],"role":{"user":null},"id":"m","metadata":{},"created_at":"t"}"#, None),
    (
        r#"{"name":"u","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":{"finished":null}}],"role":"assistant","id":"m","metadata":{},"created_at":"t"}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[{"id":"c","name":"n","input":"{}","state":{"finished":null}}],"role":"assistant","id":"m","metadata":{},"created_at":"t"}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":{"success":null}}],"role":"assistant","id":"m","metadata":{},"created_at":"t"}"#,
        None,
    ),
    (
        r#"{"name":"u","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"finished"}],"role":"assistant","id":"m","metadata":{},"created_at":"t"}"#,
        Some(
            r#"{"name":"u","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"finished","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"u","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success"}],"role":"assistant","id":"m","metadata":{},"created_at":"t"}"#,
        Some(
            r#"{"name":"u","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
];

/// A known difference (see the crate docs): pydantic reads integers of any size; `Usage`'s fields are
/// `i64`, so a larger integer is refused with an error naming the field and saying why (it said
/// "expected an integer"). The middle column is what Python writes for the input.
#[test]
fn integers_past_64_bits_are_an_error_naming_the_field() {
    for &((input, python), path) in BIG_INTEGERS {
        assert!(python.is_some(), "Python reads {input}");
        for e in [from_json::<Msg>(input).unwrap_err(), fast_or_from_json(input, msg).unwrap_err()] {
            assert_eq!(e.path(), path, "{e}");
            assert!(e.message().starts_with("integer out of range: "), "{e}");
        }
    }
}

const BIG_INTEGERS: &[(Case, &str)] = &[
    (
        (
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":9223372036854775808,"output_tokens":1}}"#,
            Some(
                r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":9223372036854775808,"output_tokens":1}}"#,
            ),
        ),
        "usage.input_tokens",
    ),
    (
        (
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":-9223372036854775809}}"#,
            Some(
                r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":-9223372036854775809}}"#,
            ),
        ),
        "usage.output_tokens",
    ),
    (
        (
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":"99999999999999999999","output_tokens":1}}"#,
            Some(
                r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":99999999999999999999,"output_tokens":1}}"#,
            ),
        ),
        "usage.input_tokens",
    ),
    (
        (
            r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":" 1_000_000_000_000_000_000_000 "}}"#,
            Some(
                r#"{"name":"a","content":[],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":{"input_tokens":1,"output_tokens":1000000000000000000000}}"#,
            ),
        ),
        "usage.output_tokens",
    ),
];

/// A block without `type` is read as pydantic 2's smart union reads it (pydantic-core's
/// `validate_smart`): of the kinds that validate, the one whose declared fields the object sets most
/// (nested blocks' and sources' fields counted), then the most exact (an enum read from a string is
/// less exact, a URL less still), then the earlier in AgentScope's order. The first kind that
/// validated was taken (`{"text":…,"id":…,"name":…,"input":…}` was a text block, a tool call in
/// Python). Text-or-data items and data sources without `type` are such unions too.
/// Ids Python generated are `generated` in the table, and in the reads.
#[test]
fn untyped_blocks_are_read_as_pydantic_s_smart_union() {
    let generated: as_message::IdFactory = std::sync::Arc::new(|| "generated".to_owned());
    for &(input, want) in UNTYPED.iter().chain(UNTYPED_SAMPLED) {
        for (name, read) in [FROM_JSON, FROM_SLICE, FAST, CURSOR, SERDE] {
            match (as_message::with_id_factory(generated.clone(), || read(input)), want) {
                (Ok(Some(m)), Some(out)) => {
                    assert_eq!(to_json(&m), out, "{name} on {input}");
                    assert_eq!(to_json(&from_json::<Msg>(out).unwrap()), out, "{name}: written bytes read back");
                }
                (Ok(None), _) | (Err(_), None) => {}
                (Ok(Some(m)), None) => panic!("{name} accepted {input} (Python refuses it): {}", to_json(&m)),
                (Err(e), Some(_)) => panic!("{name} refused {input} (Python reads it): {e}"),
            }
        }
    }
}

const UNTYPED: &[Case] = &[
    (
        r#"{"name":"a","content":[{"text":"x","id":"c","name":"n","input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","thinking":"y"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"generated"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"y","foo":1,"bar":2,"text":"x","id":"i"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"i"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","hint":"h"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"generated"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","hint":"h","source":"s"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":"h","id":"generated","source":"s"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":"h","id":"i","source":null,"thinking":"t"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":"h","id":"i","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","id":"c","x":1,"hint":"h"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"thinking","thinking":"t","id":"c","x":1,"hint":"h"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","output":"o"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","output":"o","state":"success"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","output":"o","state":"pending"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","output":"o","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"running","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","output":[],"metadata":{"k":1}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[],"state":"running","metadata":{"k":1}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"t","source":{"url":"https://a.b","media_type":"x"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"x"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"t","id":"c","source":{"data":"A","media_type":"x"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"base64","data":"A","media_type":"x"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"t","id":"c","name":"n","input":"{}","state":"bogus"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"t","id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","id":"c","name":"n","input":"{}","x":1,"y":2}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","hint":"h","source":"s"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":"h","id":"c","source":"s"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","hint":"h","source":"s","text":"t"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":"h","id":"c","source":"s"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Nested blocks' fields count for the block holding them.
    (
        r#"{"name":"a","content":[{"hint":[{"text":"a"}],"text":"x"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"generated"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[],"text":"x"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"text","text":"x","id":"generated"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"text":"a","id":"q"}],"text":"x","id":"i"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"q"}],"id":"i","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"text":"a"},{"text":"b"},{"text":"c"}],"id":"c","name":"n","input":"{}","state":"pending"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"generated"},{"type":"text","text":"b","id":"generated"},{"type":"text","text":"c","id":"generated"}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"text":"a"}],"id":"c","name":"n","input":"{}","state":"pending"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"source":{"url":"https://a.b","media_type":"x"}}],"id":"c","name":"n","input":"{}","state":"pending"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"x"},"name":null}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":[{"text":"a"}],"input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"text","text":"a","id":"generated"}],"state":"running","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":[{"text":"a","id":"x"}],"input":"{}","state":"pending"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"output":[{"text":"a","id":"1"}],"metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","output":"o","source":{"type":"url","url":"https://a.b","media_type":"x"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"url","url":"https://a.b/","media_type":"x"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Ties go to the more exact member (an enum is less exact, a URL less still), then the earlier.
    (
        r#"{"name":"a","content":[{"name":"n","output":"o","state":"success","id":"c","metadata":{},"source":{"data":"A","media_type":"x"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"base64","data":"A","media_type":"x"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"name":"n","output":"o","state":"success","id":"c","metadata":{},"source":{"url":"https://a.b","media_type":"x"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":"o","state":"success","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[],"source":{"data":"A","media_type":"x"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"base64","data":"A","media_type":"x"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[],"source":{"url":"https://a.b","media_type":"x"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // Text-or-data items and data sources without `type` are unions too.
    (
        r#"{"name":"a","content":[{"type":"hint","hint":[{"text":"a","source":{"data":"A","media_type":"x"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"x"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"hint","hint":[{"text":"a","id":"i","source":{"url":"https://a.b","media_type":"x"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"i","source":{"type":"url","url":"https://a.b/","media_type":"x"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"text":5,"source":{"data":"A","media_type":"x"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"x"},"name":null}],"state":"running","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"data","id":"d","source":{"data":"A","url":"https://a.b","media_type":"x"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"d","source":{"type":"base64","data":"A","media_type":"x"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"type":"data","id":"d","source":{"data":5,"url":"https://a.b","media_type":"x"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"d","source":{"type":"url","url":"https://a.b/","media_type":"x"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    // No member validates.
    (
        r#"{"name":"a","content":[{"id":"c","name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"text":5}],"text":6}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        None,
    ),
];

/// Untyped blocks made of random key combinations (every one read differently before), with what
/// Python 2.0.4 writes for them; 9000 such combinations were compared, all alike.
const UNTYPED_SAMPLED: &[Case] = &[
    (
        r#"{"name":"a","content":[{"hint":[],"source":{"data":"A","media_type":"m"},"input":"{}","extra":1,"thinking":"t"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"input":"{}","thinking":"t","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"hint":[{"text":"a"}],"id":"c","source":"s"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"generated"}],"id":"c","source":"s"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"suggested_rules":[],"metadata":{},"input":"{}","thinking":"t","state":"running","hint":[{"source":{"data":"A","media_type":"m"},"name":"f"}],"extra":1}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":"f"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","output":[{"text":"a","source":{"url":"https://a.b","media_type":"m"},"id":"z"}],"thinking":"t","suggested_rules":[],"source":{"url":"https://a.b","media_type":"m","type":"url"},"state":"finished","input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":"h","source":null,"thinking":"t"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":"h","id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"output":[],"metadata":{},"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"hint":[{"text":"a","source":{"data":"A","media_type":"m"}}],"name":"n","thinking":"t","id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","output":[{"text":"a","source":{"data":"A","media_type":"m"}}],"thinking":"t","hint":[{"text":"a","id":"q"},{"text":"b"}],"extra":1}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"q"},{"type":"text","text":"b","id":"generated"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","hint":[{"text":"a","id":"q"},{"text":"b"}],"input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"q"},{"type":"text","text":"b","id":"generated"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","output":[{"text":"a","source":{"data":"A","media_type":"m"}}],"state":"finished","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"metadata":{},"source":{"data":"A","media_type":"m","url":"https://a.b"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","source":{"data":"A","media_type":"m"},"extra":1,"output":[{"text":"a","source":{"data":"A","media_type":"m"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"source":{"url":"https://a.b","media_type":"m"}}],"input":"{}","metadata":{},"text":"x","thinking":"t"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"state":"finished","thinking":"t","name":null,"source":{"url":"https://a.b","media_type":"m","type":"url"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"metadata":{},"input":"{}","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"hint":[{"text":"a","source":{"data":"A","media_type":"m"}}],"id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"name":"n","metadata":{"k":1},"thinking":"t","suggested_rules":[],"hint":"h","id":"c","output":[{"source":{"data":"A","media_type":"m"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"state":"running","metadata":{"k":1}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"suggested_rules":[],"thinking":"t","text":"x","source":{"url":"https://a.b","media_type":"m","type":"url"},"metadata":{"k":1}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"metadata":{},"text":"x","extra":1,"name":null,"source":{"data":"A","media_type":"m","url":"https://a.b"},"id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"input":"{}","state":"success","extra":1,"text":"x","hint":[{"source":{"data":"A","media_type":"m"},"name":"f"}],"id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":"f"}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"state":"pending","hint":[{"text":"a","source":{"data":"A","media_type":"m"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"name":null,"source":{"url":"https://a.b","media_type":"m","type":"url"},"state":"success","thinking":"t","id":"c","hint":[{"text":"a","source":{"data":"A","media_type":"m"}}],"input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"source":{"url":"https://a.b","media_type":"m","type":"url"},"thinking":"t","hint":[{"text":"a"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"state":"pending","thinking":"t","suggested_rules":[],"input":"{}","output":[{"text":"a","source":{"url":"https://a.b","media_type":"m"},"id":"z"}],"hint":[{"text":"a"}],"extra":1}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"generated"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","name":"n","thinking":"t","state":"running","hint":[{"source":{"data":"A","media_type":"m"},"name":"f"}],"extra":1}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":"f"}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"name":"n","hint":[{"text":"a","source":{"data":"A","media_type":"m"}}],"extra":1}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"state":"running","name":"n","extra":1,"source":{"url":"https://a.b","media_type":"m","type":"url"},"text":"x","hint":"h"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","hint":[{"text":"a","source":{"data":"A","media_type":"m"}}],"metadata":{"k":1},"text":"x","name":null,"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"source":{"data":"A","media_type":"m","url":"https://a.b"},"input":"{}","hint":"h","id":"c","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"text":"x"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"text":"a"}],"text":"x","name":"n","output":[{"text":"a"}],"input":"{}","source":{"data":"A","media_type":"m","type":"base64"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"input":"{}","thinking":"t","source":null,"hint":[],"extra":1,"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","state":"success","hint":[{"text":"a","source":{"data":"A","media_type":"m"}}],"text":"x","metadata":{"k":1},"name":null,"input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"id":"c","name":"n","output":[],"thinking":"t","state":"finished","input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"finished","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"state":"finished","output":[{"text":"a","source":{"url":"https://a.b","media_type":"m"},"id":"z"}],"hint":[{"source":{"url":"https://a.b","media_type":"m"}}],"extra":1,"metadata":{},"thinking":"t","text":"x"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","metadata":{"k":1},"output":[{"source":{"data":"A","media_type":"m"}}],"source":{"url":"https://a.b","media_type":"m"},"extra":1,"hint":"h","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"text":"a"}],"thinking":"t","state":"success"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"generated"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"state":"pending","source":{"data":"A","media_type":"m"},"thinking":"t","extra":1,"text":"x","input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"suggested_rules":[],"metadata":{},"text":"x","hint":[{"text":"a"}],"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"generated"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"output":[],"id":"c","state":"running","input":"{}","thinking":"t","source":{"url":"https://a.b","media_type":"m","type":"url"},"extra":1}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"source":{"data":"A","media_type":"m"},"name":"f"}],"thinking":"t","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":"f"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","metadata":{"k":1},"input":"{}","hint":[{"source":{"url":"https://a.b","media_type":"m"}}],"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"thinking":"t","state":"success"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"state":"pending","text":"x","suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"metadata":{"k":1},"hint":[{"source":{"url":"https://a.b","media_type":"m"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"input":"{}","extra":1,"name":"n","text":"x","id":"c","output":"o"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"name":"n","source":{"data":"A","media_type":"m","url":"https://a.b"},"input":"{}","thinking":"t","id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"base64","data":"A","media_type":"m"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"source":null,"id":"c","extra":1,"thinking":"t","output":[],"input":"{}","hint":"h"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":"h","id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"state":"finished","metadata":{"k":1},"thinking":"t","text":"x","hint":[{"text":"a"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"generated"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"text":"x","id":"c","name":"n","extra":1,"input":"{}"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_call","id":"c","name":"n","input":"{}","state":"pending","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"suggested_rules":[],"metadata":{},"source":{"data":"A","media_type":"m","url":"https://a.b"},"id":"c","state":"success","input":"{}","thinking":"t"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"extra":1,"text":"x","name":"n","thinking":"t","id":"c","source":{"url":"https://a.b","media_type":"m","type":"url"},"hint":[{"text":"a","source":{"data":"A","media_type":"m"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":"n"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"output":[{"text":"a"}],"text":"x","source":{"data":"A","media_type":"m","type":"base64"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"output":[{"text":"a","source":{"url":"https://a.b","media_type":"m"},"id":"z"}],"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"metadata":{"k":1},"name":"n","hint":[{"text":"a"}],"extra":1,"id":"c"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"data","id":"z","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"state":"running","metadata":{"k":1}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","output":[{"text":"a"}],"input":"{}","thinking":"t","hint":[{"source":{"data":"A","media_type":"m"},"name":"f"}],"metadata":{"k":1},"extra":1}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":"f"}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"input":"{}","text":"x","thinking":"t","name":null,"source":{"data":"A","media_type":"m","url":"https://a.b"},"extra":1,"state":"success"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"output":[],"hint":[{"text":"a"}],"id":"c","metadata":{"k":1},"extra":1,"text":"x","suggested_rules":[]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"generated"}],"id":"c","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"metadata":{"k":1},"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}],"name":"n","extra":1,"text":"x","thinking":"t","hint":[{"text":"a","id":"q"},{"text":"b"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"text","text":"a","id":"q"},{"type":"text","text":"b","id":"generated"}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"id":"c","state":"running","input":"{}","thinking":"t","source":{"data":"A","media_type":"m","type":"base64"},"output":[{"source":{"data":"A","media_type":"m"}}],"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"c","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"text":"a","source":{"data":"A","media_type":"m"}}],"name":null,"output":[{"text":"a","source":{"url":"https://a.b","media_type":"m"},"id":"z"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"input":"{}","hint":[{"text":"a","source":{"data":"A","media_type":"m"}}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"thinking":"t","source":{"data":"A","media_type":"m","url":"https://a.b"},"output":"o","state":"running"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"source":{"url":"https://a.b","media_type":"m"}}],"state":"pending","metadata":{"k":1},"text":"x","name":"n","input":"{}","extra":1}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"hint","hint":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"id":"generated","source":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"name":"n","output":[{"text":"a","source":{"url":"https://a.b","media_type":"m"},"id":"z"}],"source":{"url":"https://a.b","media_type":"m","type":"url"},"id":"c","thinking":"t"}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"tool_result","id":"c","name":"n","output":[{"type":"data","id":"z","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"state":"running","metadata":{}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"hint":[{"text":"a"}],"name":null,"thinking":"t","state":"running","source":{"data":"A","media_type":"m","url":"https://a.b"}}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"base64","data":"A","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
    (
        r#"{"name":"a","content":[{"source":{"url":"https://a.b","media_type":"m","type":"url"},"thinking":"t","hint":[{"source":{"url":"https://a.b","media_type":"m"}}],"suggested_rules":[{"tool_name":"a","rule_content":null,"behavior":"allow","source":"s"}]}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        Some(
            r#"{"name":"a","content":[{"type":"data","id":"generated","source":{"type":"url","url":"https://a.b/","media_type":"m"},"name":null}],"role":"assistant","id":"m","metadata":{},"created_at":"t","finished_at":null,"usage":null}"#,
        ),
    ),
];
