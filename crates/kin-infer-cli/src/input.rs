//! Reading `embed` / `bench` input: one text per line, or JSON Lines objects with a string
//! `text` and an optional `id`. The whole input is validated before any output is written.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::Path;

pub struct Item {
    pub id: Option<serde_json::Value>,
    pub text: String,
}

/// Reads all of `path` (stdin when `None`).
pub fn read_source(path: Option<&Path>) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    match path {
        Some(p) => {
            buf = std::fs::read(p).with_context(|| format!("cannot read input {}", p.display()))?;
        }
        None => {
            std::io::stdin()
                .read_to_end(&mut buf)
                .context("cannot read standard input")?;
        }
    }
    Ok(buf)
}

/// Splits into lines (a final newline does not start an empty item; `\r\n` accepted).
fn lines(bytes: &[u8], source: &str) -> Result<Vec<String>> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        anyhow::anyhow!("{source}: line {line} is not valid UTF-8")
    })?;
    let mut out: Vec<String> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect();
    if text.ends_with('\n') || text.is_empty() {
        out.pop();
    }
    Ok(out)
}

pub fn parse_items(bytes: &[u8], jsonl: bool, source: &str) -> Result<Vec<Item>> {
    let lines = lines(bytes, source)?;
    if !jsonl {
        return Ok(lines
            .into_iter()
            .map(|text| Item { id: None, text })
            .collect());
    }
    let mut items = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{source}: line {}: not valid JSON", i + 1))?;
        let Some(obj) = v.as_object() else {
            bail!(
                "{source}: line {}: expected a JSON object with a string `text`",
                i + 1
            );
        };
        let Some(text) = obj.get("text").and_then(|t| t.as_str()) else {
            bail!(
                "{source}: line {}: the object has no string field `text`",
                i + 1
            );
        };
        items.push(Item {
            id: obj.get("id").cloned(),
            text: text.to_string(),
        });
    }
    Ok(items)
}
