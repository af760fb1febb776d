//! Window files → validated floats; the parsing itself is [`inmotion::input`].

use anyhow::Result;

/// A file's values, `#` comment lines skipped.
pub fn read_values(path: &std::path::Path) -> Result<Vec<f32>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(inmotion::input::window_values(
        &text,
        &path.display().to_string(),
    )?)
}
