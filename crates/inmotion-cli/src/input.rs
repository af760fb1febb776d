//! Text → validated floats: values separated by any whitespace or commas; `nan` / `inf`
//! rejected; errors say where.

use anyhow::{bail, Result};

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
            Ok(_) => bail!(
                "{what}: value {} (`{tok}`) is not finite (nan/inf are rejected)",
                i + 1
            ),
            Err(_) => bail!("{what}: value {} (`{tok}`) is not a number", i + 1),
        }
    }
    Ok(out)
}

/// A file's values, `#` comment lines skipped.
pub fn read_values(path: &std::path::Path) -> Result<Vec<f32>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let body: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    parse_values(&body, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_values;

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
}
