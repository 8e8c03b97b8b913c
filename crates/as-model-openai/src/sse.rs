//! An incremental Server-Sent Events parser (only what chat completions use: `data:` fields).

/// Splits a byte stream into SSE event payloads (the joined `data:` lines of each event).
///
/// Comment lines (`:`), `event:`, `id:` and `retry:` fields are ignored. Bytes are buffered until a full line
/// arrives, so a chunk boundary may fall anywhere, inside a UTF-8 character included.
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    data: Option<String>,
    max_event_bytes: usize,
}

/// The default cap on one SSE line or event (16 MiB): a hostile or broken server cannot grow memory
/// without bound by never ending a line.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

impl Default for SseParser {
    fn default() -> Self {
        Self { buf: Vec::new(), data: None, max_event_bytes: DEFAULT_MAX_EVENT_BYTES }
    }
}

/// Why the SSE bytes could not be parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum SseError {
    /// A line was not valid UTF-8.
    NotUtf8,
    /// The input ended in the middle of a line.
    CutMidLine,
    /// A line or an event grew past the parser's limit.
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

impl SseParser {
    /// A parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser whose lines and events may not exceed `max_event_bytes`.
    pub fn with_max_event_bytes(max_event_bytes: usize) -> Self {
        Self { max_event_bytes, ..Self::default() }
    }

    /// Feeds bytes, pushing every completed event's data into `out`.
    /// Fails with [`SseError::TooLarge`] once a line or an event exceeds the limit.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), SseError> {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(pos) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let end = start + pos;
            let mut line = &self.buf[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
            if line.is_empty() {
                if let Some(d) = self.data.take() {
                    out.push(d);
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                let value = rest.strip_prefix(' ').unwrap_or(rest);
                match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => self.data = Some(value.to_owned()),
                }
            }
            if self.data.as_ref().is_some_and(|d| d.len() > self.max_event_bytes) {
                return Err(SseError::TooLarge { limit: self.max_event_bytes });
            }
            start = end + 1;
        }
        self.buf.drain(..start);
        if self.buf.len() > self.max_event_bytes {
            return Err(SseError::TooLarge { limit: self.max_event_bytes });
        }
        Ok(())
    }

    /// At end of input: an event whose data lines ended without the blank line is returned (servers often omit
    /// the last one); [`SseError::CutMidLine`] when a partial line is left, i.e. the stream was cut mid-line.
    pub fn finish(&mut self) -> Result<Option<String>, SseError> {
        if self.buf.iter().any(|b| !b.is_ascii_whitespace()) {
            return Err(SseError::CutMidLine);
        }
        self.buf.clear();
        Ok(self.data.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> (Vec<String>, Result<Option<String>, SseError>) {
        let mut p = SseParser::new();
        let mut out = vec![];
        for c in input.chunks(piece) {
            p.feed(c, &mut out).unwrap();
        }
        let tail = p.finish();
        (out, tail)
    }

    #[test]
    fn events_survive_any_split() {
        let input =
            ": keep-alive\r\n\r\ndata: {\"a\": \"é\"}\r\n\r\nevent: x\ndata:1\ndata: 2\n\ndata: [DONE]\n\n".as_bytes();
        for piece in 1..input.len() {
            let (out, tail) = parse_in_pieces(input, piece);
            assert_eq!(out, vec!["{\"a\": \"é\"}", "1\n2", "[DONE]"], "piece {piece}");
            assert_eq!(tail, Ok(None));
        }
    }

    #[test]
    fn end_of_input() {
        assert_eq!(parse_in_pieces(b"data: x\n", 3).1, Ok(Some("x".into())));
        assert_eq!(parse_in_pieces(b"data: {\"cut", 3).1, Err(SseError::CutMidLine));
        let mut p = SseParser::new();
        assert_eq!(p.feed(b"data: \xff\n", &mut vec![]), Err(SseError::NotUtf8));
    }

    #[test]
    fn unbounded_lines_and_events_are_refused() {
        // A line that never ends.
        let mut p = SseParser::with_max_event_bytes(64);
        let mut out = vec![];
        assert_eq!(p.feed(&[b'x'; 40], &mut out), Ok(()));
        assert_eq!(p.feed(&[b'x'; 40], &mut out), Err(SseError::TooLarge { limit: 64 }));
        // An event made of many short data lines with no blank line.
        let mut p = SseParser::with_max_event_bytes(64);
        let many = "data: 0123456789\n".repeat(10);
        assert_eq!(p.feed(many.as_bytes(), &mut out), Err(SseError::TooLarge { limit: 64 }));
        // Within the limit all is well.
        let mut p = SseParser::with_max_event_bytes(64);
        assert_eq!(p.feed(b"data: ok\n\n", &mut out), Ok(()));
        assert_eq!(out, vec!["ok"]);
    }
}
