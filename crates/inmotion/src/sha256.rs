//! SHA-256 (FIPS 180-4), for `weights_sha256` and the artifact hash `bench` records. Written
//! here rather than adding a dependency; checked against the standard vectors. x86-64 CPUs with
//! the SHA extensions hash with them (about 5x faster: the published-size artifacts are
//! several MB and start-up must stay under 20 ms); both paths are compared in a test.

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

fn compress(h: &mut [u32; 8], block: &[u8]) {
    let mut w = [0u32; 64];
    for (i, c) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
    }
    for i in 16..64 {
        let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
        let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16]
            .wrapping_add(s0)
            .wrapping_add(w[i - 7])
            .wrapping_add(s1);
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = *h;
    for i in 0..64 {
        let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
        let ch = (e & f) ^ (!e & g);
        let t1 = hh
            .wrapping_add(s1)
            .wrapping_add(ch)
            .wrapping_add(K[i])
            .wrapping_add(w[i]);
        let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
        let maj = (a & b) ^ (a & c) ^ (b & c);
        let t2 = s0.wrapping_add(maj);
        hh = g;
        g = f;
        f = e;
        e = d.wrapping_add(t1);
        d = c;
        c = b;
        b = a;
        a = t1.wrapping_add(t2);
    }
    for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
        *x = x.wrapping_add(y);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
unsafe fn compress_blocks_ni(state: &mut [u32; 8], blocks: &[u8]) {
    use std::arch::x86_64::*;
    let mask = _mm_set_epi64x(
        0x0C0D_0E0F_0809_0A0Bu64 as i64,
        0x0405_0607_0001_0203u64 as i64,
    );
    let sp = state.as_ptr() as *const __m128i;
    let dcba = _mm_loadu_si128(sp);
    let efgh = _mm_loadu_si128(sp.add(1));
    let cdab = _mm_shuffle_epi32(dcba, 0xB1);
    let efgh = _mm_shuffle_epi32(efgh, 0x1B);
    let mut abef = _mm_alignr_epi8(cdab, efgh, 8);
    let mut cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    let kp = K.as_ptr() as *const __m128i;
    for block in blocks.chunks_exact(64) {
        let (abef_save, cdgh_save) = (abef, cdgh);
        let dp = block.as_ptr() as *const __m128i;
        let mut w = [
            _mm_shuffle_epi8(_mm_loadu_si128(dp), mask),
            _mm_shuffle_epi8(_mm_loadu_si128(dp.add(1)), mask),
            _mm_shuffle_epi8(_mm_loadu_si128(dp.add(2)), mask),
            _mm_shuffle_epi8(_mm_loadu_si128(dp.add(3)), mask),
        ];
        for i in 0..16 {
            let wi = if i < 4 {
                w[i]
            } else {
                // W[4i..4i+4] from the previous 16 words.
                let t1 = _mm_sha256msg1_epu32(w[0], w[1]);
                let t2 = _mm_alignr_epi8(w[3], w[2], 4);
                let next = _mm_sha256msg2_epu32(_mm_add_epi32(t1, t2), w[3]);
                w = [w[1], w[2], w[3], next];
                next
            };
            let t1 = _mm_add_epi32(wi, _mm_loadu_si128(kp.add(i)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, t1);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(t1, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef_save);
        cdgh = _mm_add_epi32(cdgh, cdgh_save);
    }
    let feba = _mm_shuffle_epi32(abef, 0x1B);
    let dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    let dcba = _mm_blend_epi16(feba, dchg, 0xF0);
    let hgef = _mm_alignr_epi8(dchg, feba, 8);
    let out = state.as_mut_ptr() as *mut __m128i;
    _mm_storeu_si128(out, dcba);
    _mm_storeu_si128(out.add(1), hgef);
}

/// Whole 64-byte blocks of `blocks` into `h`.
fn compress_blocks(h: &mut [u32; 8], blocks: &[u8], allow_ni: bool) {
    #[cfg(target_arch = "x86_64")]
    if allow_ni
        && std::arch::is_x86_feature_detected!("sha")
        && std::arch::is_x86_feature_detected!("sse4.1")
        && std::arch::is_x86_feature_detected!("ssse3")
    {
        // SAFETY: the CPU has every feature the function enables.
        unsafe { compress_blocks_ni(h, blocks) };
        return;
    }
    let _ = allow_ni;
    for block in blocks.chunks_exact(64) {
        compress(h, block);
    }
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    sha256_with(data, true)
}

fn sha256_with(data: &[u8], allow_ni: bool) -> String {
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let whole = data.len() / 64 * 64;
    compress_blocks(&mut h, &data[..whole], allow_ni);
    let rest = &data[whole..];
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let len = if rest.len() < 56 { 64 } else { 128 };
    tail[len - 8..len].copy_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    compress_blocks(&mut h, &tail[..len], allow_ni);
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::{sha256_hex, sha256_with};

    #[test]
    fn extension_path_equals_portable_path() {
        let data: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for n in [0, 1, 55, 56, 63, 64, 65, 127, 128, 1000, 5000] {
            assert_eq!(
                sha256_with(&data[..n], true),
                sha256_with(&data[..n], false),
                "{n}"
            );
        }
    }

    #[test]
    fn standard_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        let a = vec![b'a'; 1_000_000];
        assert_eq!(
            sha256_hex(&a),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }
}
