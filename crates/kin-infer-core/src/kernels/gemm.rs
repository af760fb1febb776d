//! The blocked GEMM driver shared by all tiers (BLIS-style): B is packed once into NR-wide
//! k-major panels; per task, A is packed per KC slice into MR-row panels (thread-local scratch,
//! no per-call allocation); a tier's micro-kernel computes one MR×NR register tile.
//!
//! Why results never depend on tiling, threads or m: every output element is produced by the
//! micro-kernel accumulating p = 0, 1, …, k-1 in order with FMA, starting from 0.0; a KC block
//! boundary stores the partial sums to C and reloads them (exact); the bias is added once,
//! after the last block. A short last row panel runs the kernel instantiated for its row count
//! (so decoding one row costs one row's work); a narrow last column panel runs on a staged,
//! zero-padded copy of its tile. Tasks are
//! (row block × column block) tiles of C; k is never split across threads, and the blocking
//! (KC) depends on k only.

pub(crate) use super::aligned::AlignedBuf;
pub(crate) use super::widen::{bf16_to_f32, f16_to_f32};
use super::{assert_fits, Ops, PackedMatrix, WeightFormat};
use rayon::prelude::*;
use std::cell::RefCell;

/// One MR×NR micro-kernel call.
///
/// `a`: kc·MR floats (for each p, MR row values); `b`: kc·NR stored values of the panel's
/// [`WeightFormat`] (for each p, NR column values; f32, or bf16/f16 bits widened exactly in
/// registers, so the products are the f32 path's bits); `c`: an MR×NR tile with row stride `ldc`. If `load`, the accumulators start from
/// `c` (a previous KC block's partial sums), else from 0.0. Then for p in 0..kc every
/// accumulator does `acc = fma(a[p][r], b[p][j], acc)`. Finally, if `bias` is non-null,
/// `acc += bias[j]` (NR floats there), and the tile is stored to `c`.
///
/// The arguments travel as one struct, so the contract is stated here once for the dozen
/// kernels across the tiers that implement it.
#[derive(Clone, Copy)]
pub(crate) struct TileCall {
    pub kc: usize,
    pub a: *const f32,
    pub b: *const u8,
    pub c: *mut f32,
    pub ldc: usize,
    pub load: bool,
    pub bias: *const f32,
}

/// A tier's micro-kernel for [`TileCall`].
///
/// # Safety
/// The pointers must be valid for those extents, and the CPU must support the kernel's tier.
pub(crate) type MicroKernel = unsafe fn(TileCall);

/// Largest MR·NR over the tiers (AVX-512 14×32 = 448): edge tiles are staged in a stack buffer.
const MAX_TILE: usize = 512;
/// KC: a B micro-panel (KC·NR floats, 32 KiB for AVX-512) should stay in L1 (48 KiB on Zen5)
/// while all the A panels of a row block stream past it (384 fills L1 exactly; on this shared,
/// noisy 2-core VM 256 was as fast or faster). Blocks are made equal (k split in
/// ceil(k / KC_MAX) parts).
const KC_MAX: usize = 256;
/// Row block ≈ MC rows (A block MC·KC floats in L2) and column block ≈ NC columns.
const MC_MAX: usize = 192;
const NC_MAX: usize = 512;
/// Weight matrices at least this large are assumed to come from memory in a forward pass
/// (they do not stay in a core's L2 between products): the driver prefetches their next
/// panel. A hint only; results never depend on it.
const PREFETCH_MIN_BYTES: usize = 1 << 20;
/// Below this many multiply-adds a product runs on the calling thread: a rayon fork costs
/// microseconds, as much as the whole product (attention products are already parallel per
/// head in the caller).
pub(crate) const SERIAL_MACS: usize = 1 << 18;

/// Stores an accumulator tile (adding the bias if non-null): the generic/NEON epilogue.
///
/// # Safety
/// `c` must hold an MR×NR tile with row stride `ldc`; `bias`, if non-null, NR floats.
#[inline(always)]
pub(crate) unsafe fn store_tile<const MR: usize, const NR: usize>(
    acc: &[[f32; NR]; MR],
    c: *mut f32,
    ldc: usize,
    bias: *const f32,
) {
    unsafe {
        for (r, row) in acc.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                let v = if bias.is_null() {
                    *v
                } else {
                    *v + *bias.add(j)
                };
                *c.add(r * ldc + j) = v;
            }
        }
    }
}

thread_local! {
    /// Packed A panels of the current task (MC·KC floats), reused across calls.
    static APACK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// One block-quantized panel's KC slice dequantized to f32 panel rows (KC·NR floats).
    static STAGE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub(crate) *mut f32);
impl SendPtr {
    /// A method, so closures capture the whole (Send) wrapper, not the raw pointer field.
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}
// SAFETY: tasks write disjoint tiles of C through this pointer (see `matmul`).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// Splits `count` panels into `blocks` nearly equal ranges; returns block `i`.
fn split(count: usize, blocks: usize, i: usize) -> (usize, usize) {
    (i * count / blocks, (i + 1) * count / blocks)
}

/// The inputs of one product `C = A·B + bias` (see [`super::Kernels::matmul`]): A's `m` rows
/// with stride `lda`, B packed, C's row stride `ldc`. One struct, so the driver and its
/// per-task block take the same description instead of repeating eight arguments.
#[derive(Clone, Copy)]
pub(crate) struct Product<'a> {
    pub a: &'a [f32],
    pub lda: usize,
    pub m: usize,
    pub b: &'a PackedMatrix,
    pub bias: Option<&'a [f32]>,
    pub ldc: usize,
}

/// The driver behind [`super::Kernels::matmul`] (B already packed with `ops.nr`).
pub(crate) fn matmul(ops: &Ops, p: Product, c: &mut [f32]) {
    let (a, lda, m, b, bias, ldc) = (p.a, p.lda, p.m, p.b, p.bias, p.ldc);
    let (k, n, mr, nr) = (b.k, b.n, ops.mr, ops.nr);
    debug_assert_eq!(b.nr, nr);
    if m == 0 || n == 0 {
        return;
    }
    // These checks make the unsafe kernel calls below sound.
    assert_fits(c.len(), m, n, ldc, "matmul: c");
    if k > 0 {
        assert_fits(a.len(), m, k, lda, "matmul: a");
    }
    if let Some(bias) = bias {
        assert!(bias.len() >= n, "matmul: bias shorter than n");
    }
    assert!(mr * nr <= MAX_TILE);

    // A single row (decode) reuses no B panel, so it takes all of k in one block: each call
    // then streams its panels whole, which the hardware prefetchers follow (a Q4_0 panel's
    // 256-k slice is only 2.3 KB; strided slices of that size ran at a third of the read
    // bandwidth). Blocking never changes bits (partial sums are stored and reloaded exactly).
    let kc_blocks = if m == 1 { 1 } else { k.div_ceil(KC_MAX).max(1) };
    // A block format's KC slices are whole blocks (k itself is, checked at packing).
    let bl = b.buf.format.block_len();
    let kcb = k.div_ceil(kc_blocks).div_ceil(bl) * bl;
    let (mp, np) = (m.div_ceil(mr), n.div_ceil(nr));
    // A single row splits columns in groups of four panels, so each task's panels go through
    // the tier's four-panel row kernel (`Ops::row4`) with no single-panel remainder.
    let unit = if m == 1 && ops.row4.is_some() { 4 } else { 1 };
    let groups = np.div_ceil(unit);
    let mut rb = mp.div_ceil((MC_MAX / mr).max(1));
    let mut cb = groups.div_ceil((NC_MAX / nr / unit).max(1));
    // Fork only inside a rayon pool (`ThreadPool::install`, or a worker of the global pool).
    // Called from any other thread, the product runs on that thread: asking
    // `current_num_threads()` there would start the global pool behind the caller's back (a
    // single-threaded inMotion classify then had idle pool threads whose start-up allocations
    // landed in its no-allocation test). Threads never change the bits, only who computes.
    let threads = if rayon::current_thread_index().is_some() {
        rayon::current_num_threads()
    } else {
        1
    };
    let parallel = threads > 1 && m * n * k >= SERIAL_MACS;
    if parallel {
        // Enough equal tasks that every thread gets the same share (work stealing evens out
        // the rest): a multiple of the thread count, at least two per thread.
        while (rb * cb) % threads != 0 || rb * cb < 2 * threads {
            if rb < mp && (rb <= cb * 2 || cb >= np) {
                rb += 1;
            } else if cb < groups {
                cb += 1;
            } else {
                break;
            }
        }
    }
    let cp = SendPtr(c.as_mut_ptr());
    let task = |t: usize| {
        let (ip0, ip1) = split(mp, rb, t / cb);
        let (g0, g1) = split(groups, cb, t % cb);
        let (jp0, jp1) = (g0 * unit, (g1 * unit).min(np));
        if ip0 == ip1 || jp0 == jp1 {
            return;
        }
        APACK.with(|cell| {
            let mut fresh = Vec::new();
            let mut guard = cell.try_borrow_mut();
            let scratch = match guard.as_mut() {
                Ok(v) => &mut **v,
                Err(_) => &mut fresh,
            };
            // SAFETY: the tile ranges of different tasks are disjoint, and the asserts above
            // bound every access.
            unsafe { block(ops, p, cp.get(), (ip0, ip1), (jp0, jp1), kcb, scratch) };
        });
    };
    if parallel {
        (0..rb * cb).into_par_iter().for_each(task);
    } else {
        (0..rb * cb).for_each(task);
    }
}

/// Packs `rows` rows of A (row stride `lda`, `kc` columns from `a[0]`) into `panel`
/// (`panel[p·rows + r]`), writing the panel sequentially: one column of the row block at a
/// time, eight columns per pass so each row's reads stay on one cache line.
#[inline]
fn pack_a(panel: &mut [f32], a: &[f32], lda: usize, rows: usize, kc: usize) {
    assert!(panel.len() >= rows * kc && (rows == 0 || a.len() >= (rows - 1) * lda + kc));
    // Full panels of the tiers' row counts take a fixed-size copy the compiler unrolls into
    // straight loads and stores (measured: the packing was 9.6% of inMotion t_jepa's window,
    // whose 42-token products are short in n).
    match rows {
        6 => return pack_a_fixed::<6>(panel, a, lda, kc),
        14 => return pack_a_fixed::<14>(panel, a, lda, kc),
        4 => return pack_a_fixed::<4>(panel, a, lda, kc),
        _ => {}
    }
    let (src, dst) = (a.as_ptr(), panel.as_mut_ptr());
    let mut p = 0;
    // SAFETY: every read is at r·lda + p with r < rows and p < kc, every write below
    // rows·kc: both within the lengths asserted above.
    unsafe {
        while p + 8 <= kc {
            for r in 0..rows {
                let s = src.add(r * lda + p);
                let d = dst.add(p * rows + r);
                for q in 0..8 {
                    *d.add(q * rows) = *s.add(q);
                }
            }
            p += 8;
        }
        for p in p..kc {
            for r in 0..rows {
                *dst.add(p * rows + r) = *src.add(r * lda + p);
            }
        }
    }
}

/// [`pack_a`] for exactly `R` rows: `panel[p·R + r] = a[r·lda + p]`.
#[inline(always)]
fn pack_a_fixed<const R: usize>(panel: &mut [f32], a: &[f32], lda: usize, kc: usize) {
    let rows: [&[f32]; R] = core::array::from_fn(|r| &a[r * lda..r * lda + kc]);
    for (p, out) in panel[..R * kc].chunks_exact_mut(R).enumerate() {
        for (o, row) in out.iter_mut().zip(&rows) {
            *o = row[p];
        }
    }
}

/// Computes the C tiles of row panels `ip0..ip1` × column panels `jp0..jp1`, all of k.
unsafe fn block(
    ops: &Ops,
    p: Product,
    c: *mut f32,
    (ip0, ip1): (usize, usize),
    (jp0, jp1): (usize, usize),
    kcb: usize,
    scratch: &mut Vec<f32>,
) {
    let (a, lda, m, b, bias, ldc) = (p.a, p.lda, p.m, p.b, p.bias, p.ldc);
    let (k, n, mr, nr) = (b.k, b.n, ops.mr, ops.nr);
    let need = (ip1 - ip0) * mr * kcb;
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let cold_b = b.buf.format.bytes_of(b.k * b.n.div_ceil(nr) * nr) >= PREFETCH_MIN_BYTES;
    let bdata = BData {
        format: b.buf.format,
        ptr: b.buf.as_ptr(),
    };
    let fmt = b.buf.format;
    let quant = fmt.is_block().then_some(fmt);
    // The single-row four-panel kernel for this format: an element format's from the tier's
    // table; a ggml block type's direct kernel if the tier has one (affine blocks: none).
    let row4 = match fmt {
        WeightFormat::Quant(t) => ops
            .row4_quant
            .iter()
            .find(|(q, _)| *q == t)
            .map(|(_, kernel)| *kernel),
        WeightFormat::Affine(_) => None,
        _ => ops.row4.map(|table| table[fmt.index()]),
    };
    let mut stage_guard = match quant {
        Some(_) => STAGE.with(|cell| cell.take()),
        None => Vec::new(),
    };
    if quant.is_some() && stage_guard.len() < kcb * nr {
        stage_guard.resize(kcb * nr, 0.0);
    }
    // Staging for a partial last column panel's bias and tile, cleared once per call rather
    // than per tile: lanes past the panel's columns are computed and discarded, so their
    // stale contents never reach C.
    let mut bias_pad = [0.0f32; 64];
    let mut tmp = [0.0f32; MAX_TILE];
    let mut p0 = 0;
    loop {
        let kc = kcb.min(k - p0);
        let load = p0 > 0;
        let last = p0 + kc >= k;
        // Pack A rows of this row block, columns p0..p0+kc, into MR-row panels (rows past m
        // are zero: their results are computed and discarded).
        for ip in ip0..ip1 {
            // A short last panel is packed `rows` wide and runs the `rows`-row kernel.
            let rows = mr.min(m - ip * mr);
            let panel = &mut scratch[(ip - ip0) * mr * kc..][..rows * kc];
            pack_a(panel, &a[ip * mr * lda + p0..], lda, rows, kc);
        }
        // A single row (decode) takes four full panels per call where the tier has a kernel
        // for it: four times the independent FMA chains, the same k order per output.
        let single_row = ip1 - ip0 == 1 && m - ip0 * mr == 1;
        let mut jp = jp0;
        while jp < jp1 {
            let four = single_row && jp + 4 <= jp1 && (jp + 4) * nr <= n;
            if let (Some(r4), true) = (row4, four) {
                let j0 = jp * nr;
                let bias_ptr = match bias {
                    Some(bias) if last => bias[j0..j0 + 4 * nr].as_ptr(),
                    _ => std::ptr::null(),
                };
                // SAFETY: four full panels jp..jp+4 (checked above), one row of C at ip0; a
                // block format's kernel converts element offsets to bytes itself.
                unsafe {
                    let ct = c.add(ip0 * mr * ldc + j0);
                    let b = bdata.at(jp * k * nr + p0 * nr);
                    r4(Row4Call {
                        kc,
                        a: scratch.as_ptr(),
                        b,
                        bstride: k * nr,
                        c: ct,
                        load,
                        bias: bias_ptr,
                    })
                }
                jp += 4;
                continue;
            }
            let j0 = jp * nr;
            let cols = nr.min(n - j0);
            // In bounds: jp < panels, p0 < k (the buffer holds panels·k·nr values).
            let boff = jp * k * nr + p0 * nr;
            let bias_ptr = match bias {
                Some(bias) if last => {
                    if cols == nr {
                        bias[j0..].as_ptr()
                    } else {
                        bias_pad[..cols].copy_from_slice(&bias[j0..j0 + cols]);
                        bias_pad.as_ptr()
                    }
                }
                _ => std::ptr::null(),
            };
            // While this column panel's B is reused from cache by the row panels, fetch the
            // next panel's B slice from memory, a share before each call: the first row
            // panel would otherwise wait on DRAM for every B line (weights are cold in a
            // forward pass). Only for a B too large to stay cached between products, and
            // more than one row panel: otherwise there is nothing to overlap and the hints
            // only cost (3% on a 42-row model whose weights live in L2).
            let calls = ip1 - ip0;
            let next = (jp + 1 < jp1 && calls > 1 && cold_b)
                .then(|| bdata.byte_range((jp + 1) * k * nr + p0 * nr, kc * nr));
            // A block format's slice is dequantized once into f32 panel rows, which every
            // row panel then multiplies with the f32 kernel (same values, same k order).
            let (kdata, koff) = match quant {
                Some(t) => {
                    // SAFETY: the panel holds kc / block_len blocks from `boff`; the stage
                    // holds kcb·nr ≥ kc·nr floats.
                    unsafe {
                        let (src, dst) = (bdata.at(boff), stage_guard.as_mut_ptr());
                        let done = match (t.quant(), ops.dequant) {
                            (Some(q), Some(f)) => f(q, src, kc, dst),
                            _ => false,
                        };
                        if !done {
                            super::blocks::dequant_slice(t, nr, src, kc, dst)
                        }
                    };
                    let staged = BData {
                        format: WeightFormat::F32,
                        ptr: stage_guard.as_ptr().cast(),
                    };
                    (staged, 0)
                }
                None => (bdata, boff),
            };
            for ip in ip0..ip1 {
                if let Some((start, len)) = next {
                    let i = ip - ip0;
                    prefetch(start, len * i / calls, len * (i + 1) / calls);
                }
                let i0 = ip * mr;
                let rows = mr.min(m - i0);
                let apanel = scratch[(ip - ip0) * mr * kc..].as_ptr();
                unsafe {
                    let ct = c.add(i0 * ldc + j0);
                    let call = TileCall {
                        kc,
                        a: apanel,
                        b: std::ptr::null(),
                        c: ct,
                        ldc,
                        load,
                        bias: bias_ptr,
                    };
                    if cols == nr {
                        kdata.call(ops, rows, koff, call);
                    } else {
                        // Edge tile: same kernel on a staged copy, so the same op sequence.
                        if load {
                            for r in 0..rows {
                                for j in 0..cols {
                                    tmp[r * nr + j] = *ct.add(r * ldc + j);
                                }
                            }
                        }
                        let t = tmp.as_mut_ptr();
                        let call = TileCall {
                            c: t,
                            ldc: nr,
                            ..call
                        };
                        kdata.call(ops, rows, koff, call);
                        for r in 0..rows {
                            for j in 0..cols {
                                *ct.add(r * ldc + j) = tmp[r * nr + j];
                            }
                        }
                    }
                }
            }
            jp += 1;
        }
        p0 += kc;
        if last {
            break;
        }
    }
    if quant.is_some() {
        STAGE.with(|cell| cell.replace(stage_guard));
    }
}

/// One row × four adjacent full panels (4·NR columns): the [`TileCall`] contract with one
/// A row (`a`: kc floats), panel `q`'s k-slice at `b + q·bstride` (`bstride` in elements),
/// C one row of 4·NR outputs and `bias` (if non-null) 4·NR values.
// Only the x86-64 tiers have row4 kernels that read the fields.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[derive(Clone, Copy)]
pub(crate) struct Row4Call {
    pub kc: usize,
    pub a: *const f32,
    pub b: *const u8,
    pub bstride: usize,
    pub c: *mut f32,
    pub load: bool,
    pub bias: *const f32,
}

/// A tier's one-row, four-panel kernel for [`Row4Call`] (safety as [`MicroKernel`]).
pub(crate) type Row4Kernel = unsafe fn(Row4Call);

/// The packed B data of one product: its format and first stored element.
#[derive(Clone, Copy)]
struct BData {
    format: WeightFormat,
    ptr: *const u8,
}

/// Hints the cache lines of `start + lo .. start + hi` (bytes) into the cache. Only a hint:
/// a no-op where the architecture has none here.
#[inline(always)]
fn prefetch(start: *const u8, lo: usize, hi: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut off = lo - lo % 64;
        while off < hi {
            // SAFETY: prefetch never faults, and the addresses lie inside the B buffer.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    start.add(off) as *const i8,
                );
            }
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, lo, hi);
}

impl BData {
    /// The stored element at element offset `off`.
    fn at(self, off: usize) -> *const u8 {
        // SAFETY: `off` is an element offset inside the panel buffer (callers pass panel
        // starts and k offsets of existing panels).
        unsafe { self.ptr.add(self.format.bytes_of(off)) }
    }

    /// The bytes of `len` elements at element offset `off`.
    fn byte_range(self, off: usize, len: usize) -> (*const u8, usize) {
        (self.at(off), self.format.bytes_of(len))
    }

    /// Runs the tier's `rows`-row micro-kernel for this format on the panel at `off` (the
    /// call's `b` is this panel).
    ///
    /// # Safety
    /// As [`MicroKernel`], for the panel at `off`.
    #[inline(always)]
    unsafe fn call(self, ops: &Ops, rows: usize, off: usize, call: TileCall) {
        let call = TileCall {
            b: self.at(off),
            ..call
        };
        unsafe { ops.kernels[self.format.index()][rows - 1](call) }
    }
}
