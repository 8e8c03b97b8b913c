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
