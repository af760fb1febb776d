//! Encoder families, one file each.

pub mod albert;
pub mod bert;
pub mod deberta;
pub mod gguf;
pub mod jina;
pub mod nomic;
pub mod t5;
