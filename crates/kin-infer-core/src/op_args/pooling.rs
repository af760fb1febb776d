//! Sentence pooling modes, as sentence-transformers names them; the pooling itself is a
//! backend op ([`crate::backend::GpuCompute::pool`]).

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
}
