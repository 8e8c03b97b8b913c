//! `ReActConfig` and `ContextConfig` (2.0.4's `agentscope.agent._config`). `ModelConfig` (retries
//! and the fallback model) lives in `as-model` and is re-exported by this crate.

use serde_json::{Value, json};

use crate::error::{AgentError, Result};

/// The default interruption message (returned, never stored).
pub const DEFAULT_INTERRUPTION_MESSAGE: &str = "I notice the interruption. How can I help you?";

/// The default compression prompt (the last user message of the compression call).
pub const DEFAULT_COMPRESSION_PROMPT: &str = "<system-hint>You have been working on the task described above but \
    have not yet completed it. Now write a continuation summary that will allow you to resume work efficiently in \
    a future context window where the conversation history will be replaced with this summary. Your summary should \
    be structured, concise, and actionable.</system-hint>";

/// The default summary template (`{field}` placeholders of [`summary_schema`]).
pub const DEFAULT_SUMMARY_TEMPLATE: &str = "<system-info>Here is a summary of your previous work\n# Task Overview\n\
    {task_overview}\n\n# Current State\n{current_state}\n\n# Important Discoveries\n{important_discoveries}\n\n\
    # Next Steps\n{next_steps}\n\n# Context to Preserve\n{context_to_preserve}</system-info>";

/// Bounds of the reasoning-acting loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReActConfig {
    /// Reasoning-acting rounds per reply (default 20, at least 1).
    pub max_iters: u32,
    /// The final message returned when a reply is interrupted (never stored in the context).
    pub interruption_message: String,
}

impl Default for ReActConfig {
    fn default() -> Self {
        Self { max_iters: 20, interruption_message: DEFAULT_INTERRUPTION_MESSAGE.to_owned() }
    }
}

impl ReActConfig {
    /// Sets `max_iters`.
    pub fn with_max_iters(mut self, n: u32) -> Self {
        self.max_iters = n;
        self
    }

    /// Checks the bounds (`max_iters >= 1`).
    pub fn validate(&self) -> Result<()> {
        if self.max_iters == 0 {
            return Err(AgentError::config("react_config.max_iters must be at least 1"));
        }
        Ok(())
    }
}

/// Context compression and tool-result truncation.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextConfig {
    /// Compress when the estimated input reaches `trigger_ratio × context_size` (`0 < x <= 0.9`; 2.0.4 rejected
    /// 0.9 itself, fixed upstream in 84918a5f6).
    pub trigger_ratio: f64,
    /// Tokens kept uncompressed: `reserve_ratio × context_size` (`0 < x < 0.9`).
    pub reserve_ratio: f64,
    /// The last user message of the compression call.
    pub compression_prompt: String,
    /// Rendered with the structured summary's fields (`{task_overview}`, ...); every placeholder must be a
    /// required field of `summary_schema` ([`ContextConfig::validate`] checks it).
    pub summary_template: String,
    /// The JSON Schema the summary must satisfy.
    pub summary_schema: Value,
    /// Tool results longer than this many tokens are truncated in the context (not in the events).
    pub tool_result_limit: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            trigger_ratio: 0.8,
            reserve_ratio: 0.1,
            compression_prompt: DEFAULT_COMPRESSION_PROMPT.to_owned(),
            summary_template: DEFAULT_SUMMARY_TEMPLATE.to_owned(),
            summary_schema: summary_schema(),
            tool_result_limit: 50_000,
        }
    }
}

impl ContextConfig {
    /// Sets the two ratios.
    pub fn with_ratios(mut self, trigger_ratio: f64, reserve_ratio: f64) -> Self {
        self.trigger_ratio = trigger_ratio;
        self.reserve_ratio = reserve_ratio;
        self
    }

    /// Checks the ratio bounds and that `summary_template` renders every summary of `summary_schema`.
    pub fn validate(&self) -> Result<()> {
        if !(self.trigger_ratio > 0.0 && self.trigger_ratio <= 0.9) {
            return Err(AgentError::config(format!(
                "context_config.trigger_ratio must be in (0, 0.9], got {}",
                self.trigger_ratio
            )));
        }
        if !(self.reserve_ratio > 0.0 && self.reserve_ratio < 0.9) {
            return Err(AgentError::config(format!(
                "context_config.reserve_ratio must be in (0, 0.9), got {}",
                self.reserve_ratio
            )));
        }
        self.validate_summary_template()
    }

    /// `summary_template` with `{key}` replaced by the summary's string fields (Python `str.format`
    /// for the simple case; `{{`/`}}` escape braces). A template [`ContextConfig::validate`] accepts
    /// renders every summary that has the schema's required fields.
    pub fn render_summary(&self, fields: &as_message::JsonMap) -> Result<String> {
        let mut out = String::with_capacity(self.summary_template.len() + 256);
        for piece in template_pieces(&self.summary_template)? {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Field(key) => match fields.get(key) {
                    Some(Value::String(s)) => out.push_str(s),
                    Some(other) => out.push_str(&other.to_string()),
                    None => {
                        return Err(AgentError::compression(format!(
                            "the summary has no field {key:?} used by summary_template"
                        )));
                    }
                },
            }
        }
        Ok(out)
    }

    /// Checks that `summary_template` parses and names only fields the summary schema requires
    /// (so every summary the model layer accepts renders): a mistake there is a configuration
    /// error, found when the agent is built, not at the first compression.
    fn validate_summary_template(&self) -> Result<()> {
        let required: Vec<&str> = self
            .summary_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for piece in template_pieces(&self.summary_template)? {
            if let Piece::Field(key) = piece
                && !required.contains(&key)
            {
                return Err(AgentError::config(format!(
                    "context_config.summary_template uses {{{key}}}, which is not a required field of \
                     context_config.summary_schema (required: {required:?})"
                )));
            }
        }
        Ok(())
    }
}

/// A piece of a summary template: text as it is, or a `{field}` placeholder.
enum Piece<'t> {
    Text(&'t str),
    Field(&'t str),
}

/// Splits a `str.format` template into text and `{field}` placeholders (`{{` and `}}` are braces).
/// Like Python, an unclosed `{`, a single `}` and a `{` inside a placeholder are errors.
fn template_pieces(template: &str) -> Result<Vec<Piece<'_>>> {
    let bad = |what: &str| AgentError::config(format!("context_config.summary_template has {what}"));
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        let (text, tail) = rest.split_at(at);
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        if let Some(after) = tail.strip_prefix("{{") {
            pieces.push(Piece::Text("{"));
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            pieces.push(Piece::Text("}"));
            rest = after;
        } else if let Some(open) = tail.strip_prefix('{') {
            let (key, after) = open.split_once('}').ok_or_else(|| bad("an unclosed '{'"))?;
            if key.contains('{') {
                return Err(bad("a '{' inside a placeholder"));
            }
            pieces.push(Piece::Field(key));
            rest = after;
        } else {
            return Err(bad("a single '}' (write '}}' for a brace)"));
        }
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    Ok(pieces)
}

/// The JSON Schema of 2.0.4's `SummarySchema`: five required string fields.
pub fn summary_schema() -> Value {
    let field = |d: &str| json!({"description": d, "type": "string"});
    json!({
        "properties": {
            "task_overview": field("The user's core request and success criteria, and any clarifications or constraints they specified."),
            "current_state": field("What has been completed so far, files created/modified/analyzed (with paths if relevant), and key outputs or artifacts produced."),
            "important_discoveries": field("Technical constraints or requirements uncovered, decisions made and their rationale, errors encountered and how they were resolved, and what approaches were tried that didn't work (and why)."),
            "next_steps": field("Specific actions needed to complete the task, any blockers or open questions to resolve, and priority order if multiple steps remain."),
            "context_to_preserve": field("User preferences or style requirements, domain-specific details that aren't obvious, and any promises made to the user."),
        },
        "required": ["task_overview", "current_state", "important_discoveries", "next_steps", "context_to_preserve"],
        "type": "object",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_renders_like_the_recorded_one() {
        let fields: as_message::JsonMap = serde_json::from_value(json!({
            "task_overview": "Chat about numbers.",
            "current_state": "Discussed 1..3.",
            "important_discoveries": "None.",
            "next_steps": "Answer the last question.",
            "context_to_preserve": "User likes brevity.",
        }))
        .unwrap();
        let got = ContextConfig::default().render_summary(&fields).unwrap();
        assert_eq!(
            got,
            "<system-info>Here is a summary of your previous work\n# Task Overview\nChat about numbers.\n\n# Current \
             State\nDiscussed 1..3.\n\n# Important Discoveries\nNone.\n\n# Next Steps\nAnswer the last question.\n\n# \
             Context to Preserve\nUser likes brevity.</system-info>"
        );
        let mut partial = fields.clone();
        partial.remove("next_steps");
        assert!(ContextConfig::default().render_summary(&partial).is_err());
    }

    #[test]
    fn placeholders_with_multi_byte_names_render_like_str_format() {
        let fields: as_message::JsonMap = serde_json::from_value(json!({"任务概述": "数字", "é": "x"})).unwrap();
        let cfg = ContextConfig {
            summary_template: "[{任务概述}] après {é}! {{ok}}".into(),
            ..ContextConfig::default()
        };
        // Python: "[{任务概述}] après {é}! {{ok}}".format(**fields) == "[数字] après x! {ok}"
        assert_eq!(cfg.render_summary(&fields).unwrap(), "[数字] après x! {ok}");
    }

    #[test]
    fn ratios_are_checked() {
        assert!(ContextConfig::default().validate().is_ok());
        assert!(ContextConfig::default().with_ratios(0.9, 0.1).validate().is_ok());
        assert!(ContextConfig::default().with_ratios(0.91, 0.1).validate().is_err());
        assert!(ContextConfig::default().with_ratios(0.0, 0.1).validate().is_err());
        assert!(ContextConfig::default().with_ratios(0.5, 0.9).validate().is_err());
        assert!(ReActConfig::default().with_max_iters(0).validate().is_err());
    }
}
