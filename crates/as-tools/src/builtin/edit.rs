//! `Edit`: exact string replacement in a file read before (and unchanged since).

use std::path::Path;

use as_message::{JsonMap, JsonValue, PermissionBehavior, PermissionRule};
use schemars::JsonSchema;
use serde::Deserialize;

use super::files::mtime;
use super::write::file_change_permission;
use super::{dir_suggestion, split_keep_ends};
use crate::context::ToolCallContext;
use crate::error::ToolError;
use crate::permission::{PermissionCheckContext, PermissionDecision};
use crate::response::{ToolChunk, ToolStream};
use crate::tool::Tool;

const DESCRIPTION: &str = "Performs exact string replacements in files.

Usage:
- You must use your `Read` tool at least once in the conversation
  before editing. This tool will error if you attempt an edit without
  reading the file.
- When editing text from Read tool output, ensure you preserve the
  exact indentation (tabs/spaces) as it appears AFTER the line number
  prefix. The line number prefix format is: line number + tab.
  Everything after that is the actual file content to match. Never
  include any part of the line number prefix in the old_string or
  new_string.
- ALWAYS prefer editing existing files in the codebase. NEVER write
  new files unless explicitly required.
- Only use emojis if the user explicitly requests it. Avoid adding
  emojis to files unless asked.
- The edit will FAIL if `old_string` is not unique in the file.";

/// Arguments of `Edit`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct EditArgs {
    /// The absolute path to the file to edit.
    pub file_path: String,
    /// The exact string to replace. Must match exactly including whitespace and indentation.
    pub old_string: String,
    /// The string to replace old_string with.
    pub new_string: String,
    /// If true, replace all occurrences. If false (default), only replace if there is exactly one occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// The `Edit` tool.
#[derive(Clone, Copy, Debug, Default)]
pub struct EditTool;

impl Tool for EditTool {
    type Args = EditArgs;

    fn name(&self) -> &str {
        "Edit"
    }
    fn description(&self) -> String {
        DESCRIPTION.to_owned()
    }
    fn parameters(&self) -> JsonValue {
        crate::without_description(crate::parameters_schema::<EditArgs>())
    }
    fn check_permissions(&self, a: &EditArgs, ctx: &PermissionCheckContext<'_>) -> PermissionDecision {
        file_change_permission("Edit", "editing", &a.file_path, ctx)
    }
    fn match_rule(&self, rule: &str, list: PermissionBehavior, a: &EditArgs, ctx: &PermissionCheckContext<'_>) -> bool {
        super::file_rule_matches(&a.file_path, rule, list, ctx)
    }
    fn generate_suggestions(&self, a: &EditArgs, _: &PermissionCheckContext<'_>) -> Vec<PermissionRule> {
        dir_suggestion("Edit", &a.file_path)
    }

    async fn call(&self, a: EditArgs, ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        let path = Path::new(&a.file_path);
        if !path.is_absolute() {
            return Err(ToolError::execution(format!(
                "Error: file_path must be an absolute path, got: {}",
                a.file_path
            )));
        }
        if !tokio::fs::try_exists(path).await.unwrap_or(false) {
            return Err(ToolError::execution(format!("Error: File not found: {}", a.file_path)));
        }
        if a.old_string == a.new_string {
            return Err(ToolError::execution("Error: old_string and new_string are identical. No changes to make."));
        }
        // The cache entry exists only if the file was read and its mtime is unchanged since:
        // an edit always applies to the version the model has seen.
        let Some(content) = ctx.state.with(|s| s.tool_context.get_cache(&a.file_path).map(|e| e.lines.concat())) else {
            return Err(ToolError::execution("Error: To edit a file, you must first read it using the Read tool."));
        };
        // The cache says the mtime is unchanged, but two writes within one clock tick (or a tool that
        // restores the mtime) keep it: the edit applies only to the very text that was read. This is
        // checked before old_string is looked for, so a stale read is reported as such and not as
        // "not found" in the old text.
        let on_disk = super::read_at_most_async(path, super::read::MAX_READ_BYTES)
            .await
            .map_err(|e| ToolError::execution(format!("Error reading file: {e}")).with_source(e))?
            .ok_or_else(|| super::read::too_large(&a.file_path, None))?;
        if super::decode_text(&on_disk) != content {
            // The stale entry goes, or the next Read would serve it again (its mtime still
            // matches) and every later Edit would fail the same way.
            ctx.state.with(|s| s.tool_context.read_file_cache.retain(|e| e.file_path != a.file_path));
            return Err(ToolError::execution(format!(
                "Error: {} has changed since it was read. Read it again before editing.",
                a.file_path
            )));
        }
        let occurrences = content.matches(&a.old_string).count();
        if occurrences == 0 {
            return Err(ToolError::execution(format!("Error: old_string not found in {}", a.file_path)));
        }
        if occurrences > 1 && !a.replace_all {
            return Err(ToolError::execution(format!(
                "Error: old_string appears {occurrences} times in {}. Set replace_all=true to replace all occurrences, \
                 or make old_string more specific.",
                a.file_path
            )));
        }
        let updated = if a.replace_all {
            content.replace(&a.old_string, &a.new_string)
        } else {
            content.replacen(&a.old_string, &a.new_string, 1)
        };
        // The cached text is decoded (invalid UTF-8 replaced, line ends made `\n`): writing it back
        // would change every byte the decoding changed. Refuse a file that is not UTF-8, and keep
        // the `\r\n` line ends of a file that uses only those.
        let Ok(on_disk) = std::str::from_utf8(&on_disk) else {
            return Err(ToolError::execution(format!(
                "Error: {} is not UTF-8 text; editing it would change bytes outside the edit. Use Bash instead.",
                a.file_path
            )));
        };
        let crlf = on_disk.contains("\r\n") && on_disk.matches('\n').count() == on_disk.matches("\r\n").count();
        if !crlf && on_disk.contains('\r') {
            return Err(ToolError::execution(format!(
                "Error: {} mixes line endings (\\r, \\r\\n and \\n); editing it would change them all. Use Bash \
                 instead.",
                a.file_path
            )));
        }
        let bytes = if crlf { updated.replace('\n', "\r\n") } else { updated.clone() };
        super::write_file_atomically(path, bytes.into_bytes())
            .await
            .map_err(|e| ToolError::execution(format!("Error writing file: {e}")).with_source(e))?;
        if let Some(m) = mtime(path) {
            ctx.state.with(|s| s.tool_context.cache_file_with_mtime(&a.file_path, split_keep_ends(&updated), m));
        }
        let msg = if a.replace_all { format!("all {occurrences} occurrences") } else { "1 occurrence".to_owned() };
        let mut meta = JsonMap::new();
        meta.insert("file_path".into(), JsonValue::String(a.file_path.clone()));
        meta.insert("occurrences".into(), JsonValue::from(if a.replace_all { occurrences } else { 1 }));
        Ok(ToolStream::once(ToolChunk::text(format!("Successfully replaced {msg} in {}", a.file_path)).metadata(meta)))
    }
}
