//! Raw readings → model window, as an artifact's `preprocess` declares:
//! `z[t] = (r[t] - mean[t]) / std[t]`, then one channel per feature (raw, diff1, diff2, dev).
//! Computed in f64 and rounded once to f32 per value.

use crate::meta::{Feature, Preprocess};

/// `raw`: `seq_len` readings; `out`: `[seq_len, features.len()]` row-major.
pub fn apply(p: &Preprocess, raw: &[f32], out: &mut [f32]) {
    let t = p.mean.len();
    let c = p.features.len();
    assert!(raw.len() == t && out.len() == t * c, "preprocess: lengths");
    let mut z = [0f64; 64];
    let mut zv;
    let z: &mut [f64] = if t <= 64 {
        &mut z[..t]
    } else {
        zv = vec![0f64; t];
        &mut zv
    };
    for i in 0..t {
        z[i] = (raw[i] as f64 - p.mean[i] as f64) / p.std[i] as f64;
    }
    let mean_z = z.iter().sum::<f64>() / t as f64;
    for i in 0..t {
        let d1 = |i: usize| if i == 0 { 0.0 } else { z[i] - z[i - 1] };
        for (ch, f) in p.features.iter().enumerate() {
            let v = match f {
                Feature::Raw => z[i],
                Feature::Diff1 => d1(i),
                Feature::Diff2 => {
                    if i == 0 {
                        0.0
                    } else {
                        d1(i) - d1(i - 1)
                    }
                }
                Feature::Dev => z[i] - mean_z,
            };
            out[i * c + ch] = v as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_follow_the_spec() {
        let p = Preprocess {
            mean: vec![1.0; 4],
            std: vec![2.0; 4],
            features: vec![Feature::Raw, Feature::Diff1, Feature::Diff2, Feature::Dev],
        };
        let raw = [1.0, 3.0, 7.0, 5.0]; // z = 0, 1, 3, 2; mean 1.5
        let mut out = [0.0; 16];
        apply(&p, &raw, &mut out);
        let rows: Vec<&[f32]> = out.chunks(4).collect();
        assert_eq!(rows[0], [0.0, 0.0, 0.0, -1.5]);
        assert_eq!(rows[1], [1.0, 1.0, 1.0, -0.5]);
        assert_eq!(rows[2], [3.0, 2.0, 1.0, 1.5]);
        assert_eq!(rows[3], [2.0, -1.0, -3.0, 0.5]);
    }
}
