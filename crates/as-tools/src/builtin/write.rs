//! `Write`: create or overwrite a file (an existing file must have been read first).

use std::path::Path;

use as_message::{JsonMap, JsonValue, PermissionBehavior, PermissionMode, PermissionRule};
use schemars::JsonSchema;
use serde::Deserialize;

use super::files::mtime;
use super::{decode_text, dir_suggestion, split_keep_ends};
use crate::context::ToolCallContext;
use crate::error::ToolError;
use crate::permission::{PermissionCheckContext, PermissionDecision};
use crate::response::{ToolChunk, ToolStream};
use crate::tool::Tool;

const DESCRIPTION: &str = "Writes a file to the local filesystem.

Usage:
- This tool will overwrite the existing file if there is one at the provided path.
- If this is an existing file, you MUST use the Read tool first to read the file's contents. This tool will fail if you did not read the file first.
- ALWAYS prefer editing existing files in the codebase. NEVER write new files unless explicitly required.
- NEVER proactively create documentation files (*.md) or README files. Only create documentation files if explicitly requested by the User.
- Only use emojis if the user explicitly requests it. Avoid writing emojis to files unless asked.";

/// Arguments of `Write`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// The absolute path to the file to write (must be absolute, not relative)
    pub file_path: String,
    /// The content to write to the file
    pub content: String,
}

/// The `Write` tool.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteTool;

/// Write/Edit permission logic shared by both tools (2.0.4): a sensitive path is a
/// bypass-immune ASK; in `accept_edits` a path inside the working directories is allowed;
/// anything else passes through to the rules.
pub(crate) fn file_change_permission(
    verb: &str,
    gerund: &str,
    file_path: &str,
    ctx: &PermissionCheckContext<'_>,
) -> PermissionDecision {
    if file_path.is_empty() {
        return PermissionDecision::passthrough("No file path provided");
    }
    if super::is_dangerous_target(file_path, ctx) {
        return PermissionDecision::ask(format!("Permission required: {verb} operation on sensitive file {file_path}"))
            .reason("Safety check: dangerous file or directory")
            .immune();
    }
    if ctx.mode() == PermissionMode::AcceptEdits && ctx.is_in_working_dirs(file_path) {
        return PermissionDecision::allow(format!(
            "Permission granted for {gerund} {file_path} (in working directory)"
        ))
        .reason("File is in working directory and not a dangerous path");
    }
    PermissionDecision::passthrough("")
}

impl Tool for WriteTool {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "Write"
    }
    fn description(&self) -> String {
        DESCRIPTION.to_owned()
    }
    fn parameters(&self) -> JsonValue {
        crate::without_description(crate::parameters_schema::<WriteArgs>())
    }
    fn check_permissions(&self, a: &WriteArgs, ctx: &PermissionCheckContext<'_>) -> PermissionDecision {
        file_change_permission("Write", "writing", &a.file_path, ctx)
    }
    fn match_rule(
        &self,
        rule: &str,
        list: PermissionBehavior,
        a: &WriteArgs,
        ctx: &PermissionCheckContext<'_>,
    ) -> bool {
        super::file_rule_matches(&a.file_path, rule, list, ctx)
    }
    fn generate_suggestions(&self, a: &WriteArgs, _: &PermissionCheckContext<'_>) -> Vec<PermissionRule> {
        dir_suggestion("Write", &a.file_path)
    }

    async fn call(&self, a: WriteArgs, ctx: ToolCallContext) -> Result<ToolStream, ToolError> {
        let path = Path::new(&a.file_path);
        if !path.is_absolute() {
            return Err(ToolError::execution(format!(
                "Error: file_path must be an absolute path, got: {}",
                a.file_path
            )));
        }
        let existed = tokio::fs::try_exists(path).await.unwrap_or(false);
        if existed {
            let cached = ctx.state.with(|s| s.tool_context.get_cache(&a.file_path).is_some());
            if !cached {
                return Err(ToolError::execution(format!(
                    "Error: File {} exists but has not been read yet. You must read the file first before writing to it.",
                    a.file_path
                )));
            }
        }
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| ToolError::execution(format!("Error writing file: {e}")).with_source(e))?;
        }
        super::write_file_atomically(path, a.content.as_bytes().to_vec())
            .await
            .map_err(|e| ToolError::execution(format!("Error writing file: {e}")).with_source(e))?;
        if let Some(m) = mtime(path) {
            let lines = split_keep_ends(&decode_text(a.content.as_bytes()));
            ctx.state.with(|s| s.tool_context.cache_file_with_mtime(&a.file_path, lines, m));
        }
        // 2.0.4 counts `len(content.split("\n"))`: a trailing newline starts one more (empty) line.
        let line_count = a.content.split('\n').count();
        let mut meta = JsonMap::new();
        meta.insert("file_path".into(), JsonValue::String(a.file_path.clone()));
        meta.insert("occurrences".into(), JsonValue::from(1));
        Ok(ToolStream::once(
            ToolChunk::text(format!("The file {} has been written successfully ({line_count} lines).", a.file_path))
                .metadata(meta),
        ))
    }
}
