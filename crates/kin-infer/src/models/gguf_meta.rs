//! What every GGUF model loader reads first, encoder or decoder: the required
//! `general.architecture`, metadata copied into a Hub-style config (naming the GGUF key in
//! every error), and llama.cpp's q/k row permutation undone. Below both loaders (and the
//! converter), so neither imports the other.

use crate::error::{InferError, Result};
use crate::io::gguf::{GgufFile, MetaValue};
use crate::io::model_kinds::{gguf_kind, ModelKind};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub(crate) fn gguf_err(gguf: &GgufFile, reason: String) -> InferError {
    InferError::Gguf {
        path: gguf.path().to_path_buf(),
        reason,
    }
}

/// `general.architecture`, required.
pub fn architecture(gguf: &GgufFile) -> Result<String> {
    match gguf.get("general.architecture") {
        Some(MetaValue::Str(s)) => Ok(s.clone()),
        Some(v) => Err(gguf_err(
            gguf,
            format!(
                "`general.architecture` is a {}, expected a string",
                v.type_name()
            ),
        )),
        None => Err(gguf_err(
            gguf,
            "no `general.architecture`: not a model file llama.cpp would load".into(),
        )),
    }
}

/// Whether the GGUF file holds an encoder: its architecture is one the kinds table
/// (`io::model_kinds`) lists as an encoder's.
pub fn is_encoder(gguf: &GgufFile) -> bool {
    architecture(gguf).is_ok_and(|a| gguf_kind(&a) == Some(ModelKind::Encoder))
}

/// A metadata value as JSON (numbers keep their value; arrays are refused, as no config field
/// read here is one).
pub(crate) fn scalar(v: &MetaValue) -> Option<Value> {
    Some(match v {
        MetaValue::Str(s) => json!(s),
        MetaValue::Bool(b) => json!(b),
        MetaValue::F32(x) => json!(*x as f64),
        MetaValue::F64(x) => json!(x),
        MetaValue::Array(_) => return None,
        other => match other.as_u64() {
            Some(u) => json!(u),
            None => json!(match *other {
                MetaValue::I8(x) => x as i64,
                MetaValue::I16(x) => x as i64,
                MetaValue::I32(x) => x as i64,
                MetaValue::I64(x) => x,
                _ => return None,
            }),
        },
    })
}

/// The Hub fields that are floats wherever a GGUF key fills them: their key must hold a
/// float (llama.cpp refuses a mistyped key too).
const FLOAT_FIELDS: &[&str] = &[
    "rope_theta",
    "rms_norm_eps",
    "layer_norm_eps",
    "layer_norm_epsilon",
    "attn_logit_softcapping",
    "final_logit_softcapping",
];

/// Copies GGUF key `key`'s value, when the file has it, into the config object `obj` as `hub`,
/// and records in `keys` that `hub` comes from `key`, so that every error about the field
/// (a missing one included) names the GGUF key. An array is an error naming the key; so is
/// a float NaN or infinite, or a float field (`FLOAT_FIELDS`) of another type
/// ([`GgufFile::float`]): JSON has no NaN, so such a value would be copied as `null`, which
/// the config reader takes for absent, and the field would silently get its default (a
/// NaN `rope.freq_base` ran a theta-1e6 model at 10000). Each field's range (an epsilon
/// >= 0, a base > 1) is checked by its family, in the error naming the GGUF key.
pub(crate) fn copy_key(
    gguf: &GgufFile,
    keys: &mut BTreeMap<String, String>,
    obj: &mut Map<String, Value>,
    hub: &str,
    key: &str,
) -> Result<()> {
    keys.insert(hub.to_string(), key.to_string());
    let Some(v) = gguf.get(key) else {
        return Ok(());
    };
    let value = if FLOAT_FIELDS.contains(&hub) || v.as_f64().is_some() {
        match gguf.float(key)? {
            Some(x) => json!(x),
            None => return Ok(()),
        }
    } else {
        scalar(v).ok_or_else(|| {
            gguf_err(
                gguf,
                format!("`{key}` is an array; a single value is expected"),
            )
        })?
    };
    obj.insert(hub.into(), value);
    Ok(())
}

/// Row `r`'s source in a q or k projection that llama.cpp's converter permuted: per head of
/// `head_dim` rows, the converter stored transformers' row `j · d/2 + i` (half `j`, pair `i`)
/// at `2i + j`.
pub(crate) fn unpermuted_row(r: usize, head_dim: usize) -> usize {
    let (head, rem) = (r / head_dim, r % head_dim);
    let half = head_dim / 2;
    let (j, i) = (rem / half, rem % half);
    head * head_dim + 2 * i + j
}
