//! Parameter schemas: `schemars` output reshaped to what pydantic (and so 2.0.4) emits.
//!
//! * inlined sub-schemas, no `$schema`, no `title` anywhere (2.0.4 `_remove_title_field`);
//! * `Option<T>` as `anyOf: [T, {"type": "null"}]` (pydantic), not `type: [T, "null"]`;
//! * integer `format`s dropped (pydantic has none);
//! * unit enums (`oneOf` of documented `const`s) as `{"enum": [...], "type": "string"}`, like a
//!   `Literal[...]` (inside `Option`, only the field's description is kept);
//! * keys sorted as pydantic's `GenerateJsonSchema.sort` does: every object's keys
//!   alphabetically, except the children of `properties` (declaration order) and `default`
//!   values (kept as is).

use as_message::{JsonMap, JsonValue};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;

/// The pydantic-shaped parameter schema of `T`.
///
/// ```
/// /// The params of the get task.
/// #[derive(schemars::JsonSchema)]
/// struct GetArgs {
///     /// The ID of the task to retrieve
///     task_id: String,
/// }
/// let s = as_tools::parameters_schema::<GetArgs>();
/// assert_eq!(
///     s.to_string(),
///     r#"{"description":"The params of the get task.","properties":{"task_id":{"description":"The ID of the task to retrieve","type":"string"}},"required":["task_id"],"type":"object"}"#
/// );
/// ```
pub fn parameters_schema<T: JsonSchema>() -> JsonValue {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let generator = settings.into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let JsonValue::Object(map) = &mut value {
        map.remove("$schema");
        if !map.contains_key("properties") && map.get("type").and_then(|t| t.as_str()) == Some("object") {
            map.insert("properties".into(), JsonValue::Object(JsonMap::new()));
        }
    }
    pydantic_shape(value)
}

/// `schema` without its top-level `description` (2.0.4's built-in tools have hand-written
/// schemas with none; the Rust argument types still carry doc comments).
pub fn without_description(mut schema: JsonValue) -> JsonValue {
    if let JsonValue::Object(map) = &mut schema {
        map.shift_remove("description");
    }
    schema
}

/// Applies the reshaping of this module to an existing schema (e.g. one built at run time).
pub fn pydantic_shape(value: JsonValue) -> JsonValue {
    let value = reshape(value);
    sort_keys(value)
}

fn reshape(value: JsonValue) -> JsonValue {
    match value {
        JsonValue::Object(map) => {
            let mut out = JsonMap::new();
            for (k, v) in map {
                match k.as_str() {
                    "title" => continue,
                    "format" if is_numeric_format(&v) => continue,
                    "properties" | "$defs" | "patternProperties" => {
                        // children are named schemas: keep their keys (a property may be named "title")
                        let JsonValue::Object(children) = v else {
                            out.insert(k, v);
                            continue;
                        };
                        let children = children.into_iter().map(|(name, s)| (name, reshape(s))).collect();
                        out.insert(k, JsonValue::Object(children));
                    }
                    "default" | "const" | "examples" | "enum" => {
                        out.insert(k, v);
                    }
                    _ => {
                        out.insert(k, reshape(v));
                    }
                }
            }
            drop_inner_descriptions(nullable_to_any_of(literal_enum(out)))
        }
        JsonValue::Array(items) => JsonValue::Array(items.into_iter().map(reshape).collect()),
        other => other,
    }
}

/// A documented Rust unit enum comes out as `oneOf` of `{const, type, description}`; pydantic's
/// `Literal[...]` is `{"enum": [...], "type": "string"}`. Converts, dropping the per-variant
/// descriptions (the enum's own description is dropped later when it sits inside an `anyOf`
/// whose owner has one, see [`drop_inner_descriptions`]).
fn literal_enum(mut map: JsonMap) -> JsonMap {
    let Some(JsonValue::Array(items)) = map.get("oneOf") else { return map };
    let mut values = Vec::new();
    let mut ty: Option<JsonValue> = None;
    for item in items {
        let JsonValue::Object(o) = item else { return map };
        if o.keys().any(|k| !matches!(k.as_str(), "const" | "type" | "description")) {
            return map;
        }
        let Some(c) = o.get("const") else { return map };
        match (&ty, o.get("type")) {
            (_, None) => return map,
            (None, Some(t)) => ty = Some(t.clone()),
            (Some(a), Some(b)) if a != b => return map,
            _ => {}
        }
        values.push(c.clone());
    }
    map.remove("oneOf");
    map.insert("enum".into(), JsonValue::Array(values));
    if let Some(t) = ty {
        map.insert("type".into(), t);
    }
    map
}

/// In `{"anyOf": [...], "description": d}` the items carry no description of their own (the
/// field's description is on the outside, as pydantic writes `Optional[Literal[...]]`).
fn drop_inner_descriptions(value: JsonValue) -> JsonValue {
    let JsonValue::Object(mut map) = value else { return value };
    if map.contains_key("description")
        && let Some(JsonValue::Array(items)) = map.get_mut("anyOf")
    {
        for item in items.iter_mut() {
            if let JsonValue::Object(o) = item {
                o.remove("description");
            }
        }
    }
    JsonValue::Object(map)
}

fn is_numeric_format(v: &JsonValue) -> bool {
    matches!(
        v.as_str(),
        Some(
            "int8"
                | "int16"
                | "int32"
                | "int64"
                | "int128"
                | "uint8"
                | "uint16"
                | "uint32"
                | "uint64"
                | "uint128"
                | "uint"
                | "int"
                | "float"
                | "double"
        )
    )
}

/// `{"type": ["string", "null"], ...}` becomes `{"anyOf": [{"type": "string", ...}, {"type": "null"}]}`,
/// keeping `default`/`description` (and other annotations) on the outer object as pydantic does.
fn nullable_to_any_of(mut map: JsonMap) -> JsonValue {
    let Some(JsonValue::Array(types)) = map.get("type") else { return JsonValue::Object(map) };
    let non_null: Vec<JsonValue> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
    if non_null.len() == types.len() || non_null.len() != 1 {
        return JsonValue::Object(map);
    }
    const OUTER: [&str; 4] = ["default", "description", "examples", "deprecated"];
    let mut outer = JsonMap::new();
    let mut inner = JsonMap::new();
    for (k, v) in std::mem::take(&mut map) {
        if OUTER.contains(&k.as_str()) {
            outer.insert(k, v);
        } else if k == "type" {
            inner.insert(k, non_null[0].clone());
        } else if k == "enum" {
            let JsonValue::Array(vals) = v else { continue };
            inner.insert(k, JsonValue::Array(vals.into_iter().filter(|x| !x.is_null()).collect()));
        } else {
            inner.insert(k, v);
        }
    }
    let mut null = JsonMap::new();
    null.insert("type".into(), JsonValue::String("null".into()));
    outer.insert("anyOf".into(), JsonValue::Array(vec![JsonValue::Object(inner), JsonValue::Object(null)]));
    JsonValue::Object(outer)
}

/// Sorts a schema object's keys; `properties`/`$defs` maps keep their order but their children are
/// schemas again; `default`, `const`, `enum` and `examples` values are left untouched.
fn sort_keys(value: JsonValue) -> JsonValue {
    match value {
        JsonValue::Object(map) => {
            let mut entries: Vec<(String, JsonValue)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = JsonMap::new();
            for (k, v) in entries {
                let v = match (k.as_str(), v) {
                    ("default" | "const" | "enum" | "examples", v) => v,
                    ("properties" | "$defs" | "patternProperties", JsonValue::Object(children)) => {
                        JsonValue::Object(children.into_iter().map(|(n, s)| (n, sort_keys(s))).collect())
                    }
                    (_, v) => sort_keys(v),
                };
                out.insert(k, v);
            }
            JsonValue::Object(out)
        }
        JsonValue::Array(items) => JsonValue::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}
