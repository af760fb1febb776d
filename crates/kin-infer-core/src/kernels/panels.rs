//! The packed B panels the GEMM driver (`gemm.rs`) reads: their storage per weight format
//! and the packers that lay a matrix out as `nr`-wide, zero-padded, k-major panels (from
//! an element getter, from contiguous columns or from contiguous rows). Kept apart from the
//! driver because loaders and attention pack panels without running a product.

use super::aligned::AlignedBuf;
use super::{PackedMatrix, WeightFormat};

/// The packed B panels in their [`WeightFormat`]'s storage: f32 values, or raw 16-bit
/// patterns of a half format (widened exactly inside the micro-kernels).
#[derive(Clone, Debug)]
pub(crate) struct Panels {
    pub(crate) format: WeightFormat,
    pub(crate) data: PanelData,
}

/// Panel storage by element width, or the bytes of block-quantized panels (`blocks.rs`).
#[derive(Clone, Debug)]
pub(crate) enum PanelData {
    F32(AlignedBuf<f32>),
    U16(AlignedBuf<u16>),
    Blocks(AlignedBuf<u8>),
    /// Not panels: the ggml blocks of the weight rows as the file stores them, rows
    /// interleaved block by block in groups of eight (`q8_gemm::Rows`), or in the lane
    /// layout (`q8_lanes.rs`, the flag), for the q8 numerics mode's product. A matrix packed
    /// this way multiplies only in that mode.
    Rows(AlignedBuf<u8>, bool),
}

impl Panels {
    pub(crate) fn f32(buf: AlignedBuf<f32>) -> Panels {
        Panels {
            format: WeightFormat::F32,
            data: PanelData::F32(buf),
        }
    }
    /// The first stored element, untyped (the micro-kernels cast it back by format).
    pub(super) fn as_ptr(&self) -> *const u8 {
        match &self.data {
            PanelData::F32(v) => v.as_slice().as_ptr().cast(),
            PanelData::U16(v) => v.as_slice().as_ptr().cast(),
            PanelData::Blocks(v) | PanelData::Rows(v, _) => v.as_slice().as_ptr(),
        }
    }
}

/// Packs into `nr`-wide zero-padded k-major panels of any element type.
pub(crate) fn pack_panels<T: Copy + Default>(
    nr: usize,
    k: usize,
    n: usize,
    get: impl Fn(usize, usize) -> T,
) -> AlignedBuf<T> {
    let mut buf = AlignedBuf::zeroed(0);
    fill_panels(&mut buf, nr, k, n, get);
    buf
}

/// [`pack_panels`] into an existing buffer (no allocation once it is large enough).
pub(crate) fn fill_panels<T: Copy + Default>(
    buf: &mut AlignedBuf<T>,
    nr: usize,
    k: usize,
    n: usize,
    get: impl Fn(usize, usize) -> T,
) {
    let panels = n.div_ceil(nr);
    buf.reset(panels * k * nr);
    let data = buf.as_mut_slice();
    for jp in 0..panels {
        let cols = nr.min(n - jp * nr);
        let panel = &mut data[jp * k * nr..(jp + 1) * k * nr];
        // j outer, p inner: for a torch weight (`pack_rows`) this reads memory sequentially.
        for jj in 0..cols {
            for p in 0..k {
                panel[p * nr + jj] = get(p, jp * nr + jj);
            }
        }
    }
}

/// [`pack_panels`] of a matrix given by its columns as contiguous slices (`col(j)`: the `k`
/// values of column `j`, i.e. row `j` of a torch weight): the same panels, built with no
/// per-element index arithmetic or bounds check (this is most of an edge model's load).
pub(crate) fn pack_col_slices<'a, T: Copy + Default + 'a>(
    nr: usize,
    k: usize,
    n: usize,
    col: impl Fn(usize) -> &'a [T],
) -> AlignedBuf<T> {
    let mut buf = AlignedBuf::zeroed(0);
    fill_col_slices(&mut buf, nr, k, n, col);
    buf
}

/// [`pack_col_slices`] into an existing buffer (no allocation once it is large enough).
pub(crate) fn fill_col_slices<'a, T: Copy + Default + 'a>(
    buf: &mut AlignedBuf<T>,
    nr: usize,
    k: usize,
    n: usize,
    col: impl Fn(usize) -> &'a [T],
) {
    let panels = n.div_ceil(nr);
    // Every element is written below (padding columns as zeros), so stale contents can stay.
    buf.reuse(panels * k * nr);
    if k == 0 {
        return;
    }
    let data = buf.as_mut_slice();
    // Column by column over all of k: each weight row is read once, sequentially, from the
    // map (most of an edge model's load; a cache-blocked order with 16 rows read at once
    // measured 30% slower at inMotion ts_jepa's load). Attention's keys, packed per call,
    // take a tier's `Ops::pack_rows_f32` where it has one.
    for jp in 0..panels {
        let cols = nr.min(n - jp * nr);
        let panel = &mut data[jp * k * nr..(jp + 1) * k * nr];
        for jj in 0..cols {
            let src = &col(jp * nr + jj)[..k];
            for (d, &v) in panel[jj..].iter_mut().step_by(nr).zip(src) {
                *d = v;
            }
        }
        if cols < nr {
            for row in panel.chunks_exact_mut(nr) {
                row[cols..].fill(T::default());
            }
        }
    }
}

/// The same panels from a matrix given by its rows (`row(p)`: the `n` values of row `p`):
/// each panel row is one contiguous copy (attention's values, packed per head per call).
pub(crate) fn fill_row_slices<'a>(
    buf: &mut AlignedBuf<f32>,
    nr: usize,
    k: usize,
    n: usize,
    row: impl Fn(usize) -> &'a [f32],
) {
    let panels = n.div_ceil(nr);
    // Every element is written below (padding columns as zeros), so stale contents can stay.
    buf.reuse(panels * k * nr);
    if k == 0 || n == 0 {
        return;
    }
    let data = buf.as_mut_slice();
    for p in 0..k {
        let src = &row(p)[..n];
        for (jp, chunk) in src.chunks(nr).enumerate() {
            let at = jp * k * nr + p * nr;
            let dst = &mut data[at..at + nr];
            copy_short(&mut dst[..chunk.len()], chunk);
            dst[chunk.len()..].fill(0.0);
        }
    }
}

/// `dst.copy_from_slice(src)`, inlined for the panel widths: a call into the C library's
/// memmove costs more than moving 64 bytes (attention copies a head's rows 16 or 32 floats
/// at a time).
#[inline(always)]
pub(crate) fn copy_short(dst: &mut [f32], src: &[f32]) {
    match (
        <&mut [f32; 16]>::try_from(&mut *dst),
        <&[f32; 16]>::try_from(src),
    ) {
        (Ok(d), Ok(s)) => *d = *s,
        _ => match (
            <&mut [f32; 32]>::try_from(&mut *dst),
            <&[f32; 32]>::try_from(src),
        ) {
            (Ok(d), Ok(s)) => *d = *s,
            _ => dst.copy_from_slice(src),
        },
    }
}

/// `dst`'s f32 panels for a `k × n` matrix of panel width `nr`, made f32 if they were not
/// (reusing the allocation when they were); the caller fills them.
pub(crate) fn f32_panels_of(
    dst: &mut PackedMatrix,
    k: usize,
    n: usize,
    nr: usize,
) -> &mut AlignedBuf<f32> {
    if !matches!(dst.buf.data, PanelData::F32(_)) {
        dst.buf = Panels::f32(AlignedBuf::zeroed(0));
    }
    dst.buf.format = WeightFormat::F32;
    (dst.k, dst.n, dst.nr) = (k, n, nr);
    match &mut dst.buf.data {
        PanelData::F32(buf) => buf,
        PanelData::U16(_) | PanelData::Blocks(_) | PanelData::Rows(..) => {
            unreachable!("set to f32 above")
        }
    }
}
