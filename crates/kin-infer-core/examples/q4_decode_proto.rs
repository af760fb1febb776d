//! Issue 13's prototype, before any quantized kernel is built into the tiers: can a Q4_0
//! matrix-vector product that keeps the weights 4-bit in memory, dequantizes them in
//! registers and multiplies **f32** activations with one FMA per weight, in the f32 GEMM's k
//! order, keep up with decode's memory traffic on AVX2? And does it give the bits of the f32
//! product over the dequantized weights?
//!
//! ```sh
//! cargo run --release -p kin-infer-core --example q4_decode_proto -- [ROWS] [K] [REPS]
//! ```
//!
//! Weights: `ROWS × K` random Q4_0 blocks (random nibbles, random finite f16 scales), default
//! 36 matrices' worth of a 135M-parameter decoder's projections in one `8192 × 8192` matrix
//! (64 M weights: 36 MB as Q4_0, 256 MB as f32, far past any cache). Prints the f32 product's
//! and the Q4_0 product's time per call, effective weight bandwidth, and whether their bits
//! agree. The panel layout here (per 16 output columns and 32 k: sixteen f16 scales, then 32
//! rows of 8 bytes, byte i = column i's nibble | column i+8's << 4) is the prototype's own;
//! `kernels::ggml` holds the file layout and its reference.

use kin_infer_core::kernels::ggml::GgmlType;
use kin_infer_core::kernels::{for_tier, Tier};
use std::time::Instant;

const NR: usize = 16;
const QB: usize = 32;

/// Q4_0 weights repacked into the prototype's panels (see the module doc).
struct Q4Panels {
    k: usize,
    n: usize,
    data: Vec<u8>,
}

/// Bytes of one 16-column, 32-k block: 16 f16 scales + 32 rows of 8 code bytes.
const BLOCK: usize = NR * 2 + QB * NR / 2;

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn repack(q4: &[u8], n: usize, k: usize) -> Q4Panels {
    let per_row = k / QB * 18;
    let mut data = vec![0u8; n / NR * (k / QB) * BLOCK];
    for jp in 0..n / NR {
        for kb in 0..k / QB {
            let out = &mut data[(jp * (k / QB) + kb) * BLOCK..][..BLOCK];
            for c in 0..NR {
                let blk = &q4[(jp * NR + c) * per_row + kb * 18..][..18];
                out[2 * c..2 * c + 2].copy_from_slice(&blk[..2]);
                for p in 0..QB {
                    let q = if p < 16 {
                        blk[2 + p] & 15
                    } else {
                        blk[2 + p - 16] >> 4
                    };
                    let at = NR * 2 + p * 8 + c % 8;
                    out[at] |= q << (4 * (c / 8));
                }
            }
        }
    }
    Q4Panels { k, n, data }
}

/// `out[j] = Σ_p a[p]·w[p][j]`, each output from 0.0 with FMA in p order, w = d·(q − 8);
/// `P` panels (16·P columns, 2·P accumulators) per pass, P ≤ 4.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_q4<const P: usize>(a: &[f32], w: &Q4Panels, out: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(P <= 4 && (w.n / NR).is_multiple_of(P));
    let kb_n = w.k / QB;
    unsafe {
        for jp in (0..w.n / NR).step_by(P) {
            let mut acc = [_mm256_setzero_ps(); 8];
            for kb in 0..kb_n {
                let blk: [*const u8; P] =
                    core::array::from_fn(|i| w.data.as_ptr().add(((jp + i) * kb_n + kb) * BLOCK));
                let mut d = [_mm256_setzero_ps(); 8];
                let mut m8d = [_mm256_setzero_ps(); 8];
                for i in 0..P {
                    for h in 0..2 {
                        let s = _mm_loadu_si128(blk[i].add(16 * h).cast());
                        d[2 * i + h] = _mm256_cvtph_ps(s);
                        // −8·d is exact (a power-of-two multiple), and so is q·d: the FMA
                        // below returns d·(q − 8) exactly, as the reference computes it.
                        m8d[2 * i + h] = _mm256_mul_ps(d[2 * i + h], _mm256_set1_ps(-8.0));
                    }
                }
                let mask = _mm256_set1_epi32(15);
                for p in 0..QB {
                    let av = _mm256_set1_ps(*a.get_unchecked(kb * QB + p));
                    for i in 0..P {
                        let bytes = _mm_loadl_epi64(blk[i].add(NR * 2 + p * 8).cast());
                        let b = _mm256_cvtepu8_epi32(bytes);
                        let lo = _mm256_cvtepi32_ps(_mm256_and_si256(b, mask));
                        let hi = _mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(b));
                        let wlo = _mm256_fmadd_ps(lo, d[2 * i], m8d[2 * i]);
                        let whi = _mm256_fmadd_ps(hi, d[2 * i + 1], m8d[2 * i + 1]);
                        acc[2 * i] = _mm256_fmadd_ps(av, wlo, acc[2 * i]);
                        acc[2 * i + 1] = _mm256_fmadd_ps(av, whi, acc[2 * i + 1]);
                    }
                }
            }
            for (q, v) in acc[..2 * P].iter().enumerate() {
                _mm256_storeu_ps(out.as_mut_ptr().add(jp * NR + q * 8), *v);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("this prototype is x86-64 (AVX2) only");
    std::process::exit(2);
}

#[cfg(target_arch = "x86_64")]
fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let n = args.first().copied().unwrap_or(8192);
    let k = args.get(1).copied().unwrap_or(8192);
    let reps = args.get(2).copied().unwrap_or(10);
    assert!(
        n.is_multiple_of(64) && k.is_multiple_of(QB),
        "ROWS must be a multiple of 64, K of 32"
    );
    if !Tier::Avx2.supported() {
        eprintln!("this prototype needs AVX2 + FMA");
        std::process::exit(2);
    }
    // Random Q4_0 rows (xorshift; finite f16 scales around 0.01).
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let per_row = k / QB * 18;
    let mut q4 = vec![0u8; n * per_row];
    for blk in q4.chunks_exact_mut(18) {
        let d = half::f16::from_f32(0.002 + (next() % 1000) as f32 * 2e-5);
        blk[..2].copy_from_slice(&d.to_bits().to_le_bytes());
        for b in &mut blk[2..] {
            *b = next() as u8;
        }
    }
    let a: Vec<f32> = (0..k)
        .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();

    // The f32 twin: every row dequantized by the reference, packed for the f32 GEMM.
    let mut wf = vec![0.0f32; n * k];
    for (row, bytes) in wf.chunks_exact_mut(k).zip(q4.chunks_exact(per_row)) {
        GgmlType::Q4_0.dequantize(bytes, row);
    }
    let kern = for_tier(Tier::Avx2).unwrap();
    let packed = kern.pack_rows(&wf, n, k, k);
    drop(wf);
    let panels = repack(&q4, n, k);
    // The engine's own path (blocks.rs panels, the tier's direct row kernel), per tier.
    let engine: Vec<_> = [Tier::Avx2, Tier::Avx512]
        .into_iter()
        .filter(|t| t.supported())
        .map(|t| {
            let kt = for_tier(t).unwrap();
            let q = kt.pack_rows_quant(&[&q4], k, GgmlType::Q4_0).unwrap();
            (kt, q)
        })
        .collect();
    drop(q4);

    let mut want = vec![0.0f32; n];
    let mut got = vec![0.0f32; n];
    let time = |f: &mut dyn FnMut()| {
        f();
        let mut best = f64::MAX;
        for _ in 0..reps {
            let t = Instant::now();
            f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        best
    };
    let tf = time(&mut || kern.matmul(&a, k, 1, &packed, None, &mut want, n));
    let tq = time(&mut || unsafe { gemv_q4::<2>(&a, &panels, &mut got) });
    let mut got4 = vec![0.0f32; n];
    let tw = time(&mut || unsafe { gemv_q4::<4>(&a, &panels, &mut got4) });
    let equal = |g: &[f32]| want.iter().zip(g).all(|(x, y)| x.to_bits() == y.to_bits());
    let same = equal(&got) && equal(&got4);
    let weights = (n * k) as f64;
    println!(
        "one thread, AVX2, {n} x {k} ({:.1} M weights), best of {reps}",
        weights / 1e6
    );
    println!(
        "f32 row kernel : {:8.3} ms  {:6.2} GB/s  {:6.2} G weights/s",
        tf * 1e3,
        weights * 4.0 / tf / 1e9,
        weights / tf / 1e9
    );
    println!(
        "Q4_0 prototype : {:8.3} ms  {:6.2} GB/s  {:6.2} G weights/s  ({:.2}x the f32 kernel)",
        tq * 1e3,
        panels.data.len() as f64 / tq / 1e9,
        weights / tq / 1e9,
        tf / tq
    );
    println!(
        "Q4_0, 4 panels : {:8.3} ms  {:6.2} GB/s  {:6.2} G weights/s  ({:.2}x the f32 kernel)",
        tw * 1e3,
        panels.data.len() as f64 / tw / 1e9,
        weights / tw / 1e9,
        tf / tw
    );
    let mut same = same;
    for (kt, q) in &engine {
        let mut out = vec![0.0f32; n];
        let te = time(&mut || kt.matmul(&a, k, 1, q, None, &mut out, n));
        same &= equal(&out);
        println!(
            "engine Q4_0 {:7}: {:8.3} ms  {:6.2} GB/s  {:6.2} G weights/s  ({:.2}x the f32 kernel)",
            kt.tier().name(),
            te * 1e3,
            q.stored_bytes() as f64 / te / 1e9,
            weights / te / 1e9,
            tf / te
        );
    }
    println!("bits equal to the f32 product over the dequantized weights: {same}");
    if !same {
        std::process::exit(1);
    }
}
