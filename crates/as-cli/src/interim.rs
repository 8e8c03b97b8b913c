//! Interim adapters until the storage engineer's `storage_url` and the tools engineer's built-ins land.

use as_storage::SharedStorage;

use crate::exit::{CliError, CliResult, ExitKind};

/// Opens `memory` or `sqlite:PATH`.
pub(crate) async fn open(url: Option<&str>) -> CliResult<SharedStorage> {
    let url = url.unwrap_or("sqlite:agentscope.db");
    let storage: SharedStorage = if url == "memory" {
        std::sync::Arc::new(as_storage::InMemoryStorage::new())
    } else if let Some(path) = url.strip_prefix("sqlite:") {
        std::sync::Arc::new(as_storage_sqlite::SqliteStorage::new(path))
    } else {
        return Err(CliError::new(ExitKind::Usage, format!("unsupported --storage {url:?}")));
    };
    storage.open().await.map_err(crate::cmd::chat::storage_error)?;
    Ok(storage)
}

/// `Write` arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WriteArgs {
    /// The file to write.
    file_path: String,
    /// The whole new content.
    content: String,
}

/// `Read` arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ReadArgs {
    /// The file to read.
    file_path: String,
}

/// Built-in tools: Write and Read.
pub(crate) fn builtin_toolkit() -> as_tools::Toolkit {
    use as_tools::{FunctionTool, ToolError};
    as_tools::Toolkit::new()
        .with(FunctionTool::new("Write", "Write a file.", |a: WriteArgs, _| async move {
            std::fs::write(&a.file_path, a.content.as_bytes()).map_err(|e| ToolError::execution(e.to_string()))?;
            Ok::<_, ToolError>(format!("wrote {}", a.file_path))
        }))
        .with(
            FunctionTool::new("Read", "Read a file.", |a: ReadArgs, _| async move {
                std::fs::read_to_string(&a.file_path).map_err(|e| ToolError::execution(e.to_string()))
            })
            .read_only(true),
        )
}
