//! Writing artifacts from Rust: the tensor list a meta.json implies, random weights, an
//! in-house affine quantizer, and meta.json + model.safetensors on disk. Tests use it to build
//! published-size artifacts on the fly and to make malformed ones; it is also a second,
//! independent writer of the format (the first is the Python exporter).

use crate::meta::{Family, Hparams, IntLayout, Meta};
use crate::weights::pack_codes;
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Stored tensor data.
#[derive(Clone, Debug)]
pub enum Data {
    F32(Vec<f32>),
    F16(Vec<u16>),
    U8(Vec<u8>),
    I64(Vec<i64>),
}

#[derive(Clone, Debug)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    /// An f32 tensor of `shape` holding `values` (row-major).
    pub fn f32(shape: Vec<usize>, values: Vec<f32>) -> Self {
        Tensor {
            shape,
            data: Data::F32(values),
        }
    }
}

/// Every tensor `meta` implies: `(name, shape, quantizable)`. Quantizable = Linear/Conv weight.
pub fn tensor_specs(meta: &Meta) -> Vec<(String, Vec<usize>, bool)> {
    let mut v: Vec<(String, Vec<usize>, bool)> = Vec::new();
    let lin = |v: &mut Vec<(String, Vec<usize>, bool)>, p: &str, shape: &[usize]| {
        v.push((format!("{p}.weight"), shape.to_vec(), true));
        v.push((format!("{p}.bias"), vec![shape[0]], false));
    };
    let bn = |v: &mut Vec<(String, Vec<usize>, bool)>, p: &str, d: usize| {
        for s in ["weight", "bias", "running_mean", "running_var"] {
            v.push((format!("{p}.{s}"), vec![d], false));
        }
    };
    let (t, c, k) = (meta.seq_len, meta.in_channels, meta.num_classes);
    match &meta.hparams {
        Hparams::Transformer(h) => {
            let d = h.d_model;
            let n = crate::meta::n_tokens(meta.family, h, t, c);
            let tk = "encoder.tokenizer";
            match meta.family {
                Family::Lejepa => lin(&mut v, &format!("{tk}.proj"), &[d, c]),
                Family::TJepa => {
                    v.push((format!("{tk}.weight"), vec![n, d], false));
                    v.push((format!("{tk}.bias"), vec![t * c, d], false));
                    v.push((format!("{tk}.feat_idx_embed.weight"), vec![t * c, d], false));
                    v.push((format!("{tk}.reg_tokens.tokens"), vec![h.n_reg, d], false));
                    lin(&mut v, "encoder.input_proj", &[d, d]);
                }
                Family::TsJepa => lin(&mut v, &format!("{tk}.proj"), &[d, c, h.patch_size]),
                _ => lin(&mut v, &format!("{tk}.proj"), &[d, t]),
            }
            if meta.family != Family::TJepa {
                v.push(("encoder.pos_embed".into(), vec![1, n, d], false));
            }
            for i in 0..h.num_layers {
                let p = format!("encoder.transformer.layers.{i}");
                v.push((
                    format!("{p}.self_attn.in_proj_weight"),
                    vec![3 * d, d],
                    true,
                ));
                v.push((format!("{p}.self_attn.in_proj_bias"), vec![3 * d], false));
                lin(&mut v, &format!("{p}.self_attn.out_proj"), &[d, d]);
                lin(&mut v, &format!("{p}.linear1"), &[h.dim_feedforward, d]);
                lin(&mut v, &format!("{p}.linear2"), &[d, h.dim_feedforward]);
                for nm in ["norm1", "norm2"] {
                    v.push((format!("{p}.{nm}.weight"), vec![d], false));
                    v.push((format!("{p}.{nm}.bias"), vec![d], false));
                }
            }
            v.push(("encoder.norm.weight".into(), vec![d], false));
            v.push(("encoder.norm.bias".into(), vec![d], false));
            if meta.family == Family::Lejepa {
                lin(&mut v, "pool.attn", &[1, d]);
            }
            lin(&mut v, "head.0", &[h.head_hidden, d]);
            if matches!(meta.family, Family::Lejepa | Family::CfJepa) {
                bn(&mut v, "head.2", h.head_hidden);
            }
            lin(&mut v, "head.3", &[k, h.head_hidden]);
        }
        Hparams::Sigreg(h) => {
            let f = h.num_filters;
            lin(&mut v, "encoder.conv3", &[f / 3, c, 3]);
            lin(&mut v, "encoder.conv5", &[f / 3, c, 5]);
            lin(&mut v, "encoder.conv7", &[f - 2 * (f / 3), c, 7]);
            bn(&mut v, "encoder.bn", f);
            for i in 0..h.num_blocks {
                let p = format!("encoder.blocks.{i}.block");
                lin(&mut v, &format!("{p}.0"), &[f, f, 3]);
                bn(&mut v, &format!("{p}.1"), f);
                lin(&mut v, &format!("{p}.3"), &[f, f, 3]);
                bn(&mut v, &format!("{p}.4"), f);
            }
            lin(&mut v, "latent_proj", &[h.latent_dim, f]);
            v.push(("latent_norm.weight".into(), vec![h.latent_dim], false));
            v.push(("latent_norm.bias".into(), vec![h.latent_dim], false));
            lin(&mut v, "classifier", &[k, h.latent_dim]);
        }
    }
    v
}

/// A small deterministic generator (xorshift64*), uniform in [-1, 1).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e3779b97f4a7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545f4914f6cdd1d)
    }
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Random weights for every tensor of `meta` (scaled by 1/sqrt(fan-in); BatchNorm variances
/// positive), plus the I64 `num_batches_tracked` of each BatchNorm.
pub fn random_tensors(meta: &Meta, seed: u64) -> BTreeMap<String, Tensor> {
    let mut rng = Rng::new(seed);
    let mut out = BTreeMap::new();
    for (name, shape, _) in tensor_specs(meta) {
        let len: usize = shape.iter().product();
        let fan_in: usize = if shape.len() >= 2 {
            shape[1..].iter().product()
        } else {
            1
        };
        let s = 1.0 / (fan_in as f32).sqrt();
        let data: Vec<f32> = (0..len)
            .map(|_| {
                let u = rng.uniform();
                if name.ends_with("running_var") {
                    0.5 + u.abs()
                } else if name.ends_with("norm1.weight") || name.ends_with("norm2.weight") {
                    1.0 + 0.1 * u
                } else {
                    u * s
                }
            })
            .collect();
        if name.ends_with(".running_var") {
            let p = name.trim_end_matches(".running_var");
            out.insert(
                format!("{p}.num_batches_tracked"),
                Tensor {
                    shape: vec![],
                    data: Data::I64(vec![7]),
                },
            );
        }
        out.insert(name, Tensor::f32(shape, data));
    }
    out
}

/// Replaces each tensor in `names` by its `.__q` / `.__scale` / `.__zero` triple (asymmetric
/// min/max affine codes per row group). Returns the dequantized values the runtime must see.
pub fn quantize(tensors: &mut BTreeMap<String, Tensor>, names: &[String], layout: &IntLayout) {
    for name in names {
        let t = tensors.remove(name).expect("quantize: unknown tensor");
        let Data::F32(w) = t.data else {
            panic!("quantize: {name} is not F32")
        };
        let rows = if t.shape.len() >= 2 { t.shape[0] } else { 1 };
        let cols = w.len() / rows;
        let ng = layout.n_groups(cols);
        let qmax = ((1u32 << layout.bits) - 1) as f32;
        let (mut q, mut sc, mut ze) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..rows {
            let row = &w[r * cols..(r + 1) * cols];
            let mut scales = vec![0f32; ng];
            let mut zeros = vec![0f32; ng];
            for g in 0..ng {
                let vals: Vec<f32> = (0..cols)
                    .filter(|&c| layout.group_of(c) == g)
                    .map(|c| row[c])
                    .collect();
                let lo = vals.iter().cloned().fold(f32::INFINITY, f32::min).min(0.0);
                let hi = vals
                    .iter()
                    .cloned()
                    .fold(f32::NEG_INFINITY, f32::max)
                    .max(0.0);
                let s = if hi > lo { (hi - lo) / qmax } else { 1.0 };
                scales[g] = s;
                zeros[g] = (-lo / s).round();
            }
            let codes: Vec<u32> = (0..cols)
                .map(|c| {
                    let g = layout.group_of(c);
                    ((row[c] / scales[g]).round() + zeros[g]).clamp(0.0, qmax) as u32
                })
                .collect();
            q.extend(pack_codes(&codes, layout.bits));
            sc.extend(scales);
            ze.extend(zeros);
        }
        let bpr = layout.bytes_per_row(cols);
        tensors.insert(
            format!("{name}.__q"),
            Tensor {
                shape: vec![rows, bpr],
                data: Data::U8(q),
            },
        );
        tensors.insert(format!("{name}.__scale"), Tensor::f32(vec![rows, ng], sc));
        tensors.insert(format!("{name}.__zero"), Tensor::f32(vec![rows, ng], ze));
    }
}

/// model.safetensors bytes of `tensors`.
pub fn safetensors_bytes(tensors: &BTreeMap<String, Tensor>) -> Vec<u8> {
    let bytes: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, t)| {
            let (dt, b) = match &t.data {
                Data::F32(v) => (Dtype::F32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
                Data::F16(v) => (Dtype::F16, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
                Data::U8(v) => (Dtype::U8, v.clone()),
                Data::I64(v) => (Dtype::I64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            };
            (n.clone(), dt, t.shape.clone(), b)
        })
        .collect();
    let views: Vec<(String, TensorView)> = bytes
        .iter()
        .map(|(n, dt, s, b)| {
            (
                n.clone(),
                TensorView::new(*dt, s.clone(), b).expect("tensor view"),
            )
        })
        .collect();
    safetensors::tensor::serialize(views, None).expect("serialize")
}

/// Writes `meta` (pretty JSON) and `tensors` into `dir` (created if needed).
pub fn write_artifact(
    dir: &Path,
    meta: &Value,
    tensors: &BTreeMap<String, Tensor>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("meta.json"), serde_json::to_string_pretty(meta)?)?;
    std::fs::write(dir.join("model.safetensors"), safetensors_bytes(tensors))
}

/// A meta.json for `family` with `hparams` and `quantization` (T = 10, C = 4, K = 4, classes,
/// a raw/diff1/diff2/dev preprocess).
pub fn meta_json(family: Family, hparams: Value, quantization: Value) -> Value {
    json!({
        "format": crate::meta::FORMAT,
        "model": family.name(),
        "seq_len": 10, "in_channels": 4, "num_classes": 4,
        "classes": ["AA", "AB", "BA", "BB"],
        "hparams": hparams,
        "quantization": quantization,
        "provenance": {"exporter": "inmotion::writer (Rust)"},
        "preprocess": {"standardize": {"mean": vec![-60.0f32; 10], "std": vec![8.0f32; 10]},
                       "features": ["raw", "diff1", "diff2", "dev"]},
    })
}

/// The published sizes of issue 5's speed table.
pub fn published_hparams(family: Family) -> Value {
    match family {
        Family::Lejepa => {
            json!({"d_model": 128, "n_heads": 4, "num_layers": 4, "dim_feedforward": 512, "head_hidden": 128})
        }
        Family::TJepa => {
            json!({"d_model": 128, "n_heads": 4, "num_layers": 4, "dim_feedforward": 256, "head_hidden": 128, "n_reg": 2})
        }
        Family::TsJepa => {
            json!({"d_model": 256, "n_heads": 8, "num_layers": 4, "dim_feedforward": 512, "head_hidden": 128, "patch_size": 2})
        }
        Family::CfJepa => {
            json!({"d_model": 256, "n_heads": 8, "num_layers": 3, "dim_feedforward": 512, "head_hidden": 128})
        }
        Family::Sigreg => json!({"num_filters": 192, "num_blocks": 3, "latent_dim": 64}),
    }
}
