//! Everything that turns bytes on disk into typed, validated values: safetensors weights,
//! `config.json`, sentence-transformers module configs, golden files, the Hugging Face cache.

pub mod config;
mod gguf_spm;
pub mod gguf_tokenizer;
mod gguf_vocab;
mod gguf_wordpiece;
pub mod golden;
pub mod hub;
pub mod input_line;
pub mod model_kinds;
pub mod st_config;

pub use kin_infer_core::io::{config_fields, gguf, gguf_writer, safetensors, source};

pub(crate) use kin_infer_core::io::read_json;
