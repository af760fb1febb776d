//! The safetensors variant of a quantized checkpoint (`kin-infer quantize --format
//! safetensors`): a copy of a model directory whose weight matrices are ggml blocks stored as
//! U8 tensors `[rows, row_bytes]`, each named in `__metadata__` as
//! `"kin.ggml_type.<name>": "<type>"` ([`crate::io::safetensors::GGML_TYPE_KEY`]); every other
//! tensor F32. Names, layout and q/k order stay the checkpoint's (no GGUF permutation), so the
//! directory loads through the same family code as the original, its matrices kept quantized
//! (`WeightStore` reads the metadata), with the bits of the original run on the dequantized
//! weights. Any family the engine loads can be written this way.

use crate::convert::gguf_export::Fallback;
use crate::error::{InferError, Result};
use crate::io::safetensors::{WeightStore, GGML_TYPE_KEY};
use crate::kernels::ggml::GgmlType;
use crate::kernels::ggml::{can_quantize, quantize};
use std::collections::HashMap;
use std::path::Path;

/// Copies everything of the model directory but its top-level weights (configuration,
/// tokenizer, chat template, sentence-transformers modules with their own weights as they are).
fn copy_rest(dir: &Path, out: &Path, top: bool) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| InferError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| InferError::io(dir, e))?;
        let (src, name) = (entry.path(), entry.file_name());
        let n = name.to_string_lossy();
        let weights = n.ends_with(".safetensors")
            || n == "model.safetensors.index.json"
            || n.ends_with(".bin")
            || n.ends_with(".gguf");
        if src.is_dir() {
            let dst = out.join(&name);
            std::fs::create_dir_all(&dst).map_err(|e| InferError::io(&dst, e))?;
            copy_rest(&src, &dst, false)?;
        } else if !(top && weights) {
            let dst = out.join(&name);
            std::fs::copy(&src, &dst).map_err(|e| InferError::io(&src, e))?;
        }
    }
    Ok(())
}

/// What [`export_report`] wrote.
#[derive(Clone, Debug)]
pub struct StExportReport {
    pub tensors: usize,
    pub quantized: usize,
    /// The 2-D `.weight` matrices left F32 because their rows are not whole blocks of `ty`.
    pub fallbacks: Vec<Fallback>,
}

/// Writes `dir`'s checkpoint to the directory `out` with its 2-D `.weight` matrices (rows of
/// whole blocks) in `ty`. Returns (tensors, quantized tensors). `progress(done, total)` per
/// tensor. The tensors are held in memory until the file is written.
pub fn export(
    dir: &Path,
    out: &Path,
    ty: GgmlType,
    progress: impl FnMut(usize, usize),
) -> Result<(usize, usize)> {
    export_report(dir, out, ty, progress).map(|r| (r.tensors, r.quantized))
}

/// [`export`], also naming each weight matrix that stayed F32 (its rows not whole blocks).
pub fn export_report(
    dir: &Path,
    out: &Path,
    ty: GgmlType,
    mut progress: impl FnMut(usize, usize),
) -> Result<StExportReport> {
    if !can_quantize(ty) {
        return Err(InferError::Unsupported(format!(
            "quantizing to {} is not supported yet (supported: q8_0, q4_0, q4_1, q5_0, q5_1, \
             q4_k, q5_k, q6_k)",
            ty.name()
        )));
    }
    let store = WeightStore::open_dir(dir)?;
    if out.canonicalize().ok() == dir.canonicalize().ok() {
        return Err(InferError::Input(format!(
            "--out {} is the model directory itself; write the quantized copy elsewhere",
            out.display()
        )));
    }
    std::fs::create_dir_all(out).map_err(|e| InferError::io(out, e))?;
    let names = store.names();
    let mut data: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut meta = HashMap::new();
    let mut fallbacks = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let shape = store.shape(name).expect("listed").to_vec();
        let values = store.read(name, &shape)?;
        if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
            return Err(InferError::Input(format!(
                "{}: tensor `{name}` holds a non-finite value at index {bad}; it cannot be quantized",
                dir.display()
            )));
        }
        match shape.as_slice() {
            [rows, cols] if name.ends_with(".weight") && cols.is_multiple_of(ty.block_len()) => {
                let mut q = Vec::new();
                quantize(ty, &values, &mut q);
                meta.insert(format!("{GGML_TYPE_KEY}{name}"), ty.name().to_string());
                let row_bytes = q.len() / rows;
                data.push((
                    name.to_string(),
                    safetensors::Dtype::U8,
                    vec![*rows, row_bytes],
                    q,
                ));
            }
            _ => {
                if let [_, cols] = shape.as_slice() {
                    if name.ends_with(".weight") {
                        fallbacks.push(Fallback {
                            tensor: name.to_string(),
                            requested: ty,
                            used: GgmlType::F32,
                            row_length: *cols,
                        });
                    }
                }
                let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                data.push((name.to_string(), safetensors::Dtype::F32, shape, bytes));
            }
        }
        progress(i + 1, names.len());
    }
    let views = data
        .iter()
        .map(|(n, dt, shape, bytes)| {
            safetensors::tensor::TensorView::new(*dt, shape.clone(), bytes)
                .map(|v| (n.clone(), v))
                .map_err(|e| InferError::Safetensors {
                    path: out.join("model.safetensors"),
                    reason: format!("tensor `{n}`: {e}"),
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let target = out.join("model.safetensors");
    safetensors::tensor::serialize_to_file(views, Some(meta.clone()), &target).map_err(|e| {
        InferError::Safetensors {
            path: target.clone(),
            reason: e.to_string(),
        }
    })?;
    // The crate writes through a private temporary file (mode 0600); a model is for reading.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| InferError::io(&target, e))?;
    }
    copy_rest(dir, out, true)?;
    Ok(StExportReport {
        tensors: data.len(),
        quantized: meta.len(),
        fallbacks,
    })
}
