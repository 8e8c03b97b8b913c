//! [`ConstantModel`]: an offline [`ChatModel`] answering the same text at once (feature `test-utils`).

use as_message::{ContentBlock, Msg};
use async_trait::async_trait;

use crate::error::Result;
use crate::model::ChatModel;
use crate::request::ChatRequest;
use crate::request::ToolSchema;
use crate::response::ChatResponse;
use crate::stream::ChatStream;
use crate::tokens::HeuristicTokenCounter;

/// A model that answers every request with the same text, at once and without I/O.
///
/// Unlike [`ScriptedModel`](crate::ScriptedModel) it never runs out of turns and records nothing, which makes it
/// the model of choice for benchmarks measuring everything around the model call.
///
/// ```
/// use as_model::{ChatModel, ChatRequest, ConstantModel};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let model = ConstantModel::new("constant", "Sure.");
/// assert_eq!(model.model_name(), "constant");
/// let response = model.call(ChatRequest::new(vec![])).await.unwrap();
/// assert_eq!(response.text(), "Sure.");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct ConstantModel {
    name: String,
    text: String,
}

impl ConstantModel {
    /// A model named `name` answering `text` to every request.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self { name: name.into(), text: text.into() }
    }

    /// The text every request is answered with.
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[async_trait]
impl ChatModel for ConstantModel {
    fn model_name(&self) -> &str {
        &self.name
    }

    fn count_tokens_of_parts(&self, parts: &[&[Msg]], tools: &[ToolSchema]) -> usize {
        HeuristicTokenCounter.count_parts(parts, tools)
    }
    fn provider(&self) -> &'static str {
        "constant"
    }

    async fn stream(&self, _request: ChatRequest) -> Result<ChatStream> {
        Ok(ChatStream::from_response(ChatResponse::new(vec![ContentBlock::text(self.text.clone())])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_the_configured_text_every_time() {
        let model = ConstantModel::new("m", "hello");
        assert_eq!(model.model_name(), "m");
        assert_eq!(model.provider(), "constant");
        for _ in 0..3 {
            let response = model.call(ChatRequest::new(vec![])).await.unwrap();
            assert_eq!(response.text(), "hello");
        }
    }
}
