//! One line of `embed` / `bench` input: a plain text, or a JSON Lines object with a string
//! `text` and an optional `id`. The CLI streams a file line by line and hands each line here;
//! the messages (which name the source and the line) are the CLI's.

use serde_json::Value;

/// One input record.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub id: Option<Value>,
    pub text: String,
}

/// Why a line was rejected.
#[derive(Debug)]
pub enum LineError {
    /// The line is not valid UTF-8.
    NotUtf8,
    /// A JSON Lines line that does not parse.
    Json(serde_json::Error),
    /// Valid JSON, but not an object.
    NotObject,
    /// An object without a string `text`.
    NoText,
}

/// Parses one line as `read_until(b'\n')` returns it (a trailing `\n`, then `\r`, is
/// stripped). A blank line is `None` in JSON Lines mode (skipped) and an empty text otherwise.
pub fn parse_line(raw: &[u8], jsonl: bool) -> Result<Option<Item>, LineError> {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let text = std::str::from_utf8(raw).map_err(|_| LineError::NotUtf8)?;
    if !jsonl {
        return Ok(Some(Item {
            id: None,
            text: text.to_string(),
        }));
    }
    if text.trim().is_empty() {
        return Ok(None);
    }
    parse_jsonl(text).map(Some)
}

fn parse_jsonl(line: &str) -> Result<Item, LineError> {
    let v: Value = serde_json::from_str(line).map_err(LineError::Json)?;
    let Some(obj) = v.as_object() else {
        return Err(LineError::NotObject);
    };
    let Some(text) = obj.get("text").and_then(|t| t.as_str()) else {
        return Err(LineError::NoText);
    };
    Ok(Item {
        id: obj.get("id").cloned(),
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_jsonl_and_rejections() {
        let it = parse_line(b"hello\r\n", false).unwrap().unwrap();
        assert_eq!((it.id, it.text.as_str()), (None, "hello"));
        assert!(parse_line(b"  \n", true).unwrap().is_none());
        let it = parse_line(br#"{"id": 7, "text": "x"}"#, true)
            .unwrap()
            .unwrap();
        assert_eq!(it.id, Some(Value::from(7)));
        assert!(matches!(
            parse_line(b"\xff\n", false),
            Err(LineError::NotUtf8)
        ));
        assert!(matches!(parse_line(b"{", true), Err(LineError::Json(_))));
        assert!(matches!(
            parse_line(b"[1]", true),
            Err(LineError::NotObject)
        ));
        assert!(matches!(
            parse_line(br#"{"text": 1}"#, true),
            Err(LineError::NoText)
        ));
    }
}
