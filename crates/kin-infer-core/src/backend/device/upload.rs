//! Weights onto the device: f32 rows as words, 16-bit rows two to a word, ggml blocks as
//! their bytes where the kernels read the format, else dequantized at load.

use super::{words, Device, DeviceBuf, GpuBackend};
use crate::backend::{by_format, DeviceMatrix, Inner};
use crate::error::{InferError, Result};
use crate::kernels::{StoredRows, WeightFormat};

/// One column group of a prepared matrix: `n` rows of `k` on the device, torch's layout, in
/// f32 (`fmt` 0) or kept in the stored format the kernels read (`wgsl.rs`'s `wq`: bf16, f16
/// and every ggml block type but Q2_K/Q3_K), `row_bytes` apart.
pub struct DeviceMatrixPart {
    pub(in crate::backend) buf: DeviceBuf,
    pub(in crate::backend) n: usize,
    pub(in crate::backend) fmt: u32,
    pub(in crate::backend) row_bytes: usize,
}

impl DeviceMatrixPart {
    /// Bytes on the device.
    pub(in crate::backend) fn bytes(&self) -> usize {
        self.n * self.row_bytes
    }
}

/// Bytes as little-endian words, the last one zero-padded.
fn byte_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect()
}

impl<D: Device> GpuBackend<D> {
    /// `parts` (column groups, in order) as one matrix of rows of `k`.
    pub(super) fn prepare(&self, parts: &[StoredRows], k: usize) -> Result<DeviceMatrix> {
        by_format(parts, |run| match run[0] {
            StoredRows::F32(_) => {
                let wide: Vec<_> = run.iter().map(StoredRows::to_f32).collect();
                Ok(self.matrix(&wide.concat(), k))
            }
            StoredRows::Half(format, _) => Ok(self.half_matrix(run, k, format)),
            StoredRows::Blocks(format, _) => self.block_matrix(run, k, format),
        })
    }

    pub(super) fn matrix(&self, data: &[f32], k: usize) -> DeviceMatrix {
        let n = data.len().checked_div(k).unwrap_or(0);
        self.stored(words(data), n, k, 0, k * 4)
    }

    /// A matrix of `n` rows of `row_bytes` in format `fmt` from their words.
    fn stored(&self, w: &[u32], n: usize, k: usize, fmt: u32, row_bytes: usize) -> DeviceMatrix {
        let buf = D::wrap(self.dev.upload(w));
        DeviceMatrix {
            n,
            k,
            inner: Inner::Device(vec![DeviceMatrixPart {
                buf,
                n,
                fmt,
                row_bytes,
            }]),
        }
    }

    /// 16-bit rows kept as their patterns, two to a word; the kernels widen them (exactly).
    fn half_matrix(&self, run: &[StoredRows], k: usize, format: WeightFormat) -> DeviceMatrix {
        let halves: Vec<u16> = run
            .iter()
            .flat_map(|p| match p {
                StoredRows::Half(_, bits) => *bits,
                _ => &[],
            })
            .copied()
            .collect();
        let n = halves.len().checked_div(k).unwrap_or(0);
        let w: Vec<u32> = halves
            .chunks(2)
            .map(|c| c[0] as u32 | (c.get(1).copied().unwrap_or(0) as u32) << 16)
            .collect();
        let code = format.gpu_code().expect("a half format");
        self.stored(&w, n, k, code, k * 2)
    }

    /// Block rows kept in ggml's blocks where the kernels read the format, else
    /// dequantized by the scalar reference at load (the values the CPU's quantized kernels
    /// multiply by).
    fn block_matrix(
        &self,
        run: &[StoredRows],
        k: usize,
        format: WeightFormat,
    ) -> Result<DeviceMatrix> {
        let (bl, bb) = (format.block_len(), format.block_bytes());
        if k == 0 || !k.is_multiple_of(bl) {
            return Err(InferError::Unsupported(format!(
                "a {} weight matrix with rows of {k} values (block-quantized rows must be whole blocks of {bl})",
                format.name()
            )));
        }
        let bytes: Vec<u8> = run
            .iter()
            .flat_map(|p| match p {
                StoredRows::Blocks(_, b) => *b,
                _ => &[],
            })
            .copied()
            .collect();
        let row_bytes = k / bl * bb;
        if !bytes.len().is_multiple_of(row_bytes) {
            return Err(InferError::Unsupported(format!(
                "a {} weight of {} bytes is not whole rows of {row_bytes} bytes",
                format.name(),
                bytes.len(),
            )));
        }
        if let Some(code) = format.gpu_code() {
            let n = bytes.len() / row_bytes;
            return Ok(self.stored(&byte_words(&bytes), n, k, code, row_bytes));
        }
        let mut wide = vec![0.0f32; bytes.len() / bb * bl];
        format.dequantize(&bytes, &mut wide);
        Ok(self.matrix(&wide, k))
    }
}
