//! Exact matrix products with quantized weights: activations stay in f32 and the weights are
//! dequantized on the fly, row by row.
//!
//! candle's quantized kernels quantize the activations to 8 bits first. With the massive
//! activations of small LLMs (|x| ≈ 10⁴ in a few channels) that moves lens entropies by up to
//! 0.6 nats; dequantizing the weights instead gives the f32 model's numbers exactly (up to
//! summation order) while the weights stay quantized in memory.

use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8K, BlockQ8_0, BlockQ8_1, GgmlType,
};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Storage, Tensor};
use rayon::prelude::*;

/// Weight rows per parallel task.
const ROWS_PER_TASK: usize = 16;
/// Dequantize the whole weight and use a dense GEMM when it has at most this many bytes in f32
/// and at least [`DENSE_MIN_ROWS`] activation rows share it.
const DENSE_MAX_BYTES: usize = 64 << 20;
const DENSE_MIN_ROWS: usize = 32;

/// `x Wᵀ` for a quantized `W` ([n, k]) and `x` ([.., k]) → [.., n], exact in f32.
pub fn forward(w: &QTensor, x: &Tensor) -> candle_core::Result<Tensor> {
    let (n, k) = w.shape().dims2()?;
    let dims = x.dims().to_vec();
    let Some((&kx, lead)) = dims.split_last() else {
        candle_core::bail!("quantized matmul needs an input with at least one dimension")
    };
    if kx != k {
        candle_core::bail!("quantized matmul: input has {kx} features, weight expects {k}")
    }
    let m: usize = lead.iter().product();
    let mut out_dims = lead.to_vec();
    out_dims.push(n);
    let in_dtype = x.dtype();
    let x2 = x.to_dtype(DType::F32)?.reshape((m, k))?.contiguous()?;

    let dense =
        !matches!(x.device(), Device::Cpu) || (m >= DENSE_MIN_ROWS && n * k * 4 <= DENSE_MAX_BYTES);
    let y = if dense {
        let wd = w.dequantize(x.device())?;
        x2.matmul(&wd.t()?)?
    } else {
        let data = w.data()?;
        let (storage, layout) = x2.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            candle_core::bail!("expected a CPU tensor")
        };
        let xs = &cpu.as_slice::<f32>()?[layout.start_offset()..layout.start_offset() + m * k];
        let out = match fused(w.dtype(), &data, n, k, xs, m) {
            Some(out) => out,
            None => {
                drop(storage);
                let wd = w.dequantize(&Device::Cpu)?;
                return x2.matmul(&wd.t()?)?.reshape(out_dims)?.to_dtype(in_dtype);
            }
        };
        Tensor::from_vec(out, (m, n), &Device::Cpu)?
    };
    y.reshape(out_dims)?.to_dtype(in_dtype)
}

fn fused(
    dtype: GgmlDType,
    data: &[u8],
    n: usize,
    k: usize,
    xs: &[f32],
    m: usize,
) -> Option<Vec<f32>> {
    macro_rules! go {
        ($t:ty) => {
            rows_times::<$t>(data, n, k, xs, m)
        };
    }
    match dtype {
        GgmlDType::Q4_0 => go!(BlockQ4_0),
        GgmlDType::Q4_1 => go!(BlockQ4_1),
        GgmlDType::Q5_0 => go!(BlockQ5_0),
        GgmlDType::Q5_1 => go!(BlockQ5_1),
        GgmlDType::Q8_0 => go!(BlockQ8_0),
        GgmlDType::Q8_1 => go!(BlockQ8_1),
        GgmlDType::Q2K => go!(BlockQ2K),
        GgmlDType::Q3K => go!(BlockQ3K),
        GgmlDType::Q4K => go!(BlockQ4K),
        GgmlDType::Q5K => go!(BlockQ5K),
        GgmlDType::Q6K => go!(BlockQ6K),
        GgmlDType::Q8K => go!(BlockQ8K),
        _ => None,
    }
}

/// The block slice behind a quantized tensor's bytes, when size and alignment allow.
fn blocks<T: GgmlType>(data: &[u8]) -> Option<&[T]> {
    let size = std::mem::size_of::<T>();
    if size == 0
        || data.len() % size != 0
        || (data.as_ptr() as usize) % std::mem::align_of::<T>() != 0
    {
        return None;
    }
    // SAFETY: the bytes are the storage of a `Vec<T>` of plain-old-data blocks (checked size
    // and alignment above), borrowed for the lifetime of `data`.
    Some(unsafe { std::slice::from_raw_parts(data.as_ptr() as *const T, data.len() / size) })
}

/// `out[i, j] = x_i · dequant(w_j)`, weight rows in parallel.
fn rows_times<T: GgmlType>(
    data: &[u8],
    n: usize,
    k: usize,
    xs: &[f32],
    m: usize,
) -> Option<Vec<f32>> {
    if k % T::BLCK_SIZE != 0 {
        return None;
    }
    let per_row = k / T::BLCK_SIZE;
    let w: &[T] = blocks(data)?;
    if w.len() != n * per_row {
        return None;
    }
    // Results as [n, m], transposed at the end when m > 1.
    let mut t = vec![0f32; n * m];
    t.par_chunks_mut(ROWS_PER_TASK * m)
        .enumerate()
        .for_each_init(
            || vec![0f32; k],
            |buf, (task, out)| {
                let j0 = task * ROWS_PER_TASK;
                for (r, out_row) in out.chunks_mut(m).enumerate() {
                    let j = j0 + r;
                    T::to_float(&w[j * per_row..(j + 1) * per_row], buf);
                    dot_rows(buf, xs, out_row);
                }
            },
        );
    if m == 1 {
        return Some(t);
    }
    let mut out = vec![0f32; m * n];
    for j in 0..n {
        for i in 0..m {
            out[i * n + j] = t[j * m + i];
        }
    }
    Some(out)
}

/// `out[i] = w · x_i` for every row `x_i` of `xs`.
fn dot_rows(w: &[f32], xs: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { dot_rows_avx2(w, xs, out) };
        }
    }
    dot_rows_generic(w, xs, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_rows_avx2(w: &[f32], xs: &[f32], out: &mut [f32]) {
    dot_rows_generic(w, xs, out)
}

#[inline(always)]
fn dot_rows_generic(w: &[f32], xs: &[f32], out: &mut [f32]) {
    let k = w.len();
    for (o, x) in out.iter_mut().zip(xs.chunks_exact(k)) {
        *o = dot(w, x);
    }
}

#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const L: usize = 16;
    let mut acc = [0f32; L];
    let (ac, ar) = a.split_at(a.len() / L * L);
    let (bc, br) = b.split_at(ac.len());
    for (ca, cb) in ac.chunks_exact(L).zip(bc.chunks_exact(L)) {
        for l in 0..L {
            acc[l] += ca[l] * cb[l];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ar.iter().zip(br) {
        s += x * y;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pseudo(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 8) as f32 / (1 << 24) as f32 - 0.5
            })
            .collect()
    }

    #[test]
    fn fused_product_equals_dequantized_product() {
        for dtype in [
            GgmlDType::Q4_1,
            GgmlDType::Q5_0,
            GgmlDType::Q8_0,
            GgmlDType::Q4K,
            GgmlDType::Q6K,
        ] {
            let (n, k) = (48, 512);
            let w = Tensor::from_vec(pseudo(n * k, 7), (n, k), &Device::Cpu).unwrap();
            let q = QTensor::quantize(&w, dtype).unwrap();
            let wd = q.dequantize(&Device::Cpu).unwrap();
            for m in [1, 3, 40] {
                let mut x = pseudo(m * k, 11 + m as u32);
                x[5] = 3.0e4; // a massive activation, as in real residual streams
                let x = Tensor::from_vec(x, (m, k), &Device::Cpu).unwrap();
                let ours = forward(&q, &x).unwrap();
                let reference = x.matmul(&wd.t().unwrap()).unwrap();
                let diff = (ours - &reference)
                    .unwrap()
                    .abs()
                    .unwrap()
                    .max_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                let scale = reference
                    .abs()
                    .unwrap()
                    .max_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                assert!(
                    diff <= 1e-5 * scale,
                    "{dtype:?} m={m}: {diff} vs scale {scale}"
                );
            }
        }
    }
}
