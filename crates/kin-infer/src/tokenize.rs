//! Text → token ids with the `tokenizers` crate (pure-Rust regex backend) from
//! `tokenizer.json`. Truncation is set to the *model's* limit; whatever truncation or padding
//! `tokenizer.json` itself stores is cleared, because it is not the model's limit.

use crate::error::{InferError, Result};
use std::path::{Path, PathBuf};
use tokenizers::{TruncationDirection, TruncationParams, TruncationStrategy};

/// One tokenized text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
}

pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
    max_length: usize,
}

impl TextTokenizer {
    /// Loads `dir/tokenizer.json`, truncating to `max_length` tokens (special tokens included).
    pub fn load(dir: &Path, max_length: usize) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(InferError::Tokenizer {
                reason: format!(
                    "{} does not exist; text input needs the model's tokenizer.json (token ids need none)",
                    path.display()
                ),
            });
        }
        let inner = tokenizers::Tokenizer::from_file(&path).map_err(|e| InferError::Tokenizer {
            reason: format!("{}: {e}", path.display()),
        })?;
        Self::from_tokenizer(inner, &path, max_length)
    }

    /// A tokenizer built elsewhere (a GGUF file's, or `load`'s), truncated to `max_length`
    /// tokens, its own padding and truncation settings cleared.
    pub fn from_tokenizer(
        mut inner: tokenizers::Tokenizer,
        path: &Path,
        max_length: usize,
    ) -> Result<Self> {
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| InferError::Tokenizer {
                reason: format!("{}: {e}", path.display()),
            })?;
        Ok(TextTokenizer {
            inner,
            path: path.to_path_buf(),
            max_length,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn max_length(&self) -> usize {
        self.max_length
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Tokenizes texts with the tokenizer's special tokens.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<Encoded>> {
        texts
            .iter()
            .map(|t| self.encode_flagged(t).map(|(e, _)| e))
            .collect()
    }

    /// Tokenizes one text, and says whether truncation to the model's limit cut it (a server
    /// asked not to truncate refuses such a text instead).
    pub fn encode_flagged(&self, text: &str) -> Result<(Encoded, bool)> {
        let e = self
            .inner
            .encode(text, true)
            .map_err(|e| InferError::Tokenizer {
                reason: format!("{}: {e}", self.path.display()),
            })?;
        let cut = !e.get_overflowing().is_empty();
        Ok((
            Encoded {
                ids: e.get_ids().to_vec(),
                type_ids: e.get_type_ids().to_vec(),
            },
            cut,
        ))
    }
}
