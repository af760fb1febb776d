//! Text → validated floats for `predict` windows and `stream` lines: values separated by any
//! whitespace or commas; `nan` / `inf` rejected; errors say where.

use crate::error::{Error, Result};

/// Parses every value of `text`; `what` names the source in errors (a file, a line).
pub fn parse_values(text: &str, what: &str) -> Result<Vec<f32>> {
    let mut out = Vec::new();
    for (i, tok) in text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .enumerate()
    {
        match tok.parse::<f32>() {
            Ok(v) if v.is_finite() => out.push(v),
            Ok(_) => {
                return Err(Error::Input(format!(
                    "{what}: value {} (`{tok}`) is not finite (nan/inf are rejected)",
                    i + 1
                )))
            }
            Err(_) => {
                return Err(Error::Input(format!(
                    "{what}: value {} (`{tok}`) is not a number",
                    i + 1
                )))
            }
        }
    }
    Ok(out)
}

/// The values of a window file's text, `#` comment lines skipped.
pub fn window_values(text: &str, what: &str) -> Result<Vec<f32>> {
    let body: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    parse_values(&body, what)
}

/// One `stream` line: `None` when it is blank or a `#` comment, else its values.
pub fn stream_line(line: &str, what: &str) -> Result<Option<Vec<f32>>> {
    let body = line.trim();
    if body.is_empty() || body.starts_with('#') {
        return Ok(None);
    }
    parse_values(body, what).map(Some)
}

#[cfg(test)]
mod tests {
    use super::{parse_values, stream_line, window_values};

    #[test]
    fn separators_and_rejections() {
        assert_eq!(
            parse_values("1, 2\t3\n4,5", "x").unwrap(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0]
        );
        assert!(parse_values("1 nan", "x")
            .unwrap_err()
            .to_string()
            .contains("not finite"));
        assert!(parse_values("1 inf", "x").is_err());
        assert!(parse_values("1 abc", "x")
            .unwrap_err()
            .to_string()
            .contains("not a number"));
    }

    #[test]
    fn comments_and_blank_lines() {
        assert_eq!(
            window_values("# header\n1 2\n  # note\n3", "w").unwrap(),
            vec![1.0, 2.0, 3.0]
        );
        assert_eq!(stream_line("  ", "s").unwrap(), None);
        assert_eq!(stream_line("# c", "s").unwrap(), None);
        assert_eq!(stream_line(" 1,2 ", "s").unwrap(), Some(vec![1.0, 2.0]));
    }
}
