//! Deterministic f64 elementary functions for building tables (RoPE frequencies and angles,
//! ALiBi slopes). Plain IEEE f64 arithmetic in a fixed order: identical bits everywhere, no
//! platform libm. Accuracy ~1e-16 relative, far below the f32 rounding applied to every result.

const LN2_HI: f64 = 0.693_147_180_369_123_8;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;

/// `2^k` for an integer `k` in the normal range.
fn exp2i(k: i64) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Natural logarithm of a positive, finite `x`.
pub fn ln_f64(x: f64) -> f64 {
    assert!(x > 0.0 && x.is_finite(), "ln of {x}");
    // x = m · 2^k with m in [sqrt(1/2), sqrt(2)).
    let bits = x.to_bits();
    let mut k = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        k += 1;
    }
    // ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: 2 (s + s^3/3 + ... + s^31/31).
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut acc = 0.0;
    let mut n = 31;
    while n >= 3 {
        acc = (acc + 1.0 / n as f64) * s2;
        n -= 2;
    }
    let lnm = 2.0 * (s + s * acc);
    (k as f64) * LN2_HI + ((k as f64) * LN2_LO + lnm)
}

/// `e^x` for `|x| < 700`.
pub fn exp_f64(x: f64) -> f64 {
    assert!(x.abs() < 700.0, "exp of {x}");
    let k = (x / std::f64::consts::LN_2).round();
    let r = (x - k * LN2_HI) - k * LN2_LO; // |r| <= 0.347
                                           // Taylor series to r^24 / 24!, Horner from the top.
    let mut acc = 1.0;
    let mut n = 24;
    while n >= 1 {
        acc = 1.0 + acc * r / n as f64;
        n -= 1;
    }
    acc * exp2i(k as i64)
}

/// `base^e` for `base > 0`; exact for an integer power of two raised to an integer.
pub fn pow_f64(base: f64, e: f64) -> f64 {
    if e == 0.0 {
        return 1.0;
    }
    exp_f64(e * ln_f64(base))
}

/// `2^e`: exact when `e` is an integer, else `2^floor(e) · e^(frac · ln 2)`.
pub fn exp2_f64(e: f64) -> f64 {
    let k = e.floor();
    let f = e - k;
    let p = if f == 0.0 {
        1.0
    } else {
        exp_f64(f * std::f64::consts::LN_2)
    };
    p * exp2i(k as i64)
}

/// `(sin x, cos x)` for `|x| < 2^30`.
pub fn sin_cos_f64(x: f64) -> (f64, f64) {
    assert!(x.abs() < (1u64 << 30) as f64, "sin/cos of {x}");
    // Cody-Waite reduction by pi/2 in three 33-bit pieces (fdlibm's constants): with |k| < 2^30
    // each product k·PIO2_n is exact.
    const PIO2_1: f64 = 1.570_796_326_734_125_6;
    const PIO2_2: f64 = 6.077_100_506_303_966e-11;
    const PIO2_3: f64 = 2.022_266_248_711_166_5e-21;
    const PIO2_3T: f64 = 8.478_427_660_368_9e-32;
    let k = (x * std::f64::consts::FRAC_2_PI).round();
    let r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3 - k * PIO2_3T;
    let r2 = r * r;
    // |r| <= pi/4: Taylor series to r^23 (sin) and r^22 (cos).
    let mut s = 0.0;
    let mut c = 0.0;
    let mut n = 11;
    while n >= 1 {
        // sin: terms (-1)^n r^(2n+1)/(2n+1)!;  cos: (-1)^n r^(2n)/(2n)!
        s = 1.0 - s * r2 / ((2 * n) as f64 * (2 * n + 1) as f64);
        c = 1.0 - c * r2 / ((2 * n - 1) as f64 * (2 * n) as f64);
        n -= 1;
    }
    let sin_r = r * s;
    let cos_r = c;
    match (k as i64).rem_euclid(4) {
        0 => (sin_r, cos_r),
        1 => (cos_r, -sin_r),
        2 => (-sin_r, -cos_r),
        _ => (-cos_r, sin_r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64_functions_match_std_closely() {
        for &x in &[1e-3, 0.5, 1.0, 2.0, 10.0, 1000.0, 10000.0, 123456.789] {
            let l = ln_f64(x);
            assert!(
                (l - x.ln()).abs() <= 4e-16 * x.ln().abs().max(1.0),
                "ln {x}"
            );
        }
        for &x in &[-20.0, -1.0, -1e-3, 0.0, 0.3, 1.0, 5.5, 40.0] {
            let e = exp_f64(x);
            assert!(((e - x.exp()) / x.exp()).abs() < 1e-15, "exp {x}");
        }
        for i in 0..2000 {
            let x = (i as f64) * 4.1 - 1000.0;
            let (s, c) = sin_cos_f64(x);
            assert!(
                (s - x.sin()).abs() < 1e-15 && (c - x.cos()).abs() < 1e-15,
                "sincos {x}"
            );
        }
        assert_eq!(exp2_f64(-2.0), 0.25);
        assert_eq!(exp2_f64(-8.0 / 4.0 * 3.0), 0.015625);
        assert!((pow_f64(10000.0, 0.25) - 10.0).abs() < 1e-14);
    }
}
