//! Writes GGUF files (version 3, llama.cpp's container): metadata pairs in order, the tensor
//! directory, then each tensor's data at 32-byte alignment (`general.alignment`'s default).
//!
//! Tensors are streamed: the directory is written from their declared types and shapes, then
//! each tensor's bytes are asked for in order ([`write`]'s `data`), so a model is quantized
//! one tensor at a time, never held whole in memory. The file is written beside its final
//! path and renamed into place when complete, so an interrupted run never leaves a truncated
//! file under the name. `io/gguf.rs` reads what this writes (tested both ways, and by
//! llama.cpp itself in `scripts/`).

use super::gguf::MetaValue;
use crate::error::{InferError, Result};
use crate::kernels::ggml::GgmlType;
use std::io::{BufWriter, Write};
use std::path::Path;

const ALIGNMENT: usize = 32;

/// One tensor of the directory: its name, stored type and dims in GGUF's order (innermost,
/// i.e. a row's length, first).
#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    pub ty: GgmlType,
    pub dims: Vec<usize>,
}

impl TensorInfo {
    /// Bytes of the data (`None` when a row is not whole blocks or the size overflows).
    pub fn bytes(&self) -> Option<usize> {
        let row = self.ty.row_bytes(*self.dims.first()?)?;
        self.dims[1..]
            .iter()
            .try_fold(row, |n, d| n.checked_mul(*d))
    }
}

fn type_code(v: &MetaValue) -> u32 {
    match v {
        MetaValue::U8(_) => 0,
        MetaValue::I8(_) => 1,
        MetaValue::U16(_) => 2,
        MetaValue::I16(_) => 3,
        MetaValue::U32(_) => 4,
        MetaValue::I32(_) => 5,
        MetaValue::F32(_) => 6,
        MetaValue::Bool(_) => 7,
        MetaValue::Str(_) => 8,
        MetaValue::Array(_) => 9,
        MetaValue::U64(_) => 10,
        MetaValue::I64(_) => 11,
        MetaValue::F64(_) => 12,
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &MetaValue) -> std::result::Result<(), String> {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(*x as u8),
        MetaValue::Str(s) => put_str(out, s),
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Array(items) => {
            let code = items.first().map_or(4, type_code);
            if items.iter().any(|i| type_code(i) != code) {
                return Err("an array mixes value types (GGUF arrays hold one type)".into());
            }
            out.extend_from_slice(&code.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for i in items {
                put_value(out, i)?;
            }
        }
    }
    Ok(())
}

fn pad_to(n: usize) -> usize {
    n.div_ceil(ALIGNMENT) * ALIGNMENT
}

/// Writes `path`: `metadata` in order, the `tensors` directory, and each tensor's bytes as
/// `data(i)` returns them (exactly [`TensorInfo::bytes`] long, checked). `progress(i)` is
/// called after tensor `i` is written.
pub fn write(
    path: &Path,
    metadata: &[(String, MetaValue)],
    tensors: &[TensorInfo],
    mut data: impl FnMut(usize) -> Result<Vec<u8>>,
    mut progress: impl FnMut(usize),
) -> Result<()> {
    let bad = |reason: String| InferError::Gguf {
        path: path.to_path_buf(),
        reason,
    };
    let mut head = Vec::new();
    head.extend_from_slice(b"GGUF");
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    head.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (key, value) in metadata {
        put_str(&mut head, key);
        head.extend_from_slice(&type_code(value).to_le_bytes());
        put_value(&mut head, value).map_err(|e| bad(format!("`{key}`: {e}")))?;
    }
    let mut offset = 0usize;
    let mut sizes = Vec::with_capacity(tensors.len());
    for t in tensors {
        let size = t.bytes().ok_or_else(|| {
            bad(format!(
                "tensor `{}`: {:?} is not whole {} blocks",
                t.name,
                t.dims,
                t.ty.name()
            ))
        })?;
        put_str(&mut head, &t.name);
        head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            head.extend_from_slice(&(*d as u64).to_le_bytes());
        }
        head.extend_from_slice(&t.ty.code().to_le_bytes());
        head.extend_from_slice(&(offset as u64).to_le_bytes());
        sizes.push(size);
        offset = pad_to(offset + size);
    }
    head.resize(pad_to(head.len()), 0);

    let tmp = path.with_extension("gguf.partial");
    let io = |e| InferError::io(&tmp, e);
    let file = std::fs::File::create(&tmp).map_err(io)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    w.write_all(&head).map_err(io)?;
    for (i, (t, size)) in tensors.iter().zip(&sizes).enumerate() {
        let bytes = data(i)?;
        if bytes.len() != *size {
            return Err(bad(format!(
                "tensor `{}`: {} bytes given, {size} declared",
                t.name,
                bytes.len()
            )));
        }
        w.write_all(&bytes).map_err(io)?;
        w.write_all(&vec![0u8; pad_to(*size) - size]).map_err(io)?;
        progress(i);
    }
    let file = w.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| InferError::io(path, e))
}
