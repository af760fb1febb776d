//! The activation numerics mode, chosen per loaded model: what the products over
//! ggml-quantized weights multiply.
//!
//! - `f32`: the activations stay f32 and every quantized weight is dequantized exactly inside
//!   the kernel, so a quantized model's output has the bits of its dequantized F32 twin
//!   ([`crate::NUMERICS_VERSION`]).
//! - `q8`: each product quantizes its activation rows to 8-bit blocks as ggml's reference
//!   does (Q8_0 / Q8_1 / Q8_K, the weight type's pairing) and runs integer block dot products
//!   (`kernels/q8_*.rs`): llama.cpp's arithmetic, several times the work per instruction.
//!   Other bits than `f32`, with their own version ([`Q8_NUMERICS_VERSION`]), and the same
//!   determinism: identical across threads, batches, prefill chunking and SIMD tiers.
//! - `auto` (the default): the faster mode for the model on this build. Today that is `f32`
//!   everywhere: measured on whole GGUF decoders (docs/numerics.md), the q8 kernels do not
//!   yet beat the f32-activation kernels at decode on every format, and lose at prefill. When
//!   they do, `auto` selects `q8` for ggml-quantized matrices on the CPU (issue 32); that
//!   switch changes `auto`'s bits, which its numerics version then says.
//!
//! Weights that are not ggml-quantized always take f32 activations; a model "runs q8" when
//! at least one of its matrices does, and reports so (`describe`, the server's model list).

use crate::error::{InferError, Result};

/// The numerics version of a model that runs in the q8 mode (its matrices over
/// ggml-quantized weights take 8-bit activations); the rest of the model is
/// [`crate::NUMERICS_VERSION`]'s, which this extends.
pub const Q8_NUMERICS_VERSION: &str = "kin-numerics/1+q8/1";

/// The environment variable that sets the mode where an option does not.
pub const ENV: &str = "KIN_INFER_ACTIVATIONS";

/// The mode asked for (`--activations`, `KIN_INFER_ACTIVATIONS`, the APIs' `activations`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Activations {
    /// The faster mode on this build: today `f32` (see the module doc).
    #[default]
    Auto,
    /// 8-bit activations for every ggml-quantized matrix (an error where there is none, or
    /// on a GPU backend).
    Q8,
    /// f32 activations everywhere: quantized == dequantized F32, bit for bit.
    F32,
}

impl Activations {
    /// The accepted spellings, for messages.
    pub const NAMES: &'static str = "auto, q8, f32";

    pub fn name(self) -> &'static str {
        match self {
            Activations::Auto => "auto",
            Activations::Q8 => "q8",
            Activations::F32 => "f32",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Activations::Auto),
            "q8" => Some(Activations::Q8),
            "f32" => Some(Activations::F32),
            _ => None,
        }
    }

    /// `asked`, else `KIN_INFER_ACTIVATIONS`, else `auto`.
    ///
    /// # Errors
    /// The variable set to something else than [`Self::NAMES`].
    pub fn resolve(asked: Option<Activations>) -> Result<Self> {
        if let Some(a) = asked {
            return Ok(a);
        }
        match std::env::var(ENV) {
            Ok(v) if !v.trim().is_empty() => Activations::parse(&v).ok_or_else(|| {
                InferError::Input(format!(
                    "{ENV}=`{v}` is not an activation mode (expected one of: {})",
                    Self::NAMES
                ))
            }),
            _ => Ok(Activations::Auto),
        }
    }

    /// Whether ggml-quantized matrices take 8-bit activations on the CPU (only when asked:
    /// `auto` is `f32` until the q8 kernels are the faster ones, see the module doc).
    pub fn wants_q8(self) -> bool {
        self == Activations::Q8
    }
}

/// What a loaded model runs: the mode resolved against its weights and backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numerics {
    F32,
    Q8,
}

impl Numerics {
    /// `"f32"` or `"q8"` (what `describe` and the server report as `activations`).
    pub fn name(self) -> &'static str {
        match self {
            Numerics::F32 => "f32",
            Numerics::Q8 => "q8",
        }
    }

    /// The numerics version this model's outputs are pinned to.
    pub fn version(self) -> &'static str {
        match self {
            Numerics::F32 => crate::NUMERICS_VERSION,
            Numerics::Q8 => Q8_NUMERICS_VERSION,
        }
    }

    /// Checks what a model resolved to against what was asked: an explicit `q8` that found
    /// no ggml-quantized matrix to apply to is an error (nothing silent), naming `what`.
    ///
    /// # Errors
    /// `asked` is [`Activations::Q8`] and the model runs f32.
    pub fn check(self, asked: Activations, what: &str) -> Result<Self> {
        if asked == Activations::Q8 && self == Numerics::F32 {
            return Err(InferError::Unsupported(format!(
                "activations q8: {what} has no ggml-quantized weight matrix to run with 8-bit \
                 activations on this backend (q8 applies to Q4_0 … Q8_0 and the K-quants on \
                 the CPU; use auto or f32)"
            )));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_q8_without_quantized_weights_is_an_error() {
        for a in [Activations::Auto, Activations::Q8, Activations::F32] {
            assert_eq!(Activations::parse(a.name()), Some(a));
        }
        assert_eq!(Activations::parse(" Q8 "), Some(Activations::Q8));
        assert_eq!(Activations::parse("int8"), None);
        assert_eq!(
            Activations::resolve(Some(Activations::F32)).unwrap(),
            Activations::F32
        );
        assert!(Numerics::F32.check(Activations::Q8, "m").is_err());
        assert_eq!(
            Numerics::F32.check(Activations::Auto, "m").unwrap(),
            Numerics::F32
        );
        assert_eq!(Numerics::Q8.version(), Q8_NUMERICS_VERSION);
    }
}
