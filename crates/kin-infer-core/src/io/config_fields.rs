//! Typed access to the fields of a raw `config.json`, shared by every encoder family.
//!
//! Each family validates its own keys (the Hub's and transformers 5.x's spellings differ per
//! family), but a bad value must always come back as an [`InferError::Config`] naming the
//! field, with the same wording whichever family read it; this is the one place that wording
//! lives. A `null` value counts as absent everywhere, as transformers treats it.

use crate::error::{InferError, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest size any one config field may declare (a width, a count of layers, heads or
/// positions): far above real models, and small enough that a product of two stays far from
/// overflowing `usize`.
pub const MAX_SIZE: usize = 1 << 24;

/// A model's configuration as families read it: an object with the Hub's `config.json` keys,
/// and where it came from. `config.json` is one container ([`ConfigSource::json`]); another
/// (GGUF's metadata, next) fills the same object with its values under the Hub's keys
/// ([`ConfigSource::from_object`]) and gives, for errors, its own key of each field it filled,
/// so one typed reader ([`ConfigFields`]) validates both with the same wording.
pub struct ConfigSource {
    value: Value,
    path: PathBuf,
    /// Hub key → the container's own key (empty for config.json).
    keys: BTreeMap<String, String>,
}

impl ConfigSource {
    /// Reads `path` (a `config.json`).
    pub fn json(path: &Path) -> Result<Self> {
        Ok(ConfigSource {
            value: super::read_json(path)?,
            path: path.to_path_buf(),
            keys: BTreeMap::new(),
        })
    }

    /// A config another container filled: `value` under the Hub's keys, `path` the container
    /// file, `keys` each filled field's key in that container.
    pub fn from_object(value: Value, path: PathBuf, keys: BTreeMap<String, String>) -> Self {
        ConfigSource { value, path, keys }
    }

    /// The raw object.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The file errors name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The typed reader over it.
    pub fn fields(&self) -> Result<ConfigFields<'_>> {
        let mut f = ConfigFields::new(&self.value, &self.path)?;
        f.keys = Some(&self.keys);
        Ok(f)
    }
}

/// The typed reader of a config object (see [`ConfigSource`]), naming its file in errors.
pub struct ConfigFields<'a> {
    /// The raw object, for the few nested keys a family reads itself.
    pub v: &'a Value,
    path: &'a Path,
    keys: Option<&'a BTreeMap<String, String>>,
}

impl<'a> ConfigFields<'a> {
    /// Fails with a JSON error unless the file holds an object.
    pub fn new(v: &'a Value, path: &'a Path) -> Result<Self> {
        if !v.is_object() {
            return Err(InferError::Json {
                path: path.to_path_buf(),
                reason: "expected a JSON object".into(),
            });
        }
        Ok(ConfigFields {
            v,
            path,
            keys: None,
        })
    }

    pub fn err(&self, field: &str, reason: impl Into<String>) -> InferError {
        // A field another container filled is named by its key there too.
        let top = field.split('.').next().unwrap_or(field);
        let field = match self.keys.and_then(|k| k.get(top)) {
            Some(own) => format!("{field} (`{own}` in the file)"),
            None => field.to_string(),
        };
        InferError::Config {
            path: self.path.to_path_buf(),
            field,
            reason: reason.into(),
        }
    }

    /// The value of `field`, `None` when absent or null.
    pub fn get(&self, field: &str) -> Option<&'a Value> {
        self.v.get(field).filter(|x| !x.is_null())
    }

    /// Present as an explicit `null` (for the few keys where null and absent differ, e.g.
    /// Gemma 2's softcaps: absent takes the default, null turns it off).
    pub fn is_null(&self, field: &str) -> bool {
        self.v.get(field).is_some_and(Value::is_null)
    }

    /// Present and not null.
    pub fn has(&self, field: &str) -> bool {
        self.get(field).is_some()
    }

    pub fn opt_usize(&self, field: &str) -> Result<Option<usize>> {
        self.opt_usize_any(&[field])
    }

    /// The first present of `names` (the Hub spelling first, then aliases), as an integer.
    pub fn opt_usize_any(&self, names: &[&str]) -> Result<Option<usize>> {
        for n in names {
            if let Some(x) = self.get(n) {
                return x.as_u64().map(|v| Some(v as usize)).ok_or_else(|| {
                    self.err(n, format!("expected a non-negative integer, found {x}"))
                });
            }
        }
        Ok(None)
    }

    /// A non-negative integer, `default` when absent (an error naming `field` when there is
    /// no default).
    pub fn usize(&self, field: &str, default: Option<usize>) -> Result<usize> {
        match (self.opt_usize(field)?, default) {
            (Some(n), _) | (None, Some(n)) => Ok(n),
            (None, None) => Err(self.err(field, "missing")),
        }
    }

    /// A size within `1..=2^24` (first present of `names`, else `default`); errors name the
    /// first spelling.
    pub fn dim(&self, names: &[&str], default: Option<usize>) -> Result<usize> {
        match (self.opt_usize_any(names)?, default) {
            (Some(v), _) | (None, Some(v)) => self.positive(names[0], v),
            (None, None) => Err(self.err(names[0], "missing")),
        }
    }

    /// A signed integer (DeBERTa uses negative values as "unset").
    pub fn int(&self, field: &str, default: Option<i64>) -> Result<i64> {
        match (self.get(field), default) {
            (Some(x), _) => x
                .as_i64()
                .ok_or_else(|| self.err(field, format!("expected an integer, found {x}"))),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(self.err(field, "missing")),
        }
    }

    /// A signed integer that must be a size within `1..=2^24`.
    pub fn size(&self, field: &str, default: Option<i64>) -> Result<usize> {
        let n = self.int(field, default)?;
        if !(1..=MAX_SIZE as i64).contains(&n) {
            return Err(self.err(field, format!("{n} is out of range (1..={MAX_SIZE})")));
        }
        Ok(n as usize)
    }

    /// `field` read by `read` (`None` when absent); a value it rejects is an error naming the
    /// field and what was `expected`.
    fn opt_typed<T>(
        &self,
        field: &str,
        read: impl FnOnce(&'a Value) -> Option<T>,
        expected: &str,
    ) -> Result<Option<T>> {
        match self.get(field) {
            None => Ok(None),
            Some(x) => read(x)
                .map(Some)
                .ok_or_else(|| self.err(field, format!("expected {expected}, found {x}"))),
        }
    }

    pub fn f64(&self, field: &str, default: f64) -> Result<f64> {
        Ok(self
            .opt_typed(field, Value::as_f64, "a number")?
            .unwrap_or(default))
    }

    pub fn bool(&self, field: &str, default: bool) -> Result<bool> {
        Ok(self
            .opt_typed(field, Value::as_bool, "true or false")?
            .unwrap_or(default))
    }

    pub fn opt_str(&self, field: &str) -> Result<Option<&'a str>> {
        self.opt_typed(field, Value::as_str, "a string")
    }

    /// A string, `default` when absent (an error naming `field` when there is no default).
    pub fn str(&self, field: &str, default: Option<&str>) -> Result<String> {
        match (self.opt_str(field)?, default) {
            (Some(s), _) | (None, Some(s)) => Ok(s.to_string()),
            (None, None) => Err(self.err(field, "missing")),
        }
    }

    /// A list of strings, or the legacy `"a|b"` spelling; lower-cased and trimmed.
    pub fn str_list(&self, field: &str) -> Result<Vec<String>> {
        let items: Vec<String> = match self.get(field) {
            None => vec![],
            Some(Value::String(s)) => s.split('|').map(String::from).collect(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_str().map(String::from).ok_or_else(|| {
                        self.err(field, format!("expected a list of strings, found {x}"))
                    })
                })
                .collect::<Result<_>>()?,
            Some(x) => {
                return Err(self.err(
                    field,
                    format!("expected a list of strings or a `|`-separated string, found {x}"),
                ))
            }
        };
        Ok(items.iter().map(|s| s.trim().to_lowercase()).collect())
    }

    /// Every size must be in `1..=2^24`.
    pub fn check_sizes(&self, sizes: &[(&str, usize)]) -> Result<()> {
        for &(field, v) in sizes {
            self.positive(field, v)?;
        }
        Ok(())
    }

    /// An error naming `by_field` unless `by_field`'s `by` divides `field`'s `value` (the
    /// hidden width by the attention heads, the query heads by the key-value heads).
    pub fn check_multiple(
        &self,
        field: &str,
        value: usize,
        by_field: &str,
        by: usize,
    ) -> Result<()> {
        if by == 0 || !value.is_multiple_of(by) {
            return Err(self.err(
                by_field,
                format!("{field} {value} is not a multiple of {by_field} {by}"),
            ));
        }
        Ok(())
    }

    /// `v` if it is a size within `1..=2^24`.
    pub fn positive(&self, field: &str, v: usize) -> Result<usize> {
        if v == 0 || v > MAX_SIZE {
            return Err(self.err(field, format!("{v} is out of range (1..={MAX_SIZE})")));
        }
        Ok(v)
    }

    /// `v` if it is finite and > 1 (a rotary base).
    pub fn positive_f64(&self, field: &str, v: f64) -> Result<f64> {
        if v.is_finite() && v > 1.0 {
            Ok(v)
        } else {
            Err(self.err(field, format!("{v}: must be a finite number > 1")))
        }
    }

    /// A finite, non-negative epsilon read from `field` (`default` when absent).
    pub fn eps(&self, field: &str, default: f64) -> Result<f32> {
        let v = self.f64(field, default)?;
        self.check_eps(field, v)
    }

    /// `v` as an epsilon if it is finite and non-negative (for families that validate it after
    /// their other fields, so the first error reported stays the same).
    pub fn check_eps(&self, field: &str, v: f64) -> Result<f32> {
        if v.is_finite() && v >= 0.0 {
            Ok(v as f32)
        } else {
            Err(self.err(field, "must be finite and >= 0"))
        }
    }

    /// `pad_token_id` (default `default`), checked against the vocabulary.
    pub fn pad_token_id(&self, default: usize, vocab: usize) -> Result<u32> {
        let pad = self.opt_usize("pad_token_id")?.unwrap_or(default);
        self.check_pad(pad, vocab)
    }

    /// `pad` if it lies inside the vocabulary.
    pub fn check_pad(&self, pad: usize, vocab: usize) -> Result<u32> {
        if pad >= vocab {
            return Err(self.err(
                "pad_token_id",
                format!("{pad} is outside the vocabulary (size {vocab})"),
            ));
        }
        Ok(pad as u32)
    }

    /// Every token id `field` holds (one id or a list; absent or `null` hold none) must name
    /// a token of a vocabulary of `vocab`: an `eos_token_id` past the vocabulary is never
    /// generated, so generation would never stop at it. An error names the field (and its
    /// key in another container, `tokenizer.ggml.eos_token_id`) and the vocabulary size; the
    /// ids' type is checked where they are read.
    pub fn check_token_ids(&self, field: &str, vocab: usize) -> Result<()> {
        let one;
        let ids: &[Value] = match self.get(field) {
            None => return Ok(()),
            Some(Value::Array(a)) => a,
            Some(x) => {
                one = [x.clone()];
                &one
            }
        };
        for x in ids {
            if let Some(id) = x.as_u64().filter(|&id| id >= vocab as u64) {
                return Err(self.err(
                    field,
                    format!("token id {id} is outside the vocabulary (size {vocab})"),
                ));
            }
        }
        Ok(())
    }

    /// `dtype` (transformers 5.x) or `torch_dtype` (the Hub's older spelling); both are
    /// type-checked when present.
    pub fn dtype(&self) -> Result<Option<String>> {
        Ok(self
            .opt_str("dtype")?
            .or(self.opt_str("torch_dtype")?)
            .map(String::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn another_container_names_its_own_key_in_errors() {
        let keys = BTreeMap::from([(
            "max_position_embeddings".to_string(),
            "llama.context_length".to_string(),
        )]);
        let src = ConfigSource::from_object(
            json!({"max_position_embeddings": -3}),
            PathBuf::from("model.gguf"),
            keys,
        );
        let f = src.fields().unwrap();
        let e = f
            .usize("max_position_embeddings", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("model.gguf"), "{e}");
        assert!(e.contains("`llama.context_length` in the file"), "{e}");
        // config.json: the field alone.
        let plain = ConfigFields::new(src.value(), Path::new("config.json")).unwrap();
        let e = plain
            .usize("max_position_embeddings", None)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("in the file"), "{e}");
    }
}
