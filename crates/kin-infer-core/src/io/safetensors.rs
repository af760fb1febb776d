//! Memory-mapped safetensors weights, single file or sharded (`model.safetensors.index.json`).
//!
//! Headers are validated once at open (offsets contiguous, in bounds, sizes consistent with
//! dtype and shape) by the `safetensors` crate; tensors are then read straight out of the map
//! and widened to f32. Names are resolved against a list of prefixes (`bert.`, `roberta.`, ...)
//! because checkpoints saved from task heads nest the encoder under one.

use super::gguf::GgufFile;
use crate::error::{InferError, Result};
use crate::kernels::ggml::GgmlType;
use crate::kernels::{StoredRows, WeightFormat};
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Storage type of a tensor on disk: one of the kernels' [`WeightFormat`]s (the container's
/// dtype maps onto the one description of a stored weight).
pub type StorageDtype = WeightFormat;

/// A tensor's stored type: a safetensors dtype, or a ggml type (a GGUF file's tensors, see
/// [`WeightStore::open_gguf`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stored {
    St(Dtype),
    Ggml(GgmlType),
}

impl Stored {
    /// The ggml type with this storage, where one exists (F32/F16/BF16 and the blocks).
    fn ggml(self) -> Option<GgmlType> {
        match self {
            Stored::St(Dtype::F32) => Some(GgmlType::F32),
            Stored::St(Dtype::F16) => Some(GgmlType::F16),
            Stored::St(Dtype::BF16) => Some(GgmlType::BF16),
            Stored::St(_) => None,
            Stored::Ggml(t) => Some(t),
        }
    }

    fn name(self) -> String {
        match self {
            Stored::St(d) => format!("{d:?}"),
            Stored::Ggml(t) => t.name().to_string(),
        }
    }
}

/// `__metadata__` key prefix naming a tensor's ggml block type: the safetensors variant of a
/// quantized checkpoint (`kin-infer quantize --format safetensors`) stores a block matrix as a
/// U8 tensor `[rows, row_bytes]` with `"kin.ggml_type.<name>": "Q4_0"` beside it.
pub const GGML_TYPE_KEY: &str = "kin.ggml_type.";

/// The storage and logical shape of a block-quantized safetensors tensor, validated: U8,
/// two-dimensional, rows of whole blocks of a type this engine reads.
fn block_tensor(
    path: &Path,
    name: &str,
    ty: &str,
    dtype: Dtype,
    shape: &[usize],
) -> Result<(Stored, Vec<usize>)> {
    let bad = |reason: String| InferError::Safetensors {
        path: path.to_path_buf(),
        reason: format!("tensor `{name}` ({GGML_TYPE_KEY}{name} = `{ty}`): {reason}"),
    };
    let t = GgmlType::ALL
        .into_iter()
        .find(|t| t.name() == ty && t.block_len() > 1)
        .ok_or_else(|| bad("not a ggml block type this build reads".into()))?;
    match (dtype, shape) {
        (Dtype::U8, [rows, row_bytes]) if row_bytes.is_multiple_of(t.block_bytes()) => Ok((
            Stored::Ggml(t),
            vec![*rows, row_bytes / t.block_bytes() * t.block_len()],
        )),
        _ => Err(bad(format!(
            "expected a U8 tensor [rows, whole blocks of {} bytes], found {dtype:?} {shape:?}",
            t.block_bytes()
        ))),
    }
}

#[derive(Clone, Debug)]
struct TensorEntry {
    shard: usize,
    dtype: Stored,
    shape: Vec<usize>,
    /// Absolute byte range in the shard's map.
    start: usize,
    end: usize,
}

struct Shard {
    path: PathBuf,
    map: Arc<Mmap>,
}

/// f32 tensor data: borrowed straight from the map when the file stores aligned little-endian
/// F32 (no copy, and pages never touched are never read: an embedding table costs only the
/// rows used), else widened into an owned buffer.
pub enum TensorData {
    Mapped {
        map: Arc<Mmap>,
        start: usize,
        len: usize,
    },
    Owned(Vec<f32>),
}

impl TensorData {
    pub fn as_slice(&self) -> &[f32] {
        match self {
            TensorData::Mapped { map, start, len } => {
                let bytes = &map[*start..*start + *len * 4];
                // SAFETY: `read` only builds `Mapped` for a little-endian host and a 4-byte
                // aligned start, and every bit pattern is a valid f32.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), *len) }
            }
            TensorData::Owned(v) => v,
        }
    }
}

/// A weight matrix as stored, owned: f32, raw bf16/f16 bits that stay half precision in
/// memory and are widened inside the GEMM micro-kernels (exactly, so the products are the f32
/// bits), or the rows of a block format (each row whole blocks), which stay quantized
/// likewise. [`StoredMatrix::rows`] is the view the backend seam prepares.
pub enum StoredMatrix {
    F32(TensorData),
    Half(WeightFormat, Vec<u16>),
    Blocks(WeightFormat, Vec<u8>),
}

impl StoredMatrix {
    /// The stored rows, for `prepare_weights`.
    pub fn rows(&self) -> StoredRows<'_> {
        match self {
            StoredMatrix::F32(t) => StoredRows::F32(t.as_slice()),
            StoredMatrix::Half(f, bits) => StoredRows::Half(*f, bits),
            StoredMatrix::Blocks(f, bytes) => StoredRows::Blocks(*f, bytes),
        }
    }

    /// The values widened (or dequantized by the reference) to f32.
    pub fn to_f32(&self) -> std::borrow::Cow<'_, [f32]> {
        self.rows().to_f32()
    }

    /// The storage format.
    pub fn format(&self) -> WeightFormat {
        self.rows().format()
    }

    /// The same matrix with its rows (each `row_len` values) reordered: row `i` of the result
    /// is row `from(i)` of this one. Moves stored rows, so a quantized row stays as stored.
    pub fn permute_rows(self, row_len: usize, from: impl Fn(usize) -> usize) -> StoredMatrix {
        fn gather<T: Copy>(v: &[T], unit: usize, from: &dyn Fn(usize) -> usize) -> Vec<T> {
            let rows = v.len().checked_div(unit).unwrap_or(0);
            let mut out = Vec::with_capacity(v.len());
            for i in 0..rows {
                out.extend_from_slice(&v[from(i) * unit..][..unit]);
            }
            out
        }
        match self {
            StoredMatrix::F32(t) => {
                StoredMatrix::F32(TensorData::Owned(gather(&t, row_len, &from)))
            }
            StoredMatrix::Half(f, bits) => StoredMatrix::Half(f, gather(&bits, row_len, &from)),
            StoredMatrix::Blocks(f, bytes) => {
                let unit = f.row_bytes(row_len).unwrap_or(0);
                StoredMatrix::Blocks(f, gather(&bytes, unit, &from))
            }
        }
    }
}

impl std::ops::Deref for TensorData {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        self.as_slice()
    }
}

/// All the tensors of a checkpoint, across its shards.
pub struct WeightStore {
    shards: Vec<Shard>,
    tensors: HashMap<String, TensorEntry>,
    /// The file named in errors: the single file or the index.
    origin: PathBuf,
}

impl WeightStore {
    /// Opens `dir/model.safetensors` or, failing that, `dir/model.safetensors.index.json`.
    pub fn open_dir(dir: &Path) -> Result<Self> {
        let single = dir.join("model.safetensors");
        let index = dir.join("model.safetensors.index.json");
        if single.is_file() {
            Self::open_files(std::slice::from_ref(&single), single.clone())
        } else if index.is_file() {
            #[derive(serde::Deserialize)]
            struct Index {
                weight_map: BTreeMap<String, String>,
            }
            let idx: Index = super::read_json(&index)?;
            let mut files: Vec<String> = idx.weight_map.values().cloned().collect();
            files.sort();
            files.dedup();
            for f in &files {
                if f.contains("..") || Path::new(f).is_absolute() {
                    return Err(InferError::Config {
                        path: index.clone(),
                        field: "weight_map".into(),
                        reason: format!("shard name `{f}` escapes the model directory"),
                    });
                }
            }
            let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(f)).collect();
            let store = Self::open_files(&paths, index.clone())?;
            // Every tensor the index names must be in the shard it names.
            for (name, file) in &idx.weight_map {
                let shard = files.iter().position(|f| f == file).unwrap_or(usize::MAX);
                match store.tensors.get(name) {
                    Some(e) if e.shard == shard => {}
                    _ => {
                        return Err(InferError::Safetensors {
                            path: dir.join(file),
                            reason: format!(
                            "index {} lists tensor `{name}` here, but the shard does not hold it",
                            index.display()
                        ),
                        })
                    }
                }
            }
            Ok(store)
        } else {
            Err(InferError::io(
                &single,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no model.safetensors or model.safetensors.index.json in the model directory",
                ),
            ))
        }
    }

    /// Opens explicit shard files; `origin` is the path named in errors about missing tensors.
    pub fn open_files(paths: &[PathBuf], origin: PathBuf) -> Result<Self> {
        let mut shards = Vec::with_capacity(paths.len());
        let mut tensors = HashMap::new();
        for (si, path) in paths.iter().enumerate() {
            let file = File::open(path).map_err(|e| InferError::io(path, e))?;
            // SAFETY: the map is read-only and private; like every mmap-based loader we
            // assume the file is not truncated by another process while we hold it.
            let map = unsafe { Mmap::map(&file) }.map_err(|e| InferError::io(path, e))?;
            let (header_len, meta) =
                SafeTensors::read_metadata(&map).map_err(|e| InferError::Safetensors {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
            let base = 8 + header_len;
            let blocks = meta.metadata().as_ref();
            for (name, info) in meta.tensors() {
                let (s, e) = info.data_offsets;
                let (dtype, shape) =
                    match blocks.and_then(|m| m.get(&format!("{GGML_TYPE_KEY}{name}"))) {
                        None => (Stored::St(info.dtype), info.shape.clone()),
                        Some(ty) => block_tensor(path, &name, ty, info.dtype, &info.shape)?,
                    };
                let entry = TensorEntry {
                    shard: si,
                    dtype,
                    shape,
                    start: base + s,
                    end: base + e,
                };
                if tensors.insert(name.clone(), entry).is_some() {
                    return Err(InferError::Safetensors {
                        path: path.clone(),
                        reason: format!("tensor `{name}` appears in more than one shard"),
                    });
                }
            }
            shards.push(Shard {
                path: path.clone(),
                map: Arc::new(map),
            });
        }
        Ok(WeightStore {
            shards,
            tensors,
            origin,
        })
    }

    /// Opens a GGUF file's tensors (validated by [`GgufFile::open`]: offsets, alignment,
    /// sizes, type codes), each under its GGUF name with its shape in torch order (GGUF lists
    /// the innermost extent first), stored as its ggml type. Returns the parsed file too, for
    /// its metadata.
    pub fn open_gguf(path: &Path) -> Result<(Self, GgufFile)> {
        let gguf = GgufFile::open(path)?;
        let file = File::open(path).map_err(|e| InferError::io(path, e))?;
        // SAFETY: as in `open_files`; the file was just parsed from an identical map.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| InferError::io(path, e))?;
        if map.len() != gguf.file_len() {
            return Err(InferError::io(
                path,
                std::io::Error::other("the file changed while it was being opened"),
            ));
        }
        let tensors = gguf
            .tensors
            .iter()
            .map(|t| {
                let entry = TensorEntry {
                    shard: 0,
                    dtype: Stored::Ggml(t.ty),
                    shape: t.dims.iter().rev().copied().collect(),
                    start: t.offset,
                    end: t.offset + t.size,
                };
                (t.name.clone(), entry)
            })
            .collect();
        let store = WeightStore {
            shards: vec![Shard {
                path: path.to_path_buf(),
                map: Arc::new(map),
            }],
            tensors,
            origin: path.to_path_buf(),
        };
        Ok((store, gguf))
    }

    pub fn origin(&self) -> &Path {
        &self.origin
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// Sorted tensor names.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.tensors.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        self.tensors.get(name).map(|e| e.shape.as_slice())
    }

    /// Counts of tensors per storage dtype name (e.g. "F32" → 101), for `describe`.
    pub fn dtype_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for e in self.tensors.values() {
            *m.entry(e.dtype.name()).or_insert(0) += 1;
        }
        m
    }

    /// Total number of scalar parameters.
    pub fn parameter_count(&self) -> usize {
        self.tensors
            .values()
            .map(|e| e.shape.iter().product::<usize>())
            .sum()
    }

    pub fn shard_paths(&self) -> Vec<&Path> {
        self.shards.iter().map(|s| s.path.as_path()).collect()
    }

    /// Reads tensor `name`, checking its shape, as f32 (borrowed from the map when possible).
    pub fn read(&self, name: &str, expected: &[usize]) -> Result<TensorData> {
        let (e, shard) = self.entry(name, expected)?;
        let bytes = &shard.map[e.start..e.end];
        let Some(ty) = e.dtype.ggml() else {
            return Err(InferError::UnsupportedDtype {
                name: name.into(),
                file: shard.path.clone(),
                dtype: e.dtype.name(),
            });
        };
        if ty == GgmlType::F32
            && cfg!(target_endian = "little")
            && (bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<f32>())
        {
            return Ok(TensorData::Mapped {
                map: shard.map.clone(),
                start: e.start,
                len: bytes.len() / 4,
            });
        }
        // Every other storage through the reference dequantizer (exact for F16/BF16).
        Ok(TensorData::Owned(ty.dequantize_to_vec(bytes)))
    }

    /// Tensor `name`'s entry and shard, its shape checked against `expected`.
    fn entry(&self, name: &str, expected: &[usize]) -> Result<(&TensorEntry, &Shard)> {
        let e = self
            .tensors
            .get(name)
            .ok_or_else(|| InferError::MissingTensor {
                name: name.into(),
                tried: vec![String::new()],
                file: self.origin.clone(),
            })?;
        let shard = &self.shards[e.shard];
        if e.shape != expected {
            return Err(InferError::ShapeMismatch {
                name: name.into(),
                file: shard.path.clone(),
                expected: expected.to_vec(),
                actual: e.shape.clone(),
            });
        }
        Ok((e, shard))
    }

    /// Reads a weight matrix in its storage type: BF16/F16 as raw bits (not widened), F32 as
    /// [`WeightStore::read`] does.
    pub fn read_matrix(&self, name: &str, expected: &[usize]) -> Result<StoredMatrix> {
        let half = match self.tensors.get(name).and_then(|e| e.dtype.ggml()) {
            Some(GgmlType::BF16) => WeightFormat::Bf16,
            Some(GgmlType::F16) => WeightFormat::F16,
            Some(t) if t != GgmlType::F32 => {
                let (e, shard) = self.entry(name, expected)?;
                return Ok(StoredMatrix::Blocks(
                    WeightFormat::from_ggml(t),
                    shard.map[e.start..e.end].to_vec(),
                ));
            }
            _ => return Ok(StoredMatrix::F32(self.read(name, expected)?)),
        };
        let (e, shard) = self.entry(name, expected)?;
        let bits = shard.map[e.start..e.end]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        Ok(StoredMatrix::Half(half, bits))
    }

    /// The storage dtype of the first floating tensor, for `describe`.
    pub fn storage_dtype(&self) -> Option<StorageDtype> {
        let mut names = self.names();
        names.retain(|n| self.tensors[*n].dtype.ggml().is_some());
        names
            .first()
            .and_then(|n| self.tensors[*n].dtype.ggml())
            .map(WeightFormat::from_ggml)
    }
}

/// A view of a [`WeightStore`] that resolves names against a list of prefixes.
pub struct Weights<'a> {
    store: &'a WeightStore,
    prefixes: Vec<String>,
}

impl<'a> Weights<'a> {
    /// `probe` is a tensor every checkpoint of the family has (e.g.
    /// `embeddings.word_embeddings.weight`); the first prefix under which it exists is used
    /// for every name, so a checkpoint holding two copies cannot mix them.
    pub fn with_prefixes(store: &'a WeightStore, prefixes: &[&str], probe: &str) -> Result<Self> {
        let found = prefixes
            .iter()
            .find(|p| store.contains(&format!("{p}{probe}")));
        match found {
            Some(p) => Ok(Weights {
                store,
                prefixes: vec![p.to_string()],
            }),
            None => Err(InferError::MissingTensor {
                name: probe.into(),
                tried: prefixes.iter().map(|p| p.to_string()).collect(),
                file: store.origin.clone(),
            }),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefixes[0]
    }

    pub fn contains(&self, name: &str) -> bool {
        self.prefixes
            .iter()
            .any(|p| self.store.contains(&format!("{p}{name}")))
    }

    /// Reads `name` (under the resolved prefix) with the expected shape.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<TensorData> {
        self.store.read(&self.resolve(name)?, shape)
    }

    /// Reads a weight matrix in its storage type ([`WeightStore::read_matrix`]).
    pub fn get_matrix(&self, name: &str, shape: &[usize]) -> Result<StoredMatrix> {
        self.store.read_matrix(&self.resolve(name)?, shape)
    }

    fn resolve(&self, name: &str) -> Result<String> {
        for p in &self.prefixes {
            let full = format!("{p}{name}");
            if self.store.contains(&full) {
                return Ok(full);
            }
        }
        Err(InferError::MissingTensor {
            name: name.into(),
            tried: self.prefixes.clone(),
            file: self.store.origin.clone(),
        })
    }
}
