//! The chat formatter: `Msg` blocks to OpenAI chat messages, exactly as 2.0.4's `OpenAIChatFormatter` /
//! `DashScopeChatFormatter` (spec §11.5; goldens `formatter-openai-chat.json`, `formatter-dashscope-chat*.json`).

use std::fmt;
use std::sync::Arc;

use as_message::{ContentBlock, DataBlock, JsonMap, Msg, Source, TextOrBlocks, TextOrData, ToolResultBlock};
use base64::Engine as _;
use serde_json::{Value, json};

/// Generates the identifiers of media returned by tools (2.0.4 uses `shortuuid.uuid()`).
pub type MediaIdFactory = Arc<dyn Fn() -> String + Send + Sync>;

/// Formatter options: the differences between the OpenAI and DashScope formatters.
#[derive(Clone)]
pub struct FormatterOptions {
    /// Put `name` (the sender) on user/assistant/system messages (OpenAI: yes, DashScope: no).
    pub include_name: bool,
    /// Send thinking back as `reasoning_content` on assistant messages (DashScope with
    /// `application/x-thinking` in its input types). Otherwise thinking is dropped.
    pub reasoning_content: bool,
    /// Accept `video/*` data (DashScope).
    pub video: bool,
    /// Audio as 2.0.4's `DashScopeChatFormatter` sends it: any `audio/*` type, with the media
    /// subtype as `input_audio.format` (`audio/mpeg` is `"mpeg"`), and a remote URL passed on as
    /// `input_audio.data` (DashScope's compatible mode fetches it). Otherwise (OpenAI) only wav
    /// and mp3 are sent, as base64 with `format` `"wav"` or `"mp3"`; other audio types, and remote
    /// audio URLs, are skipped with a warning: 2.0.4's `OpenAIChatFormatter` downloads a remote
    /// `.wav`/`.mp3` URL and sends its bytes, which this formatter does not do (send such audio
    /// as base64 data, or as a `file://` URL under [`FormatterOptions::local_files`]).
    pub dashscope_audio: bool,
    /// Identifier generator for media returned by tools.
    pub media_id: MediaIdFactory,
    /// The directory whose files `file://` media URLs may name (they are read and sent inline,
    /// up to [`MAX_LOCAL_FILE_BYTES`]). `None`, the default, reads no local file. A `file://` image,
    /// video or audio URL that is not readable under it is skipped with a warning, never sent as it
    /// is (the provider cannot fetch it). (AgentScope 2.0.4 reads any path a message names, which in
    /// a service lets a user's message send the server's files to the model provider.)
    pub local_files: Option<std::path::PathBuf>,
}

impl fmt::Debug for FormatterOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FormatterOptions")
            .field("include_name", &self.include_name)
            .field("reasoning_content", &self.reasoning_content)
            .field("video", &self.video)
            .field("dashscope_audio", &self.dashscope_audio)
            .field("local_files", &self.local_files)
            .finish_non_exhaustive()
    }
}

impl FormatterOptions {
    /// `OpenAIChatFormatter`: names, no reasoning content, images and audio (base64 wav and mp3;
    /// remote audio URLs are skipped, see [`FormatterOptions::dashscope_audio`]).
    pub fn openai() -> Self {
        Self {
            include_name: true,
            reasoning_content: false,
            video: false,
            dashscope_audio: false,
            media_id: Arc::new(shortuuid),
            local_files: None,
        }
    }

    /// `DashScopeChatFormatter`: no names, images, audio (any type, remote URLs passed on) and video;
    /// `reasoning_content` when `thinking`.
    pub fn dashscope(thinking: bool) -> Self {
        Self {
            include_name: false,
            reasoning_content: thinking,
            video: true,
            dashscope_audio: true,
            media_id: Arc::new(shortuuid),
            local_files: None,
        }
    }

    /// Replaces the media identifier generator (tests).
    pub fn with_media_id(mut self, f: MediaIdFactory) -> Self {
        self.media_id = f;
        self
    }
}

const SHORTUUID_ALPHABET: &[u8] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// A `shortuuid.uuid()`: a random uuid4 in base 57, 22 characters.
pub fn shortuuid() -> String {
    let mut n = uuid::Uuid::new_v4().as_u128();
    let base = SHORTUUID_ALPHABET.len() as u128;
    let mut out = Vec::with_capacity(22);
    for _ in 0..22 {
        let i = usize::try_from(n % base).unwrap_or(0);
        out.push(SHORTUUID_ALPHABET[i] as char);
        n /= base;
    }
    out.reverse();
    out.into_iter().collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MediaKind {
    Image,
    Audio,
    Video,
}

impl MediaKind {
    fn of(media_type: &str) -> Option<Self> {
        let top = media_type.split('/').next().unwrap_or_default();
        match top {
            "image" => Some(Self::Image),
            "audio" => Some(Self::Audio),
            "video" => Some(Self::Video),
            _ => None,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Audio => "audio",
            Self::Video => "video",
        }
    }
}

fn media_type(d: &DataBlock) -> &str {
    match &d.source {
        Source::Base64(b) => &b.media_type,
        Source::Url(u) => &u.media_type,
    }
}

struct Pending {
    role: &'static str,
    name: String,
    content: Vec<Value>,
    tool_calls: Vec<Value>,
    /// Thinking parts, joined with `"\n"` when sent (as 2.0.4 does).
    reasoning: Vec<String>,
}

/// Formats messages for an OpenAI-compatible chat completion.
#[derive(Clone, Debug)]
pub struct ChatFormatter {
    opts: FormatterOptions,
}

impl ChatFormatter {
    /// A formatter.
    pub fn new(opts: FormatterOptions) -> Self {
        Self { opts }
    }

    /// The options.
    pub fn options(&self) -> &FormatterOptions {
        &self.opts
    }

    fn supported(&self, kind: MediaKind) -> bool {
        match kind {
            MediaKind::Image | MediaKind::Audio => true,
            MediaKind::Video => self.opts.video,
        }
    }

    /// The content part for a data block, or `None` when its type is not accepted (skipped with a warning).
    fn data_part(&self, d: &DataBlock) -> Option<Value> {
        let mt = media_type(d);
        let kind = MediaKind::of(mt).filter(|k| self.supported(*k));
        let Some(kind) = kind else {
            tracing::warn!(media_type = mt, "unsupported media type skipped by the formatter");
            return None;
        };
        match kind {
            MediaKind::Image => Some(json!({"type": "image_url", "image_url": {"url": self.image_url(d)?}})),
            MediaKind::Video => Some(json!({"type": "video_url", "video_url": {"url": self.image_url(d)?}})),
            MediaKind::Audio if self.opts.dashscope_audio => {
                // 2.0.4: `media_type.split("/")[-1]`, and a remote URL as the data.
                let format = mt.rsplit('/').next().unwrap_or(mt);
                let data = match &d.source {
                    Source::Base64(b) => b.data.clone(),
                    Source::Url(u) => match self.url_data(&u.url, mt)? {
                        UrlData::Local(bytes) => base64::engine::general_purpose::STANDARD.encode(bytes),
                        UrlData::Remote => u.url.clone(),
                    },
                };
                Some(json!({"type": "input_audio", "input_audio": {"data": data, "format": format}}))
            }
            MediaKind::Audio => {
                let format = match mt {
                    "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
                    "audio/mp3" | "audio/mpeg" => "mp3",
                    other => {
                        tracing::warn!(media_type = other, "only wav and mp3 audio is supported; skipped");
                        return None;
                    }
                };
                let data = match &d.source {
                    Source::Base64(b) => b.data.clone(),
                    Source::Url(u) => match self.url_data(&u.url, mt)? {
                        UrlData::Local(bytes) => base64::engine::general_purpose::STANDARD.encode(bytes),
                        UrlData::Remote => {
                            tracing::warn!(
                                url = %u.url,
                                "remote audio URLs are not downloaded (2.0.4 downloads them); skipped"
                            );
                            return None;
                        }
                    },
                };
                Some(json!({"type": "input_audio", "input_audio": {"data": data, "format": format}}))
            }
        }
    }

    /// Formats `msgs` into chat messages.
    pub fn format(&self, msgs: &[Msg]) -> Vec<Value> {
        let mut out = Vec::new();
        for msg in msgs {
            let mut pending = Pending {
                role: msg.role.as_str(),
                name: msg.name.clone(),
                content: Vec::new(),
                tool_calls: Vec::new(),
                reasoning: Vec::new(),
            };
            // Media returned by consecutive tool results; emitted after the last of them so tool messages stay
            // contiguous.
            let mut media_msgs: Vec<Value> = Vec::new();
            for block in &msg.content {
                if !matches!(block, ContentBlock::ToolResult(_)) {
                    out.append(&mut media_msgs);
                }
                match block {
                    ContentBlock::Text(t) => pending.content.push(json!({"type": "text", "text": t.text})),
                    ContentBlock::Thinking(t) => {
                        if self.opts.reasoning_content {
                            pending.reasoning.push(t.thinking.clone());
                        }
                    }
                    ContentBlock::Data(d) => {
                        if let Some(p) = self.data_part(d) {
                            pending.content.push(p);
                        }
                    }
                    ContentBlock::ToolCall(c) => pending.tool_calls.push(json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.input},
                    })),
                    ContentBlock::ToolResult(r) => {
                        self.flush(&mut pending, &mut out);
                        let (tool_msg, media) = self.tool_result(r);
                        out.push(tool_msg);
                        if let Some(m) = media {
                            media_msgs.push(m);
                        }
                    }
                    ContentBlock::Hint(h) => {
                        self.flush(&mut pending, &mut out);
                        let parts = self.parts(&h.hint);
                        if !parts.is_empty() {
                            out.push(json!({"role": "user", "content": parts}));
                        }
                    }
                }
            }
            out.append(&mut media_msgs);
            self.flush(&mut pending, &mut out);
        }
        out
    }

    fn parts(&self, content: &TextOrBlocks) -> Vec<Value> {
        match content {
            TextOrBlocks::Text(s) => vec![json!({"type": "text", "text": s})],
            TextOrBlocks::Blocks(bs) => bs
                .iter()
                .filter_map(|b| match b {
                    TextOrData::Text(t) => Some(json!({"type": "text", "text": t.text})),
                    TextOrData::Data(d) => self.data_part(d),
                })
                .collect(),
        }
    }

    fn flush(&self, p: &mut Pending, out: &mut Vec<Value>) {
        let content = std::mem::take(&mut p.content);
        let tool_calls = std::mem::take(&mut p.tool_calls);
        let reasoning = std::mem::take(&mut p.reasoning).join("\n");
        // A segment of thinking alone is sent too (`content: null`), as 2.0.4 does.
        if content.is_empty() && tool_calls.is_empty() && reasoning.is_empty() {
            return;
        }
        let mut m = JsonMap::new();
        m.insert("role".into(), Value::String(p.role.into()));
        if self.opts.include_name {
            m.insert("name".into(), Value::String(p.name.clone()));
        }
        m.insert("content".into(), if content.is_empty() { Value::Null } else { Value::Array(content) });
        if !tool_calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(tool_calls));
        }
        if !reasoning.is_empty() {
            m.insert("reasoning_content".into(), Value::String(reasoning));
        }
        out.push(Value::Object(m));
    }

    /// The `tool` message and, when the result carries supported media, the user message presenting them.
    fn tool_result(&self, r: &ToolResultBlock) -> (Value, Option<Value>) {
        let mut texts: Vec<String> = Vec::new();
        let mut media_parts: Vec<Value> = Vec::new();
        match &r.output {
            TextOrBlocks::Text(s) => texts.push(s.clone()),
            TextOrBlocks::Blocks(bs) => {
                for b in bs {
                    match b {
                        TextOrData::Text(t) => texts.push(t.text.clone()),
                        TextOrData::Data(d) => {
                            let mt = media_type(d);
                            match MediaKind::of(mt).filter(|k| self.supported(*k)) {
                                Some(kind) => {
                                    match self.data_part(d) {
                                        Some(part) => {
                                            let id = (self.opts.media_id)();
                                            texts.push(format!(
                                            "<system-reminder>A(n) {} file is returned and will be presented to you \
                                             with the identifier [{id}].</system-reminder>",
                                            kind.word()
                                        ));
                                            media_parts.push(json!({"type": "text", "text": format!("- {id} ({} file): ", kind.word())}));
                                            media_parts.push(part);
                                        }
                                        None => texts.push(describe_unsupported(d)),
                                    }
                                }
                                None => texts.push(describe_unsupported(d)),
                            }
                        }
                    }
                }
            }
        }
        let mut m = JsonMap::new();
        m.insert("role".into(), Value::String("tool".into()));
        m.insert("tool_call_id".into(), Value::String(r.id.clone()));
        m.insert("content".into(), Value::String(texts.join("\n")));
        m.insert("name".into(), Value::String(r.name.clone()));
        let media = (!media_parts.is_empty()).then(|| {
            let mut content = vec![json!({"type": "text", "text": "<system-reminder>The multimodal data and their identifiers are listed as follows:"})];
            content.extend(media_parts);
            content.push(json!({"type": "text", "text": "</system-reminder>"}));
            let mut u = JsonMap::new();
            u.insert("role".into(), Value::String("user".into()));
            if self.opts.include_name {
                u.insert("name".into(), Value::String("system-reminder".into()));
            }
            u.insert("content".into(), Value::Array(content));
            Value::Object(u)
        });
        (Value::Object(m), media)
    }
}

/// The largest local file a `file://` media URL may inline (see [`FormatterOptions::local_files`]).
pub const MAX_LOCAL_FILE_BYTES: u64 = 20 * 1024 * 1024;

/// What a media URL gives the formatter.
enum UrlData {
    /// Not a `file://` URL: the provider fetches it.
    Remote,
    /// A `file://` URL readable under [`FormatterOptions::local_files`]: its bytes.
    Local(Vec<u8>),
}

impl ChatFormatter {
    /// An image (or video) URL part: base64 becomes a data URI, a readable `file://` is read into
    /// one, other URLs pass through. `None` (skipped, with a warning): a `file://` URL that cannot be
    /// read under [`FormatterOptions::local_files`]; sent as it is, the provider would reject it (on
    /// every later call of the session, which keeps it in its history) and see the local path.
    fn image_url(&self, d: &DataBlock) -> Option<String> {
        match &d.source {
            Source::Base64(b) => Some(format!("data:{};base64,{}", b.media_type, b.data)),
            Source::Url(u) => match self.url_data(&u.url, &u.media_type)? {
                UrlData::Local(bytes) => Some(format!(
                    "data:{};base64,{}",
                    u.media_type,
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                )),
                UrlData::Remote => Some(u.url.clone()),
            },
        }
    }

    /// Reads a `file://` media URL under [`FormatterOptions::local_files`]; `None` (with a warning)
    /// when it is one that cannot be read there, so the block is skipped.
    fn url_data(&self, url: &str, media_type: &str) -> Option<UrlData> {
        if !is_file_url(url) {
            return Some(UrlData::Remote);
        }
        match read_file_url(url, self.opts.local_files.as_deref()) {
            Some(bytes) => Some(UrlData::Local(bytes)),
            None => {
                tracing::warn!(media_type, "a file:// media URL not readable under local_files is skipped");
                None
            }
        }
    }
}

/// Whether `url` is a `file:` URL (such a URL is never sent to the provider).
fn is_file_url(url: &str) -> bool {
    match url::Url::parse(url) {
        Ok(u) => u.scheme() == "file",
        Err(_) => url.trim_start().get(..5).is_some_and(|s| s.eq_ignore_ascii_case("file:")),
    }
}

/// The bytes of a `file://` URL naming a regular file inside `root` (after resolving symlinks and
/// `..`) of at most [`MAX_LOCAL_FILE_BYTES`]; `None` for anything else (other schemes silently).
fn read_file_url(url: &str, root: Option<&std::path::Path>) -> Option<Vec<u8>> {
    let url = url::Url::parse(url).ok().filter(|u| u.scheme() == "file")?;
    let Ok(path) = url.to_file_path() else {
        tracing::warn!("a file:// media URL that names no local path is not read");
        return None;
    };
    let Some(root) = root else {
        tracing::warn!(path = %path.display(), "file:// media URLs are not read (no local_files directory is set)");
        return None;
    };
    let inside = |p: &std::path::Path| -> std::io::Result<std::path::PathBuf> {
        let (real, root) = (p.canonicalize()?, root.canonicalize()?);
        if !real.starts_with(&root) {
            return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "outside the local_files directory"));
        }
        let meta = std::fs::metadata(&real)?;
        if !meta.is_file() || meta.len() > MAX_LOCAL_FILE_BYTES {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file of at most 20 MiB"));
        }
        Ok(real)
    };
    match inside(&path).and_then(std::fs::read) {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read a file:// media URL");
            None
        }
    }
}

/// Unsupported media in a tool result, described in the tool message as 2.0.4's
/// `convert_tool_result_to_string` does (by the main type: `application/pdf` is "A(n) application
/// file"): a URL is named; base64 data is saved to a file (see [`save_locally`]) whose path is named.
fn describe_unsupported(d: &DataBlock) -> String {
    let mt = media_type(d);
    let main = mt.split('/').next().unwrap_or_default();
    match &d.source {
        Source::Url(u) => format!(
            "<system-reminder>A(n) {main} file is returned and can be accessed at the URL: {}.</system-reminder>",
            u.url
        ),
        Source::Base64(b) => match save_locally(b.data.as_str(), mt) {
            Some(path) => {
                format!("<system-reminder>A(n) {main} file is returned and saved locally at: {path}.</system-reminder>")
            }
            // 2.0.4 fails the whole call here (undecodable data, an unwritable temp directory).
            None => format!(
                "<system-reminder>A(n) {main} file is returned but could not be saved locally.</system-reminder>"
            ),
        },
    }
}

/// The extension 2.0.4 gives a saved file: `mimetypes.guess_extension` over Python's built-in table
/// (the media type lower-cased, parameters not stripped; none when unknown). Python also reads the
/// system's `/etc/mime.types`, which can add extensions for other types; only the built-in table is
/// reproduced, so the name does not depend on the machine.
fn extension_of(media_type: &str) -> &'static str {
    MIME_EXTENSIONS.iter().find(|(t, _)| t.eq_ignore_ascii_case(media_type)).map_or("", |(_, e)| e)
}

/// Python 3.11's built-in `mimetypes` table, inverted as `guess_extension` does (the first
/// extension listed for a type).
const MIME_EXTENSIONS: &[(&str, &str)] = &[
    ("application/javascript", ".js"),
    ("application/json", ".json"),
    ("application/manifest+json", ".webmanifest"),
    ("application/msword", ".doc"),
    ("application/n-quads", ".nq"),
    ("application/n-triples", ".nt"),
    ("application/octet-stream", ".bin"),
    ("application/oda", ".oda"),
    ("application/pdf", ".pdf"),
    ("application/pkcs7-mime", ".p7c"),
    ("application/postscript", ".ps"),
    ("application/trig", ".trig"),
    ("application/vnd.apple.mpegurl", ".m3u"),
    ("application/vnd.ms-excel", ".xls"),
    ("application/vnd.ms-powerpoint", ".ppt"),
    ("application/wasm", ".wasm"),
    ("application/x-bcpio", ".bcpio"),
    ("application/x-cpio", ".cpio"),
    ("application/x-csh", ".csh"),
    ("application/x-dvi", ".dvi"),
    ("application/x-gtar", ".gtar"),
    ("application/x-hdf", ".hdf"),
    ("application/x-hdf5", ".h5"),
    ("application/x-latex", ".latex"),
    ("application/x-mif", ".mif"),
    ("application/x-netcdf", ".cdf"),
    ("application/x-pkcs12", ".p12"),
    ("application/x-pn-realaudio", ".ram"),
    ("application/x-python-code", ".pyc"),
    ("application/x-sh", ".sh"),
    ("application/x-shar", ".shar"),
    ("application/x-shockwave-flash", ".swf"),
    ("application/x-sv4cpio", ".sv4cpio"),
    ("application/x-sv4crc", ".sv4crc"),
    ("application/x-tar", ".tar"),
    ("application/x-tcl", ".tcl"),
    ("application/x-tex", ".tex"),
    ("application/x-texinfo", ".texi"),
    ("application/x-troff", ".roff"),
    ("application/x-troff-man", ".man"),
    ("application/x-troff-me", ".me"),
    ("application/x-troff-ms", ".ms"),
    ("application/x-ustar", ".ustar"),
    ("application/x-wais-source", ".src"),
    ("application/xml", ".xsl"),
    ("application/zip", ".zip"),
    ("audio/3gpp", ".3gp"),
    ("audio/3gpp2", ".3g2"),
    ("audio/aac", ".aac"),
    ("audio/basic", ".au"),
    ("audio/mpeg", ".mp3"),
    ("audio/opus", ".opus"),
    ("audio/x-aiff", ".aif"),
    ("audio/x-pn-realaudio", ".ra"),
    ("audio/x-wav", ".wav"),
    ("image/avif", ".avif"),
    ("image/bmp", ".bmp"),
    ("image/gif", ".gif"),
    ("image/heic", ".heic"),
    ("image/heif", ".heif"),
    ("image/ief", ".ief"),
    ("image/jpeg", ".jpg"),
    ("image/png", ".png"),
    ("image/svg+xml", ".svg"),
    ("image/tiff", ".tiff"),
    ("image/vnd.microsoft.icon", ".ico"),
    ("image/x-cmu-raster", ".ras"),
    ("image/x-portable-anymap", ".pnm"),
    ("image/x-portable-bitmap", ".pbm"),
    ("image/x-portable-graymap", ".pgm"),
    ("image/x-portable-pixmap", ".ppm"),
    ("image/x-rgb", ".rgb"),
    ("image/x-xbitmap", ".xbm"),
    ("image/x-xpixmap", ".xpm"),
    ("image/x-xwindowdump", ".xwd"),
    ("message/rfc822", ".eml"),
    ("text/css", ".css"),
    ("text/csv", ".csv"),
    ("text/html", ".html"),
    ("text/n3", ".n3"),
    ("text/plain", ".txt"),
    ("text/richtext", ".rtx"),
    ("text/tab-separated-values", ".tsv"),
    ("text/vtt", ".vtt"),
    ("text/x-python", ".py"),
    ("text/x-setext", ".etx"),
    ("text/x-sgml", ".sgm"),
    ("text/x-vcard", ".vcf"),
    ("text/xml", ".xml"),
    ("video/mp4", ".mp4"),
    ("video/mpeg", ".mpeg"),
    ("video/quicktime", ".mov"),
    ("video/webm", ".webm"),
    ("video/x-msvideo", ".avi"),
    ("video/x-sgi-movie", ".movie"),
];

/// Saves base64 data returned by a tool in a media type the model does not take, and returns the
/// file's path (`None` when the data is not base64 or the file cannot be written).
///
/// Where 2.0.4 writes a new `tempfile.NamedTemporaryFile` (`<temp dir>/tmpXXXXXXXX<ext>`, mode
/// 0600, never deleted) each time the history is formatted, this writes
/// `<temp dir>/agentscope-<uuid of the bytes><ext>` once: the temp directory is the same
/// (`std::env::temp_dir()`, `TMPDIR` first, as Python's `tempfile.gettempdir()`), the extension is
/// Python's ([`extension_of`]), and the name comes from the bytes (a name-based UUID), so formatting
/// the same history again (every reasoning step does) finds the file in place instead of writing a
/// new one, and the prompt text stays the same. The file is written owner-only (0600, as Python's)
/// under a fresh name and renamed into place (a rename replaces a planted symlink instead of writing
/// through it); an existing file is used only when it holds exactly these bytes.
fn save_locally(data_b64: &str, media_type: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(data_b64).ok()?;
    let name = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, &bytes).simple();
    let dir = std::env::temp_dir();
    let path = dir.join(format!("agentscope-{name}{}", extension_of(media_type)));
    let in_place = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64)
        && std::fs::read(&path).is_ok_and(|old| old == bytes);
    if !in_place {
        let fresh = dir.join(format!(".agentscope-{}.tmp", uuid::Uuid::new_v4().simple()));
        if let Err(e) = write_owner_only(&fresh, &bytes).and_then(|()| std::fs::rename(&fresh, &path)) {
            let _ = std::fs::remove_file(&fresh);
            tracing::warn!(path = %path.display(), error = %e, "cannot save unsupported media to a temporary file");
            return None;
        }
    }
    Some(path.display().to_string())
}

/// Creates `path` (which must not exist) readable and writable by its owner only, and writes `bytes`.
fn write_owner_only(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_are_read_only_inside_the_local_files_directory() {
        let base = std::env::temp_dir().join(format!("agentscope-local-{}", uuid::Uuid::new_v4().simple()));
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("cat.png"), b"cat").unwrap();
        std::fs::write(outside.join("secret.env"), b"KEY=1").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.env"), root.join("link.png")).unwrap();
        let url = |p: &std::path::Path| url::Url::from_file_path(p).unwrap().to_string();
        let inside = url(&root.join("cat.png"));
        assert_eq!(read_file_url(&inside, None), None, "no directory: nothing is read");
        assert_eq!(read_file_url(&inside, Some(&root)), Some(b"cat".to_vec()));
        for escape in [
            url(&outside.join("secret.env")),
            url(&root.join("link.png")),
            format!("{}/../outside/secret.env", url(&root)),
            url(&root),
        ] {
            assert_eq!(read_file_url(&escape, Some(&root)), None, "{escape}");
        }
        assert_eq!(read_file_url("https://example.com/cat.png", Some(&root)), None);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// The content parts the formatter makes of a user message holding one data block.
    fn parts_of(opts: FormatterOptions, url: &str, media_type: &str) -> Vec<Value> {
        let block = DataBlock::new(Source::Url(as_message::UrlSource::new(url, media_type).unwrap()), None);
        let msg = Msg::user_blocks("user", vec![ContentBlock::Data(block)]);
        let out = ChatFormatter::new(opts).format(&[msg]);
        out.first().and_then(|m| m["content"].as_array().cloned()).unwrap_or_default()
    }

    /// A `file://` image or video URL is inlined when it is readable under `local_files`, and
    /// otherwise skipped as audio is: never sent as it is (the provider cannot fetch it and fails
    /// every later call of the session with a 400, and the server's path would leak).
    #[test]
    fn file_urls_not_readable_under_local_files_are_never_sent() {
        let base = std::env::temp_dir().join(format!("agentscope-local-{}", uuid::Uuid::new_v4().simple()));
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("cat.png"), b"cat").unwrap();
        std::fs::write(outside.join("dog.png"), b"dog").unwrap();
        let url = |p: &std::path::Path| url::Url::from_file_path(p).unwrap().to_string();
        let (inside, escape) = (url(&root.join("cat.png")), url(&outside.join("dog.png")));
        let with_root = || FormatterOptions { local_files: Some(root.clone()), ..FormatterOptions::dashscope(false) };
        for (media_type, part) in [("image/png", "image_url"), ("video/mp4", "video_url")] {
            for (opts, file) in [
                (FormatterOptions::dashscope(false), &inside),
                (FormatterOptions::dashscope(false), &escape),
                (with_root(), &escape),
                (with_root(), &url(&root.join("missing.png"))),
            ] {
                let parts = parts_of(opts, file, media_type);
                assert!(parts.is_empty(), "{media_type} {file}: {parts:?}");
            }
            let parts = parts_of(with_root(), &inside, media_type);
            assert_eq!(parts, vec![json!({"type": part, part: {"url": format!("data:{media_type};base64,Y2F0")}})]);
            // A remote URL is passed on unchanged, as 2.0.4 does.
            let parts = parts_of(with_root(), "https://example.com/cat", media_type);
            assert_eq!(parts[0][part]["url"], "https://example.com/cat");
        }
        let parts = parts_of(FormatterOptions::openai(), &inside, "image/png");
        assert!(parts.is_empty(), "openai: {parts:?}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// DashScope's compatible mode takes an audio URL as it is and any audio format: 2.0.4's
    /// `DashScopeChatFormatter` sends a remote URL as `input_audio.data` and the media subtype as
    /// `format` (the expected parts are its output for these blocks). OpenAI takes base64 wav or
    /// mp3 only; remote audio, which 2.0.4 downloads, is skipped with a warning.
    #[test]
    fn audio_is_sent_as_each_flavor_takes_it() {
        let url = |u: &str, mt: &str| DataBlock::new(Source::Url(as_message::UrlSource::new(u, mt).unwrap()), None);
        let b64 = |mt: &str| {
            DataBlock::new(
                Source::Base64(as_message::Base64Source { data: "UklGRg==".into(), media_type: mt.into() }),
                None,
            )
        };
        let blocks = [
            url("https://example.com/a.ogg", "audio/ogg"),
            url("https://example.com/b.mp3", "audio/mpeg"),
            b64("audio/mpeg"),
            b64("audio/x-wav"),
            b64("audio/wav;codec=1"),
        ];
        let msg = Msg::user_blocks("user", blocks.into_iter().map(ContentBlock::Data).collect());
        let audio =
            |data: &str, format: &str| json!({"type": "input_audio", "input_audio": {"data": data, "format": format}});
        let out = ChatFormatter::new(FormatterOptions::dashscope(false)).format(std::slice::from_ref(&msg));
        assert_eq!(
            out,
            vec![json!({"role": "user", "content": [
                audio("https://example.com/a.ogg", "ogg"),
                audio("https://example.com/b.mp3", "mpeg"),
                audio("UklGRg==", "mpeg"),
                audio("UklGRg==", "x-wav"),
                audio("UklGRg==", "wav;codec=1"),
            ]})]
        );
        let out = ChatFormatter::new(FormatterOptions::openai()).format(&[msg]);
        assert_eq!(out[0]["content"], json!([audio("UklGRg==", "mp3"), audio("UklGRg==", "wav")]));
    }

    #[test]
    fn unsupported_media_is_saved_once_under_a_name_from_its_bytes() {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let data = format!("agentscope-test-{}", uuid::Uuid::new_v4());
        let first = save_locally(&b64(data.as_bytes()), "audio/x-wav").unwrap();
        let again = save_locally(&b64(data.as_bytes()), "audio/x-wav").unwrap();
        assert_eq!(first, again, "the same bytes, the same file (and the same prompt text)");
        assert!(first.ends_with(".wav"), "{first}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&first).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "owner only, as Python's NamedTemporaryFile");
        }
        assert_eq!(std::fs::read(&first).unwrap(), data.as_bytes());
        let other = save_locally(&b64(format!("other {data}").as_bytes()), "audio/x-wav").unwrap();
        assert_ne!(first, other);
        let _ = std::fs::remove_file(&other);
        // A file planted under the name with other bytes is replaced, never trusted.
        std::fs::write(&first, b"planted").unwrap();
        assert_eq!(save_locally(&b64(data.as_bytes()), "audio/x-wav").unwrap(), first);
        assert_eq!(std::fs::read(&first).unwrap(), data.as_bytes());
        let _ = std::fs::remove_file(&first);
    }

    #[test]
    fn shortuuid_shape() {
        let a = shortuuid();
        assert_eq!(a.len(), 22);
        assert!(a.bytes().all(|b| SHORTUUID_ALPHABET.contains(&b)));
        assert_ne!(a, shortuuid());
    }
}
