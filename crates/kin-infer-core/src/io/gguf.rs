//! GGUF files (llama.cpp's container, versions 2 and 3, little-endian): the header, the
//! metadata key-value pairs and the tensor directory, read from a memory map and validated
//! before anything is allocated or trusted.
//!
//! Every count and length read from the file is bounded by the bytes left before it is
//! allocated (a key count of 2⁶⁴ in a 100-byte file is an error, not an allocation), and
//! what the header decodes into memory is bounded too: a value costs more in memory than in
//! the file (a one-byte `uint8` element is a [`MetaValue`] of 32 bytes), so the metadata and
//! tensor directory together may decode to at most [`MAX_METADATA_BYTES`], counted before
//! each array is decoded and as each string is, and arrays grow as they are read rather than
//! being sized from the file's count. Every tensor's type code must be one this engine reads
//! ([`GgmlType`]; others are [`InferError::Unsupported`] naming the tensor and ggml's name of
//! the type), its rows whole blocks, its extent inside the data section and clear of every
//! other tensor's, its offset aligned, its name unique.
//! Layout per the GGUF specification (ggml's `docs/gguf.md`): magic `GGUF`, version u32,
//! tensor count u64, metadata count u64, the pairs, the tensor infos, padding to
//! `general.alignment` (default 32), the data.

use crate::error::{InferError, Result};
use crate::kernels::ggml::{type_name, GgmlType};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: usize = 4;
/// Arrays nest at most this deep (GGUF writers emit flat arrays; a bound keeps recursion
/// finite on hostile input).
const MAX_ARRAY_DEPTH: usize = 2;
const DEFAULT_ALIGNMENT: usize = 32;
/// The most memory the header (metadata pairs and tensor directory) may decode into, counted
/// as the in-memory size of what is kept: `size_of::<MetaValue>()` per value, the bytes of
/// every string and key, and each tensor's entry. Real files stay far below it (a 256k-token
/// vocabulary with its scores and types decodes to about 30 MiB); a file past it is an
/// [`InferError::Gguf`] naming the key or tensor at which the cap was reached, instead of an
/// allocation of many gigabytes that aborts the process.
pub const MAX_METADATA_BYTES: usize = 256 << 20;
/// The capacity an array starts with: it grows as elements are read, so a count the file
/// states is never allocated before the elements are there.
const INITIAL_ARRAY_CAPACITY: usize = 1 << 12;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(String),
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// GGUF's name of the value's type (for messages).
    pub fn type_name(&self) -> &'static str {
        match self {
            MetaValue::U8(_) => "uint8",
            MetaValue::I8(_) => "int8",
            MetaValue::U16(_) => "uint16",
            MetaValue::I16(_) => "int16",
            MetaValue::U32(_) => "uint32",
            MetaValue::I32(_) => "int32",
            MetaValue::U64(_) => "uint64",
            MetaValue::I64(_) => "int64",
            MetaValue::F32(_) => "float32",
            MetaValue::F64(_) => "float64",
            MetaValue::Bool(_) => "bool",
            MetaValue::Str(_) => "string",
            MetaValue::Array(_) => "array",
        }
    }

    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float (either width; integers are not floats here).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// One tensor of the directory, validated against the file.
#[derive(Clone, Debug)]
pub struct GgufTensor {
    pub name: String,
    pub ty: GgmlType,
    /// ggml order: `dims[0]` is the innermost (contiguous) extent, a row.
    pub dims: Vec<usize>,
    /// Absolute byte offset of the data in the file.
    pub offset: usize,
    /// Bytes of the data.
    pub size: usize,
}

impl GgufTensor {
    /// Values in the tensor.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where the file's bytes live: a map of the file, or (fuzzing, tests) a buffer.
enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

/// A parsed, validated GGUF file.
pub struct GgufFile {
    path: PathBuf,
    bytes: Bytes,
    pub version: u32,
    /// The pairs in file order.
    pub metadata: Vec<(String, MetaValue)>,
    pub tensors: Vec<GgufTensor>,
    keys: HashMap<String, usize>,
    names: HashMap<String, usize>,
    pub alignment: usize,
    /// Absolute offset of the data section.
    pub data_start: usize,
}

impl GgufFile {
    /// Maps and parses `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| InferError::io(path, e))?;
        // SAFETY: the map is read-only; a file truncated under us can fault, as with every
        // mapped weight file (safetensors is read the same way).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| InferError::io(path, e))?;
        Self::parse(path.to_path_buf(), Bytes::Map(map))
    }

    /// Parses a file held in memory (`path` names it in errors).
    pub fn from_bytes(path: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<Self> {
        Self::parse(path.into(), Bytes::Owned(bytes))
    }

    fn data(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the file.
    pub fn file_len(&self) -> usize {
        self.data().len()
    }

    /// A metadata value by key.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.keys.get(key).map(|&i| &self.metadata[i].1)
    }

    /// A float metadata value, for every float field a loader reads: `None` when `key` is
    /// absent (the caller states its default); an error naming `key` when the value is not
    /// a float (its type named: llama.cpp refuses a mistyped key too) or is NaN or infinite
    /// (its value named). A non-finite value must not pass as absent: a NaN
    /// `rope.freq_base` would otherwise become the 10000 default. Range checks (an epsilon
    /// >= 0, a base > 1) are each field's own.
    pub fn float(&self, key: &str) -> Result<Option<f64>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let bad = |reason: String| InferError::Gguf {
            path: self.path.clone(),
            reason,
        };
        match v.as_f64() {
            Some(x) if x.is_finite() => Ok(Some(x)),
            Some(x) => Err(bad(format!("`{key}` is {x}: a finite number is expected"))),
            None => Err(bad(format!(
                "`{key}` is a {}, expected a float32 or float64",
                v.type_name()
            ))),
        }
    }

    /// A tensor by name.
    pub fn tensor(&self, name: &str) -> Option<&GgufTensor> {
        self.names.get(name).map(|&i| &self.tensors[i])
    }

    /// The stored bytes of `t` (a tensor of this file: its extent was checked at open).
    pub fn tensor_bytes(&self, t: &GgufTensor) -> &[u8] {
        &self.data()[t.offset..t.offset + t.size]
    }

    /// How many tensors of each type the file holds, in [`GgmlType::ALL`] order (types with
    /// none left out): what `describe` reports.
    pub fn type_counts(&self) -> Vec<(GgmlType, usize)> {
        GgmlType::ALL
            .into_iter()
            .map(|ty| (ty, self.tensors.iter().filter(|t| t.ty == ty).count()))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// Stored bits per weight over every tensor (block scales included), `None` for a file
    /// without values.
    pub fn bits_per_weight(&self) -> Option<f64> {
        let values: usize = self.tensors.iter().map(GgufTensor::len).sum();
        let bytes: usize = self.tensors.iter().map(|t| t.size).sum();
        (values > 0).then(|| bytes as f64 * 8.0 / values as f64)
    }

    /// `t`'s values as f32 through the scalar reference dequantizer.
    pub fn dequantize(&self, t: &GgufTensor) -> Vec<f32> {
        t.ty.dequantize_to_vec(self.tensor_bytes(t))
    }

    fn parse(path: PathBuf, bytes: Bytes) -> Result<Self> {
        let buf: &[u8] = match &bytes {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        };
        let mut r = Reader {
            b: buf,
            at: 0,
            path: &path,
            decoded: 0,
        };
        let magic = r.take(4, "the magic")?;
        if magic != b"GGUF" {
            return Err(r.bad(format!(
                "not a GGUF file (magic {magic:02x?}, expected \"GGUF\")"
            )));
        }
        let version = r.u32("the version")?;
        match version {
            2 | 3 => {}
            v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
                return Err(InferError::Unsupported(format!(
                    "{}: a big-endian GGUF file (only little-endian files are read)",
                    path.display()
                )))
            }
            v => {
                return Err(InferError::Unsupported(format!(
                    "{}: GGUF version {v} (versions 2 and 3 are read)",
                    path.display()
                )))
            }
        }
        let n_tensors = r.count("the tensor count", 8 + 4 + 4 + 8)?;
        let n_kv = r.count("the metadata count", 8 + 4 + 1)?;
        let mut metadata = Vec::with_capacity(n_kv.min(INITIAL_ARRAY_CAPACITY));
        let mut keys = HashMap::with_capacity(n_kv.min(INITIAL_ARRAY_CAPACITY));
        for i in 0..n_kv {
            let key = r.string(&format!("metadata key {i}"))?;
            // The pair, the value's own slot and the key's copy in the index.
            r.charge(
                size_of::<(String, MetaValue)>() + size_of::<(String, usize)>() + key.len(),
                &format!("metadata key `{key}`"),
            )?;
            let ty = r.u32(&format!("the type of `{key}`"))?;
            let value = r.value(ty, &key, 0)?;
            if keys.insert(key.clone(), metadata.len()).is_some() {
                return Err(r.bad(format!("metadata key `{key}` appears twice")));
            }
            metadata.push((key, value));
        }
        let alignment = match keys.get("general.alignment").map(|&i| &metadata[i].1) {
            None => DEFAULT_ALIGNMENT,
            Some(MetaValue::U32(a)) if a.is_power_of_two() => *a as usize,
            Some(v) => {
                return Err(r.bad(format!(
                    "`general.alignment` is {v:?}; a uint32 power of two is expected"
                )))
            }
        };
        let mut raw = Vec::with_capacity(n_tensors.min(INITIAL_ARRAY_CAPACITY));
        for i in 0..n_tensors {
            let name = r.string(&format!("the name of tensor {i}"))?;
            let n_dims = r.u32(&format!("the dimension count of `{name}`"))? as usize;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(r.bad(format!(
                    "tensor `{name}` has {n_dims} dimensions (1 to {MAX_DIMS} allowed)"
                )));
            }
            // The directory entry, its dims, and the name's copy in the index.
            r.charge(
                size_of::<GgufTensor>()
                    + size_of::<(String, usize)>()
                    + n_dims * size_of::<usize>()
                    + name.len(),
                &format!("tensor `{name}`"),
            )?;
            let mut dims = Vec::with_capacity(n_dims);
            for d in 0..n_dims {
                let v = r.u64(&format!("dimension {d} of `{name}`"))?;
                dims.push(usize::try_from(v).map_err(|_| {
                    r.bad(format!("tensor `{name}` dimension {d} is {v}, too large"))
                })?);
            }
            let code = r.u32(&format!("the type of `{name}`"))?;
            let offset = r.u64(&format!("the offset of `{name}`"))?;
            raw.push((name, dims, code, offset));
        }
        let data_start = r.at.div_ceil(alignment).checked_mul(alignment);
        let data_start = match data_start {
            Some(s) if s <= buf.len() => s,
            _ => {
                return Err(r.bad(format!(
                    "the data section (after {} bytes of header, aligned to {alignment}) starts past the end of the file ({} bytes)",
                    r.at,
                    buf.len()
                )))
            }
        };
        let data_len = buf.len() - data_start;
        let mut tensors: Vec<GgufTensor> = Vec::with_capacity(raw.len());
        let mut names = HashMap::with_capacity(raw.len());
        for (name, dims, code, offset) in raw {
            let ty = GgmlType::from_code(code).ok_or_else(|| {
                let what = match type_name(code) {
                    Some(n) => format!("ggml type {n} (code {code})"),
                    None => format!("unknown ggml type code {code}"),
                };
                InferError::Unsupported(format!(
                    "{}: tensor `{name}` has {what}, which this build does not read (it reads {})",
                    path.display(),
                    GgmlType::ALL.map(|t| t.name()).join(", ")
                ))
            })?;
            let rows: Option<usize> = dims[1..].iter().try_fold(1usize, |a, &d| a.checked_mul(d));
            let size = rows.and_then(|rows| ty.row_bytes(dims[0])?.checked_mul(rows));
            let Some(size) = size else {
                return Err(InferError::Gguf {
                    path: path.clone(),
                    reason: format!(
                        "tensor `{name}` ({}, dims {dims:?}): rows of {} values are not whole {}-value blocks, or its size overflows",
                        ty.name(),
                        dims[0],
                        ty.block_len()
                    ),
                });
            };
            let bad = |reason: String| InferError::Gguf {
                path: path.clone(),
                reason: format!("tensor `{name}`: {reason}"),
            };
            let offset = usize::try_from(offset)
                .map_err(|_| bad(format!("offset {offset} is too large")))?;
            if !offset.is_multiple_of(alignment) {
                return Err(bad(format!(
                    "offset {offset} is not a multiple of the alignment {alignment}"
                )));
            }
            if offset.checked_add(size).is_none_or(|end| end > data_len) {
                return Err(bad(format!(
                    "{size} bytes at data offset {offset} run past the data section ({data_len} bytes): the file is truncated or the directory is wrong"
                )));
            }
            if names.insert(name.clone(), tensors.len()).is_some() {
                return Err(bad("the name appears twice".into()));
            }
            tensors.push(GgufTensor {
                name,
                ty,
                dims,
                offset: data_start + offset,
                size,
            });
        }
        check_overlaps(&path, &tensors, data_start)?;
        Ok(GgufFile {
            path,
            bytes,
            version,
            metadata,
            tensors,
            keys,
            names,
            alignment,
            data_start,
        })
    }
}

/// Refuses two tensors whose data share a byte. llama.cpp requires the data laid out in
/// directory order, each tensor at the previous one's padded end; this reader accepts any
/// order, but an overlap means the directory was edited (an offset moved, or a type or shape
/// changed to a wider one so that the extent runs into the next tensor), and the two tensors
/// would read each other's bytes.
fn check_overlaps(path: &Path, tensors: &[GgufTensor], data_start: usize) -> Result<()> {
    let mut order: Vec<&GgufTensor> = tensors.iter().filter(|t| t.size > 0).collect();
    order.sort_by_key(|t| (t.offset, t.size));
    // The tensor reaching furthest so far: any later start before its end overlaps it.
    let mut reach: Option<&GgufTensor> = None;
    for t in order {
        if let Some(p) = reach {
            if t.offset < p.offset + p.size {
                let range = |t: &GgufTensor| {
                    let at = t.offset - data_start;
                    format!("data bytes {at}..{}", at + t.size)
                };
                return Err(InferError::Gguf {
                    path: path.to_path_buf(),
                    reason: format!(
                        "tensors `{}` ({}, {}) and `{}` ({}, {}) overlap: the tensor directory was edited (an offset, type or shape changed)",
                        p.name,
                        p.ty.name(),
                        range(p),
                        t.name,
                        t.ty.name(),
                        range(t)
                    ),
                });
            }
        }
        if reach.is_none_or(|p| t.offset + t.size > p.offset + p.size) {
            reach = Some(t);
        }
    }
    Ok(())
}

/// A bounds-checked cursor over the header.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    path: &'a Path,
    /// Bytes of memory what has been decoded so far takes (see [`MAX_METADATA_BYTES`]).
    decoded: usize,
}

impl<'a> Reader<'a> {
    fn bad(&self, reason: String) -> InferError {
        InferError::Gguf {
            path: self.path.to_path_buf(),
            reason,
        }
    }

    /// Counts `bytes` more of decoded header against [`MAX_METADATA_BYTES`]; `what` names
    /// the key or tensor that reached the cap.
    fn charge(&mut self, bytes: usize, what: &str) -> Result<()> {
        match self.decoded.checked_add(bytes) {
            Some(total) if total <= MAX_METADATA_BYTES => {
                self.decoded = total;
                Ok(())
            }
            _ => Err(self.bad(format!(
                "{what} takes the decoded metadata past its cap of {} MiB ({} bytes decoded before it, {bytes} more asked): the file's header is not one a real model has",
                MAX_METADATA_BYTES >> 20,
                self.decoded
            ))),
        }
    }

    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(self.bad(format!(
                "truncated: {what} needs {n} bytes at offset {}, {} left",
                self.at,
                self.left()
            )));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A u64 count of items each at least `min_bytes` long, bounded by the bytes left.
    fn count(&mut self, what: &str, min_bytes: usize) -> Result<usize> {
        let n = self.u64(what)?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(min_bytes))
            .is_some_and(|need| need <= self.left());
        if !fits {
            return Err(self.bad(format!(
                "{what} is {n}, more than the {} bytes left can hold",
                self.left()
            )));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.count(what, 1)?;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.bad(format!("{what} is not UTF-8")))
    }

    fn value(&mut self, ty: u32, key: &str, depth: usize) -> Result<MetaValue> {
        let what = format!("the value of `{key}`");
        Ok(match ty {
            0 => MetaValue::U8(self.array::<1>(&what)?[0]),
            1 => MetaValue::I8(self.array::<1>(&what)?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.array(&what)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array(&what)?)),
            4 => MetaValue::U32(self.u32(&what)?),
            5 => MetaValue::I32(i32::from_le_bytes(self.array(&what)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array(&what)?)),
            7 => match self.array::<1>(&what)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(self.bad(format!("`{key}` is a bool of value {b}"))),
            },
            8 => {
                let s = self.string(&what)?;
                self.charge(s.len(), &format!("`{key}`"))?;
                MetaValue::Str(s)
            }
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.bad(format!(
                        "`{key}` nests arrays deeper than {MAX_ARRAY_DEPTH}"
                    )));
                }
                let elem = self.u32(&format!("the element type of `{key}`"))?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => 12,
                    t => return Err(self.bad(format!("`{key}` has elements of unknown type {t}"))),
                };
                let n = self.count(&format!("the length of `{key}`"), min)?;
                // Every element costs at least its slot: a count past the cap is refused
                // before one element is decoded (string bytes are counted as they come).
                let slots = n.saturating_mul(size_of::<MetaValue>());
                self.charge(slots, &format!("`{key}` ({n} elements)"))?;
                let mut items = Vec::with_capacity(n.min(INITIAL_ARRAY_CAPACITY));
                for _ in 0..n {
                    items.push(self.value(elem, key, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(self.u64(&what)?),
            11 => MetaValue::I64(i64::from_le_bytes(self.array(&what)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array(&what)?)),
            t => return Err(self.bad(format!("`{key}` has unknown value type {t}"))),
        })
    }
}
