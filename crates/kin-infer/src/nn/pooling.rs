//! Sentence pooling over one sequence's token states, as sentence-transformers computes it.

use crate::kernels::Kernels;

/// One pooling mode; a [`Pooling`] may concatenate several.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolingMode {
    Cls,
    Mean,
    Max,
    MeanSqrtLen,
    WeightedMean,
    LastToken,
}

impl PoolingMode {
    pub const NAMES: &'static str = "cls, mean, max, mean_sqrt_len_tokens, weightedmean, lasttoken";

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "cls" | "cls_token" => PoolingMode::Cls,
            "mean" | "mean_tokens" => PoolingMode::Mean,
            "max" | "max_tokens" => PoolingMode::Max,
            "mean_sqrt_len_tokens" | "mean_sqrt_len" => PoolingMode::MeanSqrtLen,
            "weightedmean" | "weightedmean_tokens" => PoolingMode::WeightedMean,
            "lasttoken" | "last_token" => PoolingMode::LastToken,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            PoolingMode::Cls => "cls",
            PoolingMode::Mean => "mean",
            PoolingMode::Max => "max",
            PoolingMode::MeanSqrtLen => "mean_sqrt_len_tokens",
            PoolingMode::WeightedMean => "weightedmean",
            PoolingMode::LastToken => "lasttoken",
        }
    }
}

/// The enabled modes, concatenated in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pooling {
    modes: Vec<PoolingMode>,
}

impl Pooling {
    pub fn new(modes: Vec<PoolingMode>) -> Self {
        Pooling { modes }
    }

    pub fn modes(&self) -> &[PoolingMode] {
        &self.modes
    }

    pub fn name(&self) -> String {
        self.modes
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join("+")
    }

    pub fn output_dim(&self, hidden: usize) -> usize {
        hidden * self.modes.len()
    }

    /// Pools `states` (`len` rows of `hidden`, only the sequence's real tokens).
    /// Column sums run top to bottom, so a token's contribution never depends on padding.
    pub fn pool(&self, states: &[f32], hidden: usize) -> Vec<f32> {
        let len = states.len() / hidden;
        let rows = || states.chunks_exact(hidden);
        let mut out = Vec::with_capacity(self.output_dim(hidden));
        let column_sum = || {
            let mut s = vec![0.0f32; hidden];
            for r in rows() {
                for (a, b) in s.iter_mut().zip(r) {
                    *a += b;
                }
            }
            s
        };
        for m in &self.modes {
            match m {
                PoolingMode::Cls => out.extend_from_slice(&states[..hidden]),
                PoolingMode::LastToken => out.extend_from_slice(&states[(len - 1) * hidden..]),
                PoolingMode::Max => {
                    let mut s = vec![f32::NEG_INFINITY; hidden];
                    for r in rows() {
                        for (a, b) in s.iter_mut().zip(r) {
                            *a = a.max(*b);
                        }
                    }
                    out.extend(s);
                }
                PoolingMode::Mean => {
                    let n = len as f32;
                    out.extend(column_sum().into_iter().map(|v| v / n));
                }
                PoolingMode::MeanSqrtLen => {
                    let d = (len as f32).sqrt();
                    out.extend(column_sum().into_iter().map(|v| v / d));
                }
                PoolingMode::WeightedMean => {
                    // Weights 1..=len, as sentence-transformers' position-weighted mean.
                    let mut s = vec![0.0f32; hidden];
                    for (i, r) in rows().enumerate() {
                        let w = (i + 1) as f32;
                        for (a, b) in s.iter_mut().zip(r) {
                            *a = b.mul_add(w, *a);
                        }
                    }
                    let total = (len * (len + 1) / 2) as f32;
                    out.extend(s.into_iter().map(|v| v / total));
                }
            }
        }
        out
    }
}

/// L2 normalization as `torch.nn.functional.normalize` (norm clamped at 1e-12).
pub fn l2_normalize(k: &Kernels, v: &mut [f32]) {
    let norm = k.dot(v, v).sqrt().max(1e-12);
    for x in v.iter_mut() {
        *x /= norm;
    }
}
