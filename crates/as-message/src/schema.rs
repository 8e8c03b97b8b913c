//! Helpers for the derived JSON Schemas of wire types.

/// Removes `default` from a field's schema. Use it on fields whose default is generated at read
/// time (a fresh id, the current time), so the schema stays deterministic:
/// `#[schemars(transform = as_message::schema::generated_default)]`.
///
/// ```
/// #[derive(schemars::JsonSchema, serde::Deserialize)]
/// struct T {
///     #[serde(default = "as_message::generate_id")]
///     #[schemars(transform = as_message::schema::generated_default)]
///     id: String,
/// }
/// let s = schemars::schema_for!(T).to_value();
/// assert!(s["properties"]["id"].get("default").is_none());
/// ```
pub fn generated_default(schema: &mut schemars::Schema) {
    schema.remove("default");
    if schema.get("description").is_none() {
        schema.insert("description".into(), "Generated when absent.".into());
    }
}

/// Makes an internally tagged union (`#[serde(tag = "type")]`) read like pydantic's: `anyOf`
/// instead of `oneOf`, and in each branch the tag is optional, with its value as the `default`
/// (the reader accepts a block without `type` by trying each kind, as AgentScope 2.0.4 does).
/// Use on the enum: `#[schemars(transform = as_message::schema::optional_tag)]`.
///
/// ```
/// #[derive(schemars::JsonSchema, serde::Serialize)]
/// #[serde(tag = "type", rename_all = "snake_case")]
/// #[schemars(transform = as_message::schema::optional_tag)]
/// enum Shape { Circle { r: f64 }, Square { side: f64 } }
/// let s = schemars::schema_for!(Shape).to_value();
/// let first = &s["anyOf"][0];
/// assert_eq!(first["properties"]["type"]["default"], "circle");
/// assert!(!first["required"].as_array().unwrap().iter().any(|r| r == "type"));
/// ```
pub fn optional_tag(schema: &mut schemars::Schema) {
    let Some(branches) = schema.remove("oneOf") else { return };
    let mut branches = branches;
    if let Some(list) = branches.as_array_mut() {
        for branch in list.iter_mut().filter_map(serde_json::Value::as_object_mut) {
            let tag = branch.get("properties").and_then(|p| p.get("type")).and_then(|t| t.get("const")).cloned();
            if let Some(tag) = tag
                && let Some(t) =
                    branch.get_mut("properties").and_then(|p| p.get_mut("type")).and_then(|t| t.as_object_mut())
            {
                t.insert("default".into(), tag);
            }
            if let Some(required) = branch.get_mut("required").and_then(|r| r.as_array_mut()) {
                required.retain(|r| r != "type");
                if required.is_empty() {
                    branch.remove("required");
                }
            }
        }
    }
    schema.insert("anyOf".into(), branches);
}
