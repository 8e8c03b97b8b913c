//! An incremental Server-Sent Events parser (only what chat completions use: `data:` fields).

/// Splits a byte stream into SSE event payloads (the joined `data:` lines of each event).
///
/// Comment lines (`:`), `event:`, `id:` and `retry:` fields are ignored. Bytes are buffered until a full line
/// arrives, so a chunk boundary may fall anywhere, inside a UTF-8 character or a CRLF pair included. As in the
/// WHATWG event-stream rules, a line ends with CRLF, LF or a lone CR, and a leading UTF-8 BOM is ignored.
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    /// How far `buf` is known to hold no line end: the next feed searches from here, so a long line
    /// arriving in small pieces is scanned once, not once per piece.
    scanned: usize,
    /// Whether the stream's first bytes were seen (a leading UTF-8 BOM is dropped there).
    started: bool,
    data: Option<String>,
    max_event_bytes: usize,
}

/// The default cap on one SSE line or event (16 MiB): a hostile or broken server cannot grow memory
/// without bound by never ending a line.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

impl Default for SseParser {
    fn default() -> Self {
        Self { buf: Vec::new(), scanned: 0, started: false, data: None, max_event_bytes: DEFAULT_MAX_EVENT_BYTES }
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
        if !self.started {
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return Ok(());
            }
            self.started = true;
            if self.buf.starts_with(BOM) {
                self.buf.drain(..BOM.len());
            }
        }
        self.lines(false, out)?;
        if self.buf.len() > self.max_event_bytes {
            return Err(SseError::TooLarge { limit: self.max_event_bytes });
        }
        Ok(())
    }

    /// Takes every complete line out of `buf`. A CR as the last buffered byte may be the first half of a
    /// CRLF, so it ends a line only `at_end`.
    fn lines(&mut self, at_end: bool, out: &mut Vec<String>) -> Result<(), SseError> {
        let mut start = 0;
        let mut from = self.scanned;
        let mut deferred = None;
        while let Some(pos) = self.buf[from..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let end = from + pos;
            let next = match self.buf[end] {
                b'\n' => end + 1,
                _ => match self.buf.get(end + 1) {
                    Some(b'\n') => end + 2,
                    Some(_) => end + 1,
                    None if at_end => end + 1,
                    None => {
                        deferred = Some(end);
                        break;
                    }
                },
            };
            let line = std::str::from_utf8(&self.buf[start..end]).map_err(|_| SseError::NotUtf8)?;
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
            start = next;
            from = next;
        }
        // Everything after the last line end holds none, except a deferred CR: rescan from it.
        let scanned = deferred.unwrap_or(self.buf.len());
        self.buf.drain(..start);
        self.scanned = scanned - start;
        Ok(())
    }

    /// At end of input: an event whose data lines ended without the blank line is returned (servers often omit
    /// the last one); [`SseError::CutMidLine`] when a partial line is left, i.e. the stream was cut mid-line (the
    /// caller decides whether that matters: after a finish reason or `[DONE]` it does not).
    pub fn finish(&mut self) -> Result<Option<String>, SseError> {
        let mut out = Vec::new();
        self.lines(true, &mut out)?;
        let cut = self.buf.iter().any(|b| !b.is_ascii_whitespace());
        self.buf.clear();
        self.scanned = 0;
        // Only a deferred final CR can end a line here, so `out` holds at most the one event it completed.
        let last = out.pop().or_else(|| self.data.take());
        if cut {
            // Kept for [`SseParser::take_pending`]: a caller that can live with the torn line
            // still gets the event completed before it.
            self.data = last;
            return Err(SseError::CutMidLine);
        }
        Ok(last)
    }

    /// After [`SseParser::finish`] failed with [`SseError::CutMidLine`]: the event whose data lines
    /// came before the torn line (ended by the end of input, not by a blank line), if any.
    pub fn take_pending(&mut self) -> Option<String> {
        self.data.take()
    }
}

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

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
        // The event before a torn line is still there for a caller that wants it.
        let mut p = SseParser::new();
        p.feed(b"data: {\"usage\": 1}\n: keep", &mut vec![]).unwrap();
        assert_eq!(p.finish(), Err(SseError::CutMidLine));
        assert_eq!(p.take_pending().as_deref(), Some("{\"usage\": 1}"));
        let mut p = SseParser::new();
        assert_eq!(p.feed(b"data: \xff\n", &mut vec![]), Err(SseError::NotUtf8));
    }

    #[test]
    fn lone_cr_line_ends_and_a_bom_survive_any_split() {
        let input = "\u{feff}data: a\r\rdata: b\r\n\r\ndata: c\n\r".as_bytes();
        for piece in 1..input.len() {
            let (out, tail) = parse_in_pieces(input, piece);
            assert_eq!(out, vec!["a", "b"], "piece {piece}");
            // The blank line ending `c` is a final CR: only the end of input says it is no CRLF.
            assert_eq!(tail, Ok(Some("c".into())), "piece {piece}");
        }
        // A final CR ends the last line only once the input is known to end.
        let (out, tail) = parse_in_pieces(b"data: a\r", 4);
        assert!(out.is_empty());
        assert_eq!(tail, Ok(Some("a".into())));
        // A BOM elsewhere is data.
        let (out, _) = parse_in_pieces("data: \u{feff}x\n\n".as_bytes(), 2);
        assert_eq!(out, vec!["\u{feff}x"]);
    }

    #[test]
    fn a_long_line_is_scanned_once() {
        let mut p = SseParser::new();
        let mut out = vec![];
        for _ in 0..1000 {
            p.feed(b"x", &mut out).unwrap();
            // Nothing before `scanned` is searched again.
            assert_eq!(p.scanned, p.buf.len());
        }
        p.feed(b"\r", &mut out).unwrap();
        assert_eq!(p.scanned, 1000, "the CR waits for its possible LF");
        p.feed(b"\ndata: y\n\n", &mut out).unwrap();
        assert_eq!((out, p.scanned, p.buf.len()), (vec!["y".to_owned()], 0, 0));
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
