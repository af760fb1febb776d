//! Model conversion: the writers behind `kin-infer quantize` (a Hugging Face checkpoint to a
//! quantized GGUF or safetensors) and `kin-infer convert` (a decoder GGUF back to a Hugging
//! Face directory). They sit above [`crate::models`] and [`crate::generate`] because they read
//! a family's config and chat template; [`crate::io`] stays below the models and never
//! imports them.

pub mod gguf_convert;
pub mod gguf_export;
pub mod st_quantize;
