//! meta.json → typed, validated [`Meta`] (specs/inmotion-artifact.md). Every error names the
//! file and the field. Unknown keys in `hparams` and `provenance` are ignored.

use crate::error::{Error, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The only `format` this runtime reads.
pub const FORMAT: &str = "inmotion-artifact/1";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Lejepa,
    TJepa,
    TsJepa,
    CfJepa,
    Sigreg,
}

impl Family {
    pub const ALL: [Family; 5] = [
        Family::Lejepa,
        Family::TJepa,
        Family::TsJepa,
        Family::CfJepa,
        Family::Sigreg,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Family::Lejepa => "lejepa",
            Family::TJepa => "t_jepa",
            Family::TsJepa => "ts_jepa",
            Family::CfJepa => "cf_jepa",
            Family::Sigreg => "sigreg",
        }
    }
    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// Hyper-parameters of the four transformer families (`n_reg` is 0 except for t_jepa,
/// `patch_size` 0 except for ts_jepa).
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerHparams {
    pub d_model: usize,
    pub n_heads: usize,
    pub num_layers: usize,
    pub dim_feedforward: usize,
    pub head_hidden: usize,
    pub n_reg: usize,
    pub patch_size: usize,
    pub layer_norm_eps: f32,
    pub batch_norm_eps: f32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SigregHparams {
    pub num_filters: usize,
    pub num_blocks: usize,
    pub latent_dim: usize,
    pub batch_norm_eps: f32,
    pub layer_norm_eps: f32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Hparams {
    Transformer(TransformerHparams),
    Sigreg(SigregHparams),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    PerTensor,
    PerChannel,
    PerGroup,
}

impl Granularity {
    pub fn name(self) -> &'static str {
        match self {
            Granularity::PerTensor => "per_tensor",
            Granularity::PerChannel => "per_channel",
            Granularity::PerGroup => "per_group",
        }
    }
}

/// How the integer codes of one scheme are laid out (the label never matters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntLayout {
    pub bits: u32,
    pub granularity: Granularity,
    /// Meaningful only for `PerGroup` (then ≥ 1).
    pub group_size: usize,
}

impl IntLayout {
    /// Number of scale/zero groups per row of `cols` values.
    pub fn n_groups(&self, cols: usize) -> usize {
        match self.granularity {
            Granularity::PerGroup => cols.div_ceil(self.group_size),
            _ => 1,
        }
    }
    /// Group of column `c`.
    pub fn group_of(&self, c: usize) -> usize {
        match self.granularity {
            Granularity::PerGroup => c / self.group_size,
            _ => 0,
        }
    }
    pub fn bytes_per_row(&self, cols: usize) -> usize {
        (cols * self.bits as usize).div_ceil(8)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Quantization {
    /// The label (`fp32`, `int8`, `q4_pg64`, ...): shown, never interpreted.
    pub scheme: String,
    /// `Some` for integer schemes.
    pub int: Option<IntLayout>,
    /// Names of the quantized tensors (empty for float schemes).
    pub tensors: Vec<String>,
    /// The object as written, for `describe`.
    pub raw: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    Raw,
    Diff1,
    Diff2,
    Dev,
}

impl Feature {
    pub fn parse(s: &str) -> Option<Feature> {
        match s {
            "raw" => Some(Feature::Raw),
            "diff1" => Some(Feature::Diff1),
            "diff2" => Some(Feature::Diff2),
            "dev" => Some(Feature::Dev),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Preprocess {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    pub features: Vec<Feature>,
}

#[derive(Clone, Debug)]
pub struct Meta {
    pub path: PathBuf,
    pub family: Family,
    pub seq_len: usize,
    pub in_channels: usize,
    pub num_classes: usize,
    pub classes: Option<Vec<String>>,
    pub hparams: Hparams,
    pub quantization: Quantization,
    pub provenance: Value,
    pub weights_sha256: Option<String>,
    pub preprocess: Option<Preprocess>,
}

/// Upper bounds on the sizes a meta.json may declare. They are far above any edge model (the
/// trained ones use a 10-step window of 4 channels and widths under 100) and low enough that
/// every product of them fits `usize` on a 64-bit host, so nothing sized from them can
/// overflow; whether a run at the declared size fits in memory is checked separately
/// ([`Meta::run_bytes`]).
pub mod limits {
    pub const SEQ_LEN: usize = 1 << 14;
    pub const IN_CHANNELS: usize = 1 << 12;
    /// `seq_len · in_channels`.
    pub const WINDOW: usize = 1 << 22;
    pub const NUM_CLASSES: usize = 1 << 16;
    /// `d_model`, `dim_feedforward`, `head_hidden`, `latent_dim`, `num_filters`.
    pub const WIDTH: usize = 1 << 16;
    /// `num_layers`, `num_blocks`, `n_reg`.
    pub const DEPTH: usize = 1 << 10;
    /// `quantization.group_size`.
    pub const GROUP_SIZE: usize = 1 << 24;
}

/// Typed field reader over one JSON object; errors name `prefix.key`.
struct Obj<'a> {
    path: &'a Path,
    prefix: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    fn new(path: &'a Path, prefix: &'a str, v: &'a Value) -> Result<Self> {
        match v.as_object() {
            Some(map) => Ok(Obj { path, prefix, map }),
            None => Err(Error::field(path, prefix, "must be a JSON object")),
        }
    }
    fn name(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }
    fn err(&self, key: &str, reason: impl Into<String>) -> Error {
        Error::field(self.path, &self.name(key), reason)
    }
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }
    fn req(&self, key: &str) -> Result<&'a Value> {
        self.get(key)
            .ok_or_else(|| self.err(key, "missing (required)"))
    }
    fn str(&self, key: &str) -> Result<&'a str> {
        self.req(key)?
            .as_str()
            .ok_or_else(|| self.err(key, "must be a string"))
    }
    fn usize_of(&self, key: &str, v: &Value) -> Result<usize> {
        v.as_u64()
            .map(|n| n as usize)
            .ok_or_else(|| self.err(key, format!("must be a non-negative integer, found {v}")))
    }
    fn usize(&self, key: &str) -> Result<usize> {
        self.usize_of(key, self.req(key)?)
    }
    fn pos(&self, key: &str) -> Result<usize> {
        let n = self.usize(key)?;
        if n == 0 {
            return Err(self.err(key, "must be at least 1"));
        }
        Ok(n)
    }
    /// A size within `1..=max` (a named upper bound from [`limits`]).
    fn bounded(&self, key: &str, max: usize) -> Result<usize> {
        let n = self.pos(key)?;
        if n > max {
            return Err(self.err(key, format!("{n} is out of range (at most {max})")));
        }
        Ok(n)
    }
    /// A count within `0..=max`.
    fn count(&self, key: &str, max: usize) -> Result<usize> {
        let n = self.usize(key)?;
        if n > max {
            return Err(self.err(key, format!("{n} is out of range (at most {max})")));
        }
        Ok(n)
    }
    fn f32_or(&self, key: &str, default: f32) -> Result<f32> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x >= 0.0 => Ok(x as f32),
                _ => Err(self.err(key, format!("must be a non-negative number, found {v}"))),
            },
        }
    }
    fn f32_vec(&self, key: &str, len: usize) -> Result<Vec<f32>> {
        let arr = self
            .req(key)?
            .as_array()
            .ok_or_else(|| self.err(key, "must be an array of numbers"))?;
        if arr.len() != len {
            return Err(self.err(key, format!("must have {len} values, found {}", arr.len())));
        }
        arr.iter()
            .map(|v| match v.as_f64() {
                Some(x) if x.is_finite() => Ok(x as f32),
                _ => Err(self.err(key, format!("must hold finite numbers, found {v}"))),
            })
            .collect()
    }
    fn str_vec(&self, key: &str) -> Result<Vec<String>> {
        let arr = self
            .req(key)?
            .as_array()
            .ok_or_else(|| self.err(key, "must be an array of strings"))?;
        arr.iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| self.err(key, format!("must hold strings, found {v}")))
            })
            .collect()
    }
}

impl Meta {
    /// Reads and validates `path` (an artifact's meta.json).
    pub fn load(path: &Path) -> Result<Meta> {
        let text = std::fs::read_to_string(path).map_err(|err| Error::Io {
            path: path.to_path_buf(),
            err,
        })?;
        let v: Value = serde_json::from_str(&text).map_err(|e| Error::Json {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Meta::from_value(&v, path)
    }

    pub fn from_value(v: &Value, path: &Path) -> Result<Meta> {
        let top = Obj::new(path, "", v)?;
        let format = top.str("format")?;
        if format != FORMAT {
            return Err(top.err(
                "format",
                format!("unknown format `{format}` (this runtime reads `{FORMAT}`)"),
            ));
        }
        let model = top.str("model")?;
        let family = Family::parse(model).ok_or_else(|| {
            top.err(
                "model",
                format!(
                    "unknown model `{model}` (known: {})",
                    Family::ALL.map(Family::name).join(", ")
                ),
            )
        })?;
        let seq_len = top.bounded("seq_len", limits::SEQ_LEN)?;
        let in_channels = top.bounded("in_channels", limits::IN_CHANNELS)?;
        if seq_len * in_channels > limits::WINDOW {
            return Err(top.err(
                "in_channels",
                format!(
                    "a window of seq_len {seq_len} × in_channels {in_channels} values is out of \
                     range (at most {})",
                    limits::WINDOW
                ),
            ));
        }
        let num_classes = top.bounded("num_classes", limits::NUM_CLASSES)?;
        let classes = match top.get("classes") {
            None => None,
            Some(_) => {
                let c = top.str_vec("classes")?;
                if c.len() != num_classes {
                    return Err(top.err(
                        "classes",
                        format!("has {} names but num_classes is {num_classes}", c.len()),
                    ));
                }
                Some(c)
            }
        };
        let hp = Obj::new(path, "hparams", top.req("hparams")?)?;
        let hparams = match family {
            Family::Sigreg => {
                let h = SigregHparams {
                    num_filters: hp.bounded("num_filters", limits::WIDTH)?,
                    num_blocks: hp.count("num_blocks", limits::DEPTH)?,
                    latent_dim: hp.bounded("latent_dim", limits::WIDTH)?,
                    batch_norm_eps: hp.f32_or("batch_norm_eps", 1e-5)?,
                    layer_norm_eps: hp.f32_or("layer_norm_eps", 1e-5)?,
                };
                if h.num_filters < 3 {
                    return Err(hp.err("num_filters", "must be at least 3 (three branches)"));
                }
                Hparams::Sigreg(h)
            }
            _ => {
                let h = TransformerHparams {
                    d_model: hp.bounded("d_model", limits::WIDTH)?,
                    n_heads: hp.bounded("n_heads", limits::WIDTH)?,
                    num_layers: hp.count("num_layers", limits::DEPTH)?,
                    dim_feedforward: hp.bounded("dim_feedforward", limits::WIDTH)?,
                    head_hidden: hp.bounded("head_hidden", limits::WIDTH)?,
                    n_reg: if family == Family::TJepa {
                        hp.count("n_reg", limits::DEPTH)?
                    } else {
                        0
                    },
                    patch_size: if family == Family::TsJepa {
                        hp.bounded("patch_size", seq_len)?
                    } else {
                        0
                    },
                    layer_norm_eps: hp.f32_or("layer_norm_eps", 1e-5)?,
                    batch_norm_eps: hp.f32_or("batch_norm_eps", 1e-5)?,
                };
                if !h.d_model.is_multiple_of(h.n_heads) {
                    return Err(hp.err(
                        "n_heads",
                        format!("{} does not divide d_model {}", h.n_heads, h.d_model),
                    ));
                }
                if family == Family::TsJepa && !seq_len.is_multiple_of(h.patch_size) {
                    return Err(hp.err(
                        "patch_size",
                        format!("{} does not divide seq_len {seq_len}", h.patch_size),
                    ));
                }
                Hparams::Transformer(h)
            }
        };
        let quantization = parse_quantization(path, top.req("quantization")?)?;
        let provenance = match top.get("provenance") {
            None => Value::Object(Map::new()),
            Some(p) if p.is_object() => p.clone(),
            Some(_) => return Err(top.err("provenance", "must be a JSON object")),
        };
        let weights_sha256 = match top.get("weights_sha256") {
            None => None,
            Some(_) => {
                let s = top.str("weights_sha256")?.to_ascii_lowercase();
                if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(top.err("weights_sha256", "must be 64 hex digits"));
                }
                Some(s)
            }
        };
        let preprocess = match top.get("preprocess") {
            None => None,
            Some(p) => Some(parse_preprocess(path, p, seq_len, in_channels)?),
        };
        Ok(Meta {
            path: path.to_path_buf(),
            family,
            seq_len,
            in_channels,
            num_classes,
            classes,
            hparams,
            quantization,
            provenance,
            weights_sha256,
            preprocess,
        })
    }

    /// Label of class `k`: its name when the artifact has `classes`, else the index.
    pub fn label(&self, k: usize) -> String {
        match &self.classes {
            Some(c) => c[k].clone(),
            None => k.to_string(),
        }
    }

    /// Number of values in one window.
    pub fn window_len(&self) -> usize {
        self.seq_len * self.in_channels
    }

    /// An upper estimate of the bytes of run-state a model of this shape allocates at load
    /// (activations and attention scores, f32), `None` if it overflows: compared with the
    /// host's memory before anything is allocated (`Model::load`), so an artifact declaring a
    /// huge window fails with an error instead of aborting on an allocation.
    pub fn run_bytes(&self) -> Option<u64> {
        let (t, c) = (self.seq_len as u64, self.in_channels as u64);
        let floats = match &self.hparams {
            Hparams::Transformer(h) => {
                let n = n_tokens(self.family, h, self.seq_len, self.in_channels) as u64;
                let d = h.d_model as u64;
                let tok = (c.checked_mul(h.patch_size.max(1) as u64)?).max(t);
                // tokens in, x/h/tmp/positions (2 at load), qkv, feed-forward, scores, keys.
                let per_token = tok
                    .checked_add(d.checked_mul(8)?)?
                    .checked_add(h.dim_feedforward as u64)?;
                n.checked_mul(per_token)?.checked_add(n.checked_mul(n)?)?
            }
            Hparams::Sigreg(h) => {
                let f = h.num_filters as u64;
                let col = t.checked_mul(c.checked_mul(7)?.max(f.checked_mul(3)?))?;
                col.checked_add(t.checked_mul(f)?.checked_mul(3)?)?
            }
        };
        floats.checked_mul(4)
    }
}

fn parse_quantization(path: &Path, v: &Value) -> Result<Quantization> {
    let q = Obj::new(path, "quantization", v)?;
    let scheme = q.str("scheme")?.to_string();
    if q.get("bits").is_none() {
        if matches!(scheme.as_str(), "fp32" | "fp16" | "bf16") {
            return Ok(Quantization {
                scheme,
                int: None,
                tensors: Vec::new(),
                raw: v.clone(),
            });
        }
        return Err(q.err(
            "bits",
            format!("missing (required by the integer scheme `{scheme}`)"),
        ));
    }
    let bits = q.usize("bits")?;
    if !(2..=8).contains(&bits) {
        return Err(q.err("bits", format!("must be 2..8, found {bits}")));
    }
    let granularity = match q.str("granularity")? {
        "per_tensor" => Granularity::PerTensor,
        "per_channel" => Granularity::PerChannel,
        "per_group" => Granularity::PerGroup,
        other => {
            return Err(q.err(
                "granularity",
                format!("unknown `{other}` (per_tensor, per_channel, per_group)"),
            ))
        }
    };
    let group_size = match granularity {
        Granularity::PerGroup => q.bounded("group_size", limits::GROUP_SIZE)?,
        _ => 0,
    };
    let tensors = q.str_vec("tensors")?;
    Ok(Quantization {
        scheme,
        int: Some(IntLayout {
            bits: bits as u32,
            granularity,
            group_size,
        }),
        tensors,
        raw: v.clone(),
    })
}

fn parse_preprocess(path: &Path, v: &Value, seq_len: usize, channels: usize) -> Result<Preprocess> {
    let p = Obj::new(path, "preprocess", v)?;
    let st = Obj::new(path, "preprocess.standardize", p.req("standardize")?)?;
    let mean = st.f32_vec("mean", seq_len)?;
    let std = st.f32_vec("std", seq_len)?;
    if let Some(i) = std.iter().position(|&s| s == 0.0) {
        return Err(st.err("std", format!("value {i} is zero")));
    }
    let names = p.str_vec("features")?;
    let features = names
        .iter()
        .map(|n| {
            Feature::parse(n).ok_or_else(|| {
                p.err(
                    "features",
                    format!("unknown feature `{n}` (raw, diff1, diff2, dev)"),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if features.len() != channels {
        return Err(p.err(
            "features",
            format!(
                "lists {} features but in_channels is {channels}",
                features.len()
            ),
        ));
    }
    Ok(Preprocess {
        mean,
        std,
        features,
    })
}

/// Number of tokens a family makes from a `[seq_len, in_channels]` window (here, beside the
/// hyperparameters it reads, so that sizing an artifact needs no model code).
pub fn n_tokens(family: Family, h: &TransformerHparams, seq_len: usize, channels: usize) -> usize {
    match family {
        Family::Lejepa => seq_len,
        Family::TJepa => h.n_reg + seq_len * channels,
        Family::TsJepa => seq_len / h.patch_size,
        _ => channels,
    }
}
