//! Rendering a reply's event stream for a person: the answer as plain text, thinking and tool
//! activity marked apart from it (dim/cyan/yellow on a terminal, bracketed labels when piped).

use std::io::Write;

use as_agent::{AgentEvent, ReplyFinishedReason};
use as_message::ToolResultState;

/// ANSI styles used when colours are on.
mod ansi {
    pub(super) const RESET: &str = "\x1b[0m";
    pub(super) const DIM: &str = "\x1b[2m";
    pub(super) const CYAN: &str = "\x1b[36m";
    pub(super) const YELLOW: &str = "\x1b[33m";
    pub(super) const RED: &str = "\x1b[31m";
}

/// Whether to colour output written to a stream that `is_terminal` describes: only on a terminal,
/// and never when `NO_COLOR` is set (<https://no-color.org>) or `TERM=dumb`.
pub(crate) fn use_colour(is_terminal: bool) -> bool {
    is_terminal
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// What kind of output is open on the current line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    None,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
}

/// Turns events into text on a writer. Keeps track of the open block so that each kind of
/// output starts on its own line with its own label.
#[derive(Debug)]
pub(crate) struct Renderer {
    colour: bool,
    open: Open,
    /// Characters of the current tool result already shown (results are abbreviated).
    result_chars: usize,
    /// Whether the stream printed any answer text.
    pub(crate) printed_text: bool,
}

/// Longest tool result shown, in characters.
const RESULT_PREVIEW: usize = 400;

impl Renderer {
    /// A renderer; `colour` turns ANSI styles on.
    pub(crate) fn new(colour: bool) -> Self {
        Self { colour, open: Open::None, result_chars: 0, printed_text: false }
    }

    fn style(&self, code: &'static str) -> &'static str {
        if self.colour { code } else { "" }
    }

    fn reset(&self) -> &'static str {
        self.style(ansi::RESET)
    }

    /// Ends the current line if something is open.
    pub(crate) fn close(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if self.open != Open::None {
            write!(out, "{}", self.reset())?;
            writeln!(out)?;
            self.open = Open::None;
        }
        Ok(())
    }

    fn switch(&mut self, out: &mut dyn Write, to: Open) -> std::io::Result<()> {
        if self.open != to {
            self.close(out)?;
            self.open = to;
        }
        Ok(())
    }

    /// A line of its own: a status note (`[interrupted …]`) in `code`'s style.
    pub(crate) fn note(&mut self, out: &mut dyn Write, code: Note, text: &str) -> std::io::Result<()> {
        self.close(out)?;
        let style = match code {
            Note::Info => self.style(ansi::DIM),
            Note::Warn => self.style(ansi::YELLOW),
            Note::Error => self.style(ansi::RED),
        };
        writeln!(out, "{style}{text}{}", self.reset())
    }

    /// Renders one event.
    pub(crate) fn event(&mut self, out: &mut dyn Write, event: &AgentEvent) -> std::io::Result<()> {
        match event {
            AgentEvent::ThinkingBlockStart(_) => {
                self.switch(out, Open::Thinking)?;
                let label = if self.colour { "thinking: " } else { "[thinking] " };
                write!(out, "{}{label}", self.style(ansi::DIM))?;
            }
            AgentEvent::ThinkingBlockDelta(e) => {
                if self.open != Open::Thinking {
                    self.switch(out, Open::Thinking)?;
                    write!(out, "{}", self.style(ansi::DIM))?;
                }
                write!(out, "{}", e.delta)?;
            }
            AgentEvent::ThinkingBlockEnd(_) | AgentEvent::TextBlockEnd(_) => self.close(out)?,
            AgentEvent::TextBlockStart(_) => self.switch(out, Open::Text)?,
            AgentEvent::TextBlockDelta(e) => {
                self.switch(out, Open::Text)?;
                self.printed_text = true;
                write!(out, "{}", e.delta)?;
            }
            AgentEvent::ToolCallStart(e) => {
                self.switch(out, Open::ToolCall)?;
                let label = if self.colour { "→ " } else { "[tool call] " };
                write!(out, "{}{label}{}(", self.style(ansi::CYAN), e.tool_call_name)?;
            }
            AgentEvent::ToolCallDelta(e) => {
                if self.open == Open::ToolCall {
                    write!(out, "{}", e.delta)?;
                }
            }
            AgentEvent::ToolCallEnd(_) => {
                if self.open == Open::ToolCall {
                    write!(out, ")")?;
                }
                self.close(out)?;
            }
            AgentEvent::ToolResultStart(e) => {
                self.switch(out, Open::ToolResult)?;
                self.result_chars = 0;
                let label = if self.colour { "← " } else { "[tool result] " };
                write!(out, "{}{label}{}: ", self.style(ansi::CYAN), e.tool_call_name)?;
            }
            AgentEvent::ToolResultTextDelta(e) => {
                if self.open != Open::ToolResult {
                    self.switch(out, Open::ToolResult)?;
                    let label = if self.colour { "← " } else { "[tool result] " };
                    write!(out, "{}{label}", self.style(ansi::CYAN))?;
                    self.result_chars = 0;
                }
                self.result_preview(out, &e.delta)?;
            }
            AgentEvent::ToolResultDataDelta(e) => {
                self.switch(out, Open::ToolResult)?;
                write!(out, "({})", e.media_type)?;
            }
            AgentEvent::ToolResultEnd(e) => {
                if e.state != ToolResultState::Success {
                    let state = match e.state {
                        ToolResultState::Error => "error",
                        ToolResultState::Interrupted => "interrupted",
                        ToolResultState::Denied => "denied",
                        _ => "running",
                    };
                    write!(out, " ({state})")?;
                }
                self.close(out)?;
            }
            AgentEvent::ExceedMaxIters(_) => {
                self.note(out, Note::Warn, "[stopped: the maximum number of iterations was reached]")?;
            }
            AgentEvent::ReplyEnd(e) => match e.finished_reason {
                ReplyFinishedReason::Interrupted => {
                    self.note(out, Note::Warn, "[interrupted: the reply so far is saved]")?;
                }
                ReplyFinishedReason::Completed | ReplyFinishedReason::ExceedMaxIters => self.close(out)?,
            },
            AgentEvent::DataBlockStart(e) => {
                self.switch(out, Open::Text)?;
                write!(out, "[{} data]", e.media_type)?;
            }
            // Shown by the caller (the confirmation prompt), or not worth showing.
            AgentEvent::RequireUserConfirm(_)
            | AgentEvent::RequireExternalExecution(_)
            | AgentEvent::ReplyStart(_)
            | AgentEvent::ModelCallStart(_)
            | AgentEvent::ModelCallEnd(_)
            | AgentEvent::DataBlockDelta(_)
            | AgentEvent::DataBlockEnd(_)
            | AgentEvent::HintBlock(_)
            | AgentEvent::UserConfirmResult(_)
            | AgentEvent::ExternalExecutionResult(_)
            | AgentEvent::UserInterrupt(_)
            | AgentEvent::Custom(_) => {}
        }
        out.flush()
    }

    fn result_preview(&mut self, out: &mut dyn Write, delta: &str) -> std::io::Result<()> {
        if self.result_chars >= RESULT_PREVIEW {
            return Ok(());
        }
        let room = RESULT_PREVIEW - self.result_chars;
        let shown: String = delta.chars().take(room).map(|c| if c == '\n' { ' ' } else { c }).collect();
        self.result_chars += shown.chars().count();
        write!(out, "{shown}")?;
        if self.result_chars >= RESULT_PREVIEW {
            write!(out, "…")?;
        }
        Ok(())
    }
}

/// The style of a [`Renderer::note`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Note {
    /// Dim.
    Info,
    /// Yellow.
    Warn,
    /// Red.
    Error,
}

#[cfg(test)]
mod tests {
    use as_agent::{
        ReplyEndEvent, TextBlockDeltaEvent, TextBlockEndEvent, TextBlockStartEvent, ThinkingBlockDeltaEvent,
        ThinkingBlockEndEvent, ThinkingBlockStartEvent, ToolCallDeltaEvent, ToolCallEndEvent, ToolCallStartEvent,
        ToolResultEndEvent, ToolResultStartEvent, ToolResultTextDeltaEvent,
    };

    use super::*;

    fn stream() -> Vec<AgentEvent> {
        vec![
            ThinkingBlockStartEvent::new("r", "b1").into(),
            ThinkingBlockDeltaEvent::new("r", "b1", "hmm").into(),
            ThinkingBlockEndEvent::new("r", "b1").into(),
            TextBlockStartEvent::new("r", "b2").into(),
            TextBlockDeltaEvent::new("r", "b2", "Hello").into(),
            TextBlockDeltaEvent::new("r", "b2", ", Ada").into(),
            TextBlockEndEvent::new("r", "b2").into(),
            ToolCallStartEvent::new("r", "c1", "Read").into(),
            ToolCallDeltaEvent::new("r", "c1", "{\"file_path\":").into(),
            ToolCallDeltaEvent::new("r", "c1", "\"a\"}").into(),
            ToolCallEndEvent::new("r", "c1").into(),
            ToolResultStartEvent::new("r", "c1", "Read").into(),
            ToolResultTextDeltaEvent::new("r", "c1", "line 1\nline 2").into(),
            ToolResultEndEvent::new("r", "c1", ToolResultState::Error).into(),
            ReplyEndEvent::new("s", "r", ReplyFinishedReason::Interrupted).into(),
        ]
    }

    fn render(colour: bool) -> String {
        let mut r = Renderer::new(colour);
        let mut out = Vec::new();
        for e in stream() {
            r.event(&mut out, &e).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn plain_output_labels_each_kind_on_its_own_line() {
        assert_eq!(
            render(false),
            "[thinking] hmm\nHello, Ada\n[tool call] Read({\"file_path\":\"a\"})\n\
             [tool result] Read: line 1 line 2 (error)\n[interrupted: the reply so far is saved]\n"
        );
    }

    #[test]
    fn colour_output_uses_styles_and_no_labels() {
        let text = render(true);
        assert!(text.contains("\x1b[2mthinking: hmm\x1b[0m\n"), "{text:?}");
        assert!(text.contains("\x1b[36m→ Read("), "{text:?}");
        assert!(text.contains("\x1b[33m[interrupted"), "{text:?}");
        assert!(!text.contains("[thinking]"));
    }

    #[test]
    fn long_results_are_abbreviated() {
        let mut r = Renderer::new(false);
        let mut out = Vec::new();
        r.event(&mut out, &ToolResultStartEvent::new("r", "c", "Bash").into()).unwrap();
        r.event(&mut out, &ToolResultTextDeltaEvent::new("r", "c", "x".repeat(1000)).into()).unwrap();
        r.event(&mut out, &ToolResultTextDeltaEvent::new("r", "c", "y".repeat(10)).into()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches('x').count(), RESULT_PREVIEW);
        assert!(!text.contains('y'));
        assert!(text.contains('…'));
    }
}
