//! ggml's reference quantizers for the K-quants written here (`quantize_row_q4_K_ref`,
//! `quantize_row_q5_K_ref`, `quantize_row_q6_K_ref` in ggml-quants.c): per 32-value sub-block
//! a weighted search for the scale and minimum (`make_qkx2_quants`; Q6_K: per 16 values a
//! signed scale search, `make_qx_quants` with weights x²), the sub-block scales quantized to
//! 6 bits (Q6_K: 8) against an f16 super-block scale, then every value re-rounded against the
//! stored scales. Each f32 operation is the C code's, in its order (Rust never contracts
//! `a * b + c`, nor does the reference's baseline x86-64 build), `nearest_int` its
//! round-to-nearest-even through the 1.5·2²³ trick. Byte for byte llama.cpp's own functions,
//! called through the `xllamacpp` wheel's library (python/gen_ggml_goldens.py,
//! tests/ggml_formats.rs).

/// ggml's `nearest_int`: `fval` rounded to nearest, ties to even (exact for |fval| < 2²²;
/// larger values give the same bits as the reference, which asserts on them in debug only).
fn nearest_int(fval: f32) -> i32 {
    let val = fval + 12_582_912.0;
    (val.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

fn f16_round(v: f32) -> (u16, f32) {
    let h = half::f16::from_f32(v);
    (h.to_bits(), h.to_f32())
}

/// `make_qkx2_quants(n, nmax, x, weights, L, &the_min, Laux, rmin, rdelta, nstep, false)`:
/// the scale (returned) and `−min` of one sub-block, its codes in `l`.
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> (f32, f32) {
    let n = x.len();
    let mut laux = [0u8; 32];
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l[..n].fill(0);
        return (0.0, -min);
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min));
        l[i] = q.clamp(0, nmax) as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = q as u8;
            let (w, lf) = (weights[i], q as f32);
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * (diff * diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `make_qx_quants(16, 32, x, L, 1, NULL)` (Q6_K's): weights `x²`, codes `l + 32` in `l`.
fn make_qx_quants(x: &[f32], l: &mut [i8]) -> f32 {
    const NMAX: i32 = 32;
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < 1e-15 {
        l.fill(0);
        return 0.0;
    }
    let code = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-NMAX, NMAX - 1);
    let mut iscale = -(NMAX as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (i, &v) in x.iter().enumerate() {
        let q = code(iscale, v);
        l[i] = (q + NMAX) as i8;
        let w = v * v;
        sumlx += w * v * q as f32;
        suml2 += w * q as f32 * q as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(NMAX as f32 + 0.1 * is as f32) / max;
        (sumlx, suml2) = (0.0, 0.0);
        for &v in x {
            let q = code(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (i, &v) in x.iter().enumerate() {
                l[i] = (code(iscale, v) + NMAX) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// One Q4_K block of 256 values.
pub(super) fn q4_k(x: &[f32], out: &mut Vec<u8>) {
    q45_k(4, x, out);
}

/// One Q5_K block of 256 values.
pub(super) fn q5_k(x: &[f32], out: &mut Vec<u8>) {
    q45_k(5, x, out);
}

/// One Q4_K (`bits` 4) or Q5_K (5) block of 256 values.
fn q45_k(bits: u32, x: &[f32], out: &mut Vec<u8>) {
    let (nmax, rmin, nstep) = if bits == 4 {
        (15, -1.0, 20)
    } else {
        (31, -0.5, 15)
    };
    let mut l = [0u8; 256];
    let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0.0f32; 32];
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        (scales[j], mins[j]) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            rmin,
            0.1,
            nstep,
        );
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut sc12 = [0u8; 12];
    let (mut ls_all, mut lm_all) = ([0u8; 8], [0u8; 8]);
    for j in 0..8 {
        // `uint8_t ls = nearest_int(...)`: the int truncated to a byte, then capped at 63.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        (ls_all[j], lm_all[j]) = (ls, lm);
        if j < 4 {
            sc12[j] = ls;
            sc12[j + 4] = lm;
        } else {
            sc12[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            sc12[j - 4] |= (ls >> 4) << 6;
            sc12[j] |= (lm >> 4) << 6;
        }
    }
    let (d_bits, d) = f16_round(max_scale / 63.0);
    let (dmin_bits, dmin) = f16_round(max_min / 63.0);
    for j in 0..8 {
        let dj = d * ls_all[j] as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin * lm_all[j] as f32;
        for ii in 0..32 {
            let q = nearest_int((x[32 * j + ii] + dm) / dj);
            l[32 * j + ii] = q.clamp(0, nmax) as u8;
        }
    }
    out.extend_from_slice(&d_bits.to_le_bytes());
    out.extend_from_slice(&dmin_bits.to_le_bytes());
    out.extend_from_slice(&sc12);
    if bits == 5 {
        let mut qh = [0u8; 32];
        let mut ql = [0u8; 128];
        for (c, n) in (0..256).step_by(64).enumerate() {
            let (m1, m2) = (1u8 << (2 * c), 2u8 << (2 * c));
            for j in 0..32 {
                let (mut l1, mut l2) = (l[n + j], l[n + j + 32]);
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[32 * c + j] = l1 | (l2 << 4);
            }
        }
        out.extend_from_slice(&qh);
        out.extend_from_slice(&ql);
    } else {
        for j in (0..256).step_by(64) {
            for i in 0..32 {
                out.push(l[j + i] | (l[j + i + 32] << 4));
            }
        }
    }
}

/// One Q6_K block of 256 values.
pub(super) fn q6_k(x: &[f32], out: &mut Vec<u8>) {
    let mut l = [0i8; 256];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
    for ib in 0..16 {
        let scale = make_qx_quants(&x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
        scales[ib] = scale;
        if scale.abs() > max_abs_scale {
            max_abs_scale = scale.abs();
            max_scale = scale;
        }
    }
    if max_abs_scale < 1e-15 {
        out.extend_from_slice(&[0u8; 210]);
        return;
    }
    let iscale = -128.0 / max_scale;
    let (d_bits, d) = f16_round(1.0 / iscale);
    let mut sc = [0i8; 16];
    for ib in 0..16 {
        sc[ib] = nearest_int(iscale * scales[ib]).min(127) as i8;
    }
    for j in 0..16 {
        let dj = d * sc[j] as f32;
        if dj == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let q = nearest_int(x[16 * j + ii] / dj).clamp(-32, 31);
            l[16 * j + ii] = (q + 32) as i8;
        }
    }
    let (mut ql, mut qh) = ([0u8; 128], [0u8; 64]);
    for (h, j) in (0..256).step_by(128).enumerate() {
        for i in 0..32 {
            let q = |o: usize| l[j + i + o] as u8;
            ql[64 * h + i] = (q(0) & 0xF) | ((q(64) & 0xF) << 4);
            ql[64 * h + i + 32] = (q(32) & 0xF) | ((q(96) & 0xF) << 4);
            qh[32 * h + i] =
                (q(0) >> 4) | ((q(32) >> 4) << 2) | ((q(64) >> 4) << 4) | ((q(96) >> 4) << 6);
        }
    }
    out.extend_from_slice(&ql);
    out.extend_from_slice(&qh);
    out.extend_from_slice(&sc.map(|v| v as u8));
    out.extend_from_slice(&d_bits.to_le_bytes());
}
