//! Mapping of fred errors and bad stored values into [`as_storage::StorageError`].
//!
//! fred's error type never leaves this crate.

use as_storage::{StorageError, StorageErrorKind};
use fred::error::{Error as FredError, ErrorKind as FredKind};

/// The backend name in every error.
pub(crate) const BACKEND: &str = "redis";

/// Builds an error of `kind`.
pub(crate) fn err(kind: StorageErrorKind, op: &'static str, msg: impl Into<String>) -> StorageError {
    StorageError::new(kind, BACKEND, op, msg)
}

/// Maps a fred error; `key` (when known) is named in the message.
pub(crate) fn map_fred(op: &'static str, key: Option<&str>, e: FredError) -> StorageError {
    let details = e.details().to_owned();
    let at = key.map(|k| format!(" (key {k:?})")).unwrap_or_default();
    let kind = match e.kind() {
        FredKind::Timeout | FredKind::IO | FredKind::Canceled | FredKind::Backpressure | FredKind::Routing => {
            StorageErrorKind::Unavailable
        }
        FredKind::Cluster | FredKind::Sentinel => StorageErrorKind::Unavailable,
        FredKind::Tls | FredKind::Auth | FredKind::Config | FredKind::Url => StorageErrorKind::Backend,
        FredKind::Parse => StorageErrorKind::Serialization,
        FredKind::Unknown if is_connection_failure(&details) => StorageErrorKind::Unavailable,
        _ => classify_reply(&details),
    };
    let msg = match kind {
        StorageErrorKind::Serialization if details.contains("WRONGTYPE") => {
            format!("wrong Redis type{at}: {details}")
        }
        _ => format!("{}{at}: {details}", e.kind().to_str()),
    };
    err(kind, op, msg).with_source(e)
}

/// fred reports some connection-level failures with `ErrorKind::Unknown`.
fn is_connection_failure(details: &str) -> bool {
    [
        "Failed to route command",
        "Failed to send command to router",
        "Too many failed write attempts",
        "Max attempts exceeded",
        "Missing expected connection",
        "Client is not initialized",
        "Connection closed",
        "connection",
    ]
    .iter()
    .any(|p| details.contains(p))
}

/// Classifies a server error reply by its prefix.
fn classify_reply(details: &str) -> StorageErrorKind {
    // Script errors wrap the inner reply ("ERR Error running script ...: WRONGTYPE ...").
    if details.contains("WRONGTYPE") {
        StorageErrorKind::Serialization
    } else if details.contains("CROSSSLOT") {
        StorageErrorKind::Unsupported
    } else if ["LOADING", "BUSY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "NOREPLICAS"]
        .iter()
        .any(|p| details.starts_with(p) || details.contains(&format!(" {p} ")))
    {
        StorageErrorKind::Unavailable
    } else {
        StorageErrorKind::Backend
    }
}

/// A stored value that is not valid: names the key.
pub(crate) fn bad_value(op: &'static str, key: &str, why: impl std::fmt::Display) -> StorageError {
    err(StorageErrorKind::Serialization, op, format!("invalid value at key {key:?}: {why}"))
}

/// The error for a script's record check code (`owner_check` in the scripts): -4 the record is
/// not a session record, -5 its key holds another Redis type. Other codes are not errors here.
pub(crate) fn bad_record(op: &'static str, rkey: &str, code: i64) -> Result<(), StorageError> {
    match code {
        -4 => Err(bad_value(op, rkey, "not a session record (not a JSON object with string user_id and agent_id)")),
        -5 => Err(wrong_type(op, rkey)),
        _ => Ok(()),
    }
}

/// A session record key that holds another Redis type than a string.
pub(crate) fn wrong_type(op: &'static str, rkey: &str) -> StorageError {
    err(StorageErrorKind::Serialization, op, format!("wrong Redis type (key {rkey:?}): not a string"))
}

/// A non-empty string value as fred returned it from a `GET`. fred checks every bulk string for
/// UTF-8 as it decodes the reply (valid text arrives as `Value::String`, anything else as
/// `Value::Bytes`), so [`Fetched::text`] costs no second pass over a large record.
pub(crate) enum Fetched {
    /// Text fred found to be UTF-8.
    Text(fred::bytes_utils::Str),
    /// Bytes that are not UTF-8.
    Binary(bytes::Bytes),
}

impl Fetched {
    /// `None` for a missing key or an empty string; a reply of another shape is a parse error.
    pub(crate) fn from_reply(reply: fred::types::Value) -> Result<Option<Self>, FredError> {
        use fred::types::Value;
        let fetched = match reply {
            Value::Null => return Ok(None),
            Value::String(s) => Self::Text(s),
            Value::Bytes(b) => Self::Binary(b),
            other => Self::Binary(other.convert()?),
        };
        Ok((!fetched.bytes().is_empty()).then_some(fetched))
    }

    /// The raw bytes (shared, not copied).
    pub(crate) fn bytes(&self) -> &bytes::Bytes {
        match self {
            Self::Text(s) => s.inner(),
            Self::Binary(b) => b,
        }
    }

    /// The value as text, or a serialization error naming the key.
    pub(crate) fn text(&self, op: &'static str, key: &str) -> Result<&str, StorageError> {
        match self {
            Self::Text(s) => Ok(s),
            Self::Binary(b) => utf8(op, key, b),
        }
    }
}

/// The value as UTF-8 text, or a serialization error naming the key.
pub(crate) fn utf8<'a>(op: &'static str, key: &str, bytes: &'a [u8]) -> Result<&'a str, StorageError> {
    std::str::from_utf8(bytes).map_err(|e| {
        err(StorageErrorKind::Serialization, op, format!("value at key {key:?} is not valid UTF-8: {e}")).with_source(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_classified() {
        let cases = [
            ("WRONGTYPE Operation against a key holding the wrong kind of value", StorageErrorKind::Serialization),
            (
                "ERR Error running script (call to f_x): @user_script:1: WRONGTYPE Operation",
                StorageErrorKind::Serialization,
            ),
            ("CROSSSLOT Keys in request don't hash to the same slot", StorageErrorKind::Unsupported),
            ("LOADING Redis is loading the dataset in memory", StorageErrorKind::Unavailable),
            ("BUSY Redis is busy running a script", StorageErrorKind::Unavailable),
            ("ERR unknown command", StorageErrorKind::Backend),
        ];
        for (reply, kind) in cases {
            assert_eq!(classify_reply(reply), kind, "{reply}");
        }
    }

    #[test]
    fn fred_kinds_are_mapped() {
        let e = map_fred("get_session", Some("k"), FredError::new(FredKind::Timeout, "Request timed out."));
        assert_eq!(e.kind(), StorageErrorKind::Unavailable);
        assert!(e.is_retryable());
        let e = map_fred("upsert_session", None, FredError::new(FredKind::Unknown, "Failed to route command."));
        assert_eq!(e.kind(), StorageErrorKind::Unavailable);
        let e = map_fred(
            "get_session",
            Some("agentscope:user:u:session:s"),
            FredError::new(FredKind::InvalidArgument, "WRONGTYPE Operation against a key"),
        );
        assert_eq!(e.kind(), StorageErrorKind::Serialization);
        assert!(e.to_string().contains("agentscope:user:u:session:s"), "{e}");
    }

    #[test]
    fn non_utf8_names_the_key() {
        let e = utf8("get_session", "the-key", b"{\"a\":\"\xff\"}").unwrap_err();
        assert_eq!(e.kind(), StorageErrorKind::Serialization);
        assert!(e.to_string().contains("the-key") && e.to_string().contains("UTF-8"), "{e}");
    }
}
