//! 64-byte-aligned zeroed buffers for packed panels and scratch (large ones as populated
//! anonymous maps), shared by the GEMM driver and the block-quantized packing.

/// A zeroed buffer whose data starts on a 64-byte boundary, so B panel loads never split
/// cache lines (glibc malloc only guarantees 16 bytes). `T` is a plain number type (f32, u16)
/// whose all-zero bytes are its default.
///
/// A large buffer (≥ [`MAP_BYTES`]) is an anonymous map faulted in by one `MAP_POPULATE`
/// call instead of one page fault per 4 KiB on first write: a model's weight panels are
/// most of its load, and in a VM each fault costs microseconds (measured: inmotion ts_jepa's
/// 8.6 MB load took 2,240 faults). Maps are page-aligned, so their offset is 0.
pub(crate) struct AlignedBuf<T = f32> {
    mem: Mem<T>,
    off: usize,
    len: usize,
}

enum Mem<T> {
    Heap(Vec<T>),
    Map(memmap2::MmapMut),
}

/// Buffers at least this large are anonymous maps (see [`AlignedBuf`]).
const MAP_BYTES: usize = 1 << 18;

impl<T: Copy + Default> AlignedBuf<T> {
    pub(crate) fn zeroed(len: usize) -> Self {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("AlignedBuf: size overflows usize");
        if bytes >= MAP_BYTES {
            if let Ok(m) = memmap2::MmapOptions::new().len(bytes).populate().map_anon() {
                return AlignedBuf {
                    mem: Mem::Map(m),
                    off: 0,
                    len,
                };
            }
        }
        let pad = 64 / std::mem::size_of::<T>();
        let v = vec![T::default(); len + pad];
        let off = v.as_ptr().align_offset(64).min(pad);
        AlignedBuf {
            mem: Mem::Heap(v),
            off,
            len,
        }
    }
    /// Elements the allocation holds from `off`.
    fn capacity(&self) -> usize {
        match &self.mem {
            Mem::Heap(v) => v.len() - self.off,
            Mem::Map(m) => m.len() / std::mem::size_of::<T>(),
        }
    }
    /// Resizes to `len` elements without clearing a reused allocation (its stale values are
    /// valid `T`s): for callers that write every element.
    pub(crate) fn reuse(&mut self, len: usize) {
        if self.capacity() >= len {
            self.len = len;
        } else {
            *self = AlignedBuf::zeroed(len);
        }
    }
    /// Resizes to `len` zeroed elements, reusing the allocation when it is large enough (the
    /// offset stays valid: it depends only on the allocation's start, which does not move).
    pub(crate) fn reset(&mut self, len: usize) {
        if self.capacity() >= len {
            self.len = len;
            self.as_mut_slice().fill(T::default());
        } else {
            *self = AlignedBuf::zeroed(len);
        }
    }
    pub(crate) fn as_slice(&self) -> &[T] {
        match &self.mem {
            Mem::Heap(v) => &v[self.off..self.off + self.len],
            // SAFETY: the map holds at least `len` elements (`capacity`), is page-aligned
            // (aligned for any T), zero-initialized (a valid T) and lives as long as `self`.
            Mem::Map(m) => unsafe { std::slice::from_raw_parts(m.as_ptr().cast::<T>(), self.len) },
        }
    }
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.mem {
            Mem::Heap(v) => &mut v[self.off..self.off + self.len],
            // SAFETY: as in `as_slice`, and `&mut self` makes the borrow unique.
            Mem::Map(m) => unsafe {
                std::slice::from_raw_parts_mut(m.as_mut_ptr().cast::<T>(), self.len)
            },
        }
    }
}

impl<T: Copy + Default> Clone for AlignedBuf<T> {
    fn clone(&self) -> Self {
        // Vec::clone would lose the alignment; copy into a freshly aligned buffer.
        let mut out = AlignedBuf::zeroed(self.len);
        out.as_mut_slice().copy_from_slice(self.as_slice());
        out
    }
}

impl<T> std::fmt::Debug for AlignedBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AlignedBuf({} x {})",
            self.len,
            std::any::type_name::<T>()
        )
    }
}
