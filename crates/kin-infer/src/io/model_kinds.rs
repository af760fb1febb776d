//! The one table of model names this build knows and their kind (encoder or decoder): the
//! Hugging Face `model_type`s of the decoder families (the encoders' are
//! `config::ModelArchitecture::SUPPORTED`) and the GGUF `general.architecture` values. Every
//! "that is a decoder: use generate" message and every GGUF dispatch asks here, so the lists
//! cannot drift apart; a leaf of io/, below the models that load them.

/// Which engine loads a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    Encoder,
    Decoder,
}

/// Decoder `model_type` values, in the order errors list them.
pub const DECODER_MODEL_TYPES: &[&str] = &[
    "llama", "mistral", "qwen2", "gpt2", "phi", "phi3", "gemma", "gemma2",
];

/// GGUF `general.architecture` values this build loads, with their kind, in the order errors
/// list them.
pub const GGUF_ARCHITECTURES: &[(&str, ModelKind)] = &[
    ("bert", ModelKind::Encoder),
    ("llama", ModelKind::Decoder),
    ("qwen2", ModelKind::Decoder),
    ("gemma", ModelKind::Decoder),
    ("gemma2", ModelKind::Decoder),
    ("phi3", ModelKind::Decoder),
    ("phi2", ModelKind::Decoder),
    ("gpt2", ModelKind::Decoder),
];

/// The kind of a GGUF architecture, `None` when this build does not load it.
pub fn gguf_kind(arch: &str) -> Option<ModelKind> {
    GGUF_ARCHITECTURES
        .iter()
        .find(|(a, _)| *a == arch)
        .map(|(_, k)| *k)
}

/// The GGUF architectures of one kind, in table order (for messages).
pub fn gguf_architectures(kind: ModelKind) -> Vec<&'static str> {
    GGUF_ARCHITECTURES
        .iter()
        .filter(|(_, k)| *k == kind)
        .map(|(a, _)| *a)
        .collect()
}
