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

use super::gemv::SendPtr;

/// How many weight rows ahead the row-dot kernels prefetch (each decoded block asks for its
/// counterpart that many rows on; a task's rows follow one another in memory): rows of a few
/// cache lines are too short for the hardware prefetcher to reach memory speed on its own (as in
/// `gemv::wide`). On the 2-core Xeon 2 to 8 rows all took 23-47 %
/// off batch 1's quantized products with AVX-512, and 4 rows about 20 % with the AVX2 kernel
/// (docs/benchmarks.md); 4 sits in the middle.
const PREFETCH_ROWS: usize = 4;
/// Weight rows per parallel task in the row-dot path.
const ROWS_PER_TASK: usize = 16;
/// Activation rows up to which each weight row is decoded and dotted directly; above, weight rows
/// are dequantized in tiles and multiplied with a GEMM micro-kernel.
const ROW_DOT_MAX_M: usize = 4;
/// f32 elements of a dequantized weight tile (fits in L2).
const TILE_ELEMS: usize = 32 * 1024;

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

    if !matches!(x.device(), Device::Cpu) {
        // On an accelerator, dequantizing the whole matrix is cheap next to the product.
        let wd = w.dequantize(x.device())?;
        return x2.matmul(&wd.t()?)?.reshape(out_dims)?.to_dtype(in_dtype);
    }
    let data = w.data()?;
    let out = {
        let (storage, layout) = x2.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            candle_core::bail!("expected a CPU tensor")
        };
        let xs = &cpu.as_slice::<f32>()?[layout.start_offset()..layout.start_offset() + m * k];
        cpu_product(w.dtype(), &data, n, k, xs, m)
    };
    let y = match out {
        Some(out) => Tensor::from_vec(out, (m, n), &Device::Cpu)?,
        None => x2.matmul(&w.dequantize(&Device::Cpu)?.t()?)?,
    };
    y.reshape(out_dims)?.to_dtype(in_dtype)
}

fn cpu_product(
    dtype: GgmlDType,
    data: &[u8],
    n: usize,
    k: usize,
    xs: &[f32],
    m: usize,
) -> Option<Vec<f32>> {
    if m <= ROW_DOT_MAX_M {
        // Byte-level decoders for the common types; candle's `to_float` for the others.
        match dtype {
            GgmlDType::Q4_1 => return row_dot::<Q4_1>(data, n, k, xs, m),
            GgmlDType::Q5_0 => return row_dot::<Q5_0>(data, n, k, xs, m),
            GgmlDType::Q8_0 => return row_dot::<Q8_0>(data, n, k, xs, m),
            _ => {}
        }
    }
    macro_rules! go {
        ($t:ty) => {
            if m <= ROW_DOT_MAX_M {
                row_dot::<ToFloat<$t>>(data, n, k, xs, m)
            } else {
                tiled::<$t>(data, n, k, xs, m)
            }
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
        || !data.len().is_multiple_of(size)
        || !(data.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        return None;
    }
    // SAFETY: the bytes are the storage of a `Vec<T>` of plain-old-data blocks (checked size
    // and alignment above), borrowed for the lifetime of `data`.
    Some(unsafe { std::slice::from_raw_parts(data.as_ptr() as *const T, data.len() / size) })
}

/// Decodes one block of a quantization format into f32 values, exactly as dequantization does.
trait Decode {
    /// Values per block.
    const ELEMS: usize;
    /// Bytes per block.
    const BYTES: usize;
    /// The AVX-512 decoder of this format, if it has one.
    const WIDE: Option<WideKind> = None;
    fn decode(block: &[u8], out: &mut [f32]);
}

fn f16_at(b: &[u8], i: usize) -> f32 {
    half::f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// GGUF Q8_0: f16 scale, 32 × i8.
struct Q8_0;
impl Decode for Q8_0 {
    const ELEMS: usize = 32;
    const BYTES: usize = 34;
    const WIDE: Option<WideKind> = Some(WideKind::Q8_0);
    #[inline(always)]
    fn decode(b: &[u8], out: &mut [f32]) {
        let d = f16_at(b, 0);
        for (o, &q) in out[..32].iter_mut().zip(&b[2..34]) {
            *o = (q as i8) as f32 * d;
        }
    }
}

/// GGUF Q4_1: f16 scale, f16 minimum, 16 bytes of nibbles (low nibbles first half).
struct Q4_1;
impl Decode for Q4_1 {
    const ELEMS: usize = 32;
    const BYTES: usize = 20;
    const WIDE: Option<WideKind> = Some(WideKind::Q4_1);
    #[inline(always)]
    fn decode(b: &[u8], out: &mut [f32]) {
        let d = f16_at(b, 0);
        let m = f16_at(b, 2);
        let qs = &b[4..20];
        let (lo, hi) = out[..32].split_at_mut(16);
        for j in 0..16 {
            lo[j] = (qs[j] & 0x0F) as f32 * d + m;
            hi[j] = (qs[j] >> 4) as f32 * d + m;
        }
    }
}

/// GGUF Q5_0: f16 scale, 32 high bits, 16 bytes of nibbles; values are 5-bit minus 16.
struct Q5_0;
impl Decode for Q5_0 {
    const ELEMS: usize = 32;
    const BYTES: usize = 22;
    const WIDE: Option<WideKind> = Some(WideKind::Q5_0);
    #[inline(always)]
    fn decode(b: &[u8], out: &mut [f32]) {
        let d = f16_at(b, 0);
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        let qs = &b[6..22];
        let (lo, hi) = out[..32].split_at_mut(16);
        for j in 0..16 {
            let h0 = (((qh >> j) << 4) & 0x10) as u8;
            let h1 = ((qh >> (j + 12)) & 0x10) as u8;
            lo[j] = (((qs[j] & 0x0F) | h0) as i32 - 16) as f32 * d;
            hi[j] = (((qs[j] >> 4) | h1) as i32 - 16) as f32 * d;
        }
    }
}

/// Any candle block type, through its `to_float`.
struct ToFloat<T>(std::marker::PhantomData<T>);
impl<T: GgmlType> Decode for ToFloat<T> {
    const ELEMS: usize = T::BLCK_SIZE;
    const BYTES: usize = std::mem::size_of::<T>();
    #[inline(always)]
    fn decode(b: &[u8], out: &mut [f32]) {
        if let Some(blk) = blocks::<T>(b) {
            T::to_float(blk, &mut out[..T::BLCK_SIZE]);
        }
    }
}

/// `out[i, j] = x_i · dequant(w_j)` for few activation rows: each weight block is decoded once
/// and dotted with every row; weight rows in parallel.
fn row_dot<D: Decode>(data: &[u8], n: usize, k: usize, xs: &[f32], m: usize) -> Option<Vec<f32>> {
    row_dot_with::<D>(data, n, k, xs, m, true)
}

/// [`row_dot`]; `allow_wide` false keeps to the portable decoders (the tests compare both).
fn row_dot_with<D: Decode>(
    data: &[u8],
    n: usize,
    k: usize,
    xs: &[f32],
    m: usize,
    allow_wide: bool,
) -> Option<Vec<f32>> {
    if !k.is_multiple_of(D::ELEMS) || data.len() != n * (k / D::ELEMS) * D::BYTES {
        return None;
    }
    // The kernels read m rows of k from `xs` and keep up to ROW_DOT_MAX_M accumulators.
    if m == 0 || m > ROW_DOT_MAX_M || xs.len() != m * k {
        return None;
    }
    let row_bytes = (k / D::ELEMS) * D::BYTES;
    // Candle's block types (read through `ToFloat`) hold f16 fields: 2-byte alignment.
    if !(data.as_ptr() as usize).is_multiple_of(2) {
        return None;
    }
    Some(super::gemv::by_weight_rows(
        n,
        m,
        ROWS_PER_TASK,
        |j, out| {
            let w = &data[j * row_bytes..(j + 1) * row_bytes];
            row_dot_one::<D>(w, xs, k, out, allow_wide)
        },
    ))
}

fn row_dot_one<D: Decode>(w: &[u8], xs: &[f32], k: usize, out: &mut [f32], allow_wide: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if let (Some(kind), true) = (D::WIDE, allow_wide && wide::available()) {
            // SAFETY: the CPU has the features; w holds k / 32 whole blocks of the format and
            // xs out.len() rows of k (checked by `row_dot_with`).
            return unsafe { wide::row(kind, w, xs, k, out) };
        }
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { row_dot_one_avx2::<D>(w, xs, k, out) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = allow_wide;
    row_dot_one_generic::<D>(w, xs, k, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn row_dot_one_avx2<D: Decode>(w: &[u8], xs: &[f32], k: usize, out: &mut [f32]) {
    row_dot_one_generic::<D>(w, xs, k, out)
}

#[inline(always)]
fn row_dot_one_generic<D: Decode>(w: &[u8], xs: &[f32], k: usize, out: &mut [f32]) {
    const L: usize = 16;
    let mut vals = [0f32; 256];
    let mut acc = [[0f32; L]; ROW_DOT_MAX_M];
    let m = out.len();
    let ahead = PREFETCH_ROWS * w.len();
    for (b, blk) in w.chunks_exact(D::BYTES).enumerate() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults; past the matrix the address leaves the slice
        // (`wrapping_add`, no in-bounds promise).
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(w.as_ptr().wrapping_add(ahead + b * D::BYTES).cast());
        }
        let vals = &mut vals[..D::ELEMS];
        D::decode(blk, vals);
        let base = b * D::ELEMS;
        for (r, acc) in acc.iter_mut().enumerate().take(m) {
            let x = &xs[r * k + base..r * k + base + D::ELEMS];
            for (cv, cx) in vals.chunks_exact(L).zip(x.chunks_exact(L)) {
                for l in 0..L {
                    acc[l] += cv[l] * cx[l];
                }
            }
        }
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = a.iter().sum();
    }
}

/// A format with an AVX-512 decoder (`wide`).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum WideKind {
    Q4_1,
    Q8_0,
    Q5_0,
}

/// AVX-512 row products for the formats of the offline models (Q4_1: SmolLM2's blocks; Q8_0 and
/// Q5_0: most of Gemma-3's, whose 640 columns rule out the k-quants' 256-value blocks): 16 weights
/// per vector, each dequantized as `to_float` does (`q·d + m`, rounded after the product and after
/// the sum), then multiplied with up to [`ROW_DOT_MAX_M`] activation rows.
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use super::WideKind as Kind;

    pub(super) fn available() -> bool {
        super::super::gemv::wide::available() && std::arch::is_x86_feature_detected!("f16c")
    }

    /// `out[r] = xs[r] · dequant(w)` for one weight row and 1 to [`super::ROW_DOT_MAX_M`]
    /// activation rows.
    ///
    /// # Safety
    /// [`available`] returned true, `w` holds k / 32 whole blocks of `kind` and `xs` out.len()
    /// rows of k.
    pub(super) unsafe fn row(kind: Kind, w: &[u8], xs: &[f32], k: usize, out: &mut [f32]) {
        macro_rules! rows {
            ($f:expr) => {
                match out.len() {
                    1 => row_m::<1, { $f }>(w, xs, k, out),
                    2 => row_m::<2, { $f }>(w, xs, k, out),
                    3 => row_m::<3, { $f }>(w, xs, k, out),
                    _ => row_m::<4, { $f }>(w, xs, k, out),
                }
            };
        }
        // SAFETY: as the caller promised.
        unsafe {
            match kind {
                Kind::Q4_1 => rows!(Q4_1),
                Kind::Q8_0 => rows!(Q8_0),
                Kind::Q5_0 => rows!(Q5_0),
            }
        }
    }

    // The formats, as const generic parameters.
    const Q4_1: u8 = 0;
    const Q8_0: u8 = 1;
    const Q5_0: u8 = 2;

    /// Block `b` of a row of format `F` as two vectors of 16 weights.
    #[inline(always)]
    unsafe fn decode<const F: u8>(w: *const u8, b: usize) -> (__m512, __m512) {
        match F {
            Q4_1 => {
                let p = w.add(b * 20);
                // d and m: two f16 at the start of the block.
                let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(p.cast::<i32>().read_unaligned()));
                let d = _mm512_broadcastss_ps(dm);
                let mn = _mm512_broadcastss_ps(_mm_shuffle_ps::<1>(dm, dm));
                let nibble = _mm_set1_epi8(0x0F);
                let qs = _mm_loadu_si128(p.add(4).cast());
                let q_lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(qs, nibble)));
                let q_hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(
                    _mm_srli_epi16::<4>(qs),
                    nibble,
                )));
                (
                    _mm512_add_ps(_mm512_mul_ps(q_lo, d), mn),
                    _mm512_add_ps(_mm512_mul_ps(q_hi, d), mn),
                )
            }
            Q5_0 => {
                // f16 d, 32 high bits (bit j belongs to value j), 16 bytes of low nibbles.
                let p = w.add(b * 22);
                let d = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(
                    p.cast::<u16>().read_unaligned(),
                )));
                let d = _mm512_broadcastss_ps(d);
                let qh = p.add(2).cast::<u32>().read_unaligned();
                let nibble = _mm_set1_epi8(0x0F);
                let qs = _mm_loadu_si128(p.add(6).cast());
                let q_lo = q5_0_half(_mm_and_si128(qs, nibble), qh as u16);
                let q_hi = q5_0_half(
                    _mm_and_si128(_mm_srli_epi16::<4>(qs), nibble),
                    (qh >> 16) as u16,
                );
                (_mm512_mul_ps(q_lo, d), _mm512_mul_ps(q_hi, d))
            }
            Q8_0 => {
                let p = w.add(b * 34);
                let d = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(
                    p.cast::<u16>().read_unaligned(),
                )));
                let d = _mm512_broadcastss_ps(d);
                let q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(2).cast())));
                let q1 =
                    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(18).cast())));
                (_mm512_mul_ps(q0, d), _mm512_mul_ps(q1, d))
            }
            _ => unreachable!("no such format"),
        }
    }

    /// 16 Q5_0 values as f32 before scaling: the low nibbles `low` with bit 4 set where `high`
    /// has a bit, minus 16.
    #[inline(always)]
    unsafe fn q5_0_half(low: __m128i, high: u16) -> __m512 {
        let q = _mm512_cvtepu8_epi32(low);
        let q = _mm512_mask_or_epi32(q, high, q, _mm512_set1_epi32(0x10));
        _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(16)))
    }

    /// One weight row (k / 32 blocks of format `F`) against M activation rows.
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,f16c")]
    #[allow(clippy::needless_range_loop)] // constant bounds: unrolled into registers
    unsafe fn row_m<const M: usize, const F: u8>(w: &[u8], xs: &[f32], k: usize, out: &mut [f32]) {
        let mut acc = [_mm512_setzero_ps(); 2 * super::ROW_DOT_MAX_M];
        let block_bytes = w.len() / (k / 32).max(1);
        let ahead = super::PREFETCH_ROWS * w.len();
        for b in 0..k / 32 {
            // See `PREFETCH_ROWS`. Past the matrix the address leaves the slice (`wrapping_add`,
            // no in-bounds promise); a prefetch never faults.
            _mm_prefetch::<_MM_HINT_T0>(w.as_ptr().wrapping_add(ahead + b * block_bytes).cast());
            let (lo, hi) = decode::<F>(w.as_ptr(), b);
            for r in 0..M {
                let x = xs.as_ptr().add(r * k + b * 32);
                acc[2 * r] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x), acc[2 * r]);
                acc[2 * r + 1] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x.add(16)), acc[2 * r + 1]);
            }
        }
        for r in 0..M {
            out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[2 * r], acc[2 * r + 1]));
        }
    }

    /// Dequantizes whole blocks (`out.len()` / 32 of them) into `out`, as `to_float` does.
    ///
    /// # Safety
    /// [`available`] returned true and `w` holds at least `out.len() / 32` blocks.
    pub(super) unsafe fn dequantize(kind: Kind, w: &[u8], out: &mut [f32]) {
        // SAFETY: as the caller promised.
        unsafe {
            match kind {
                Kind::Q4_1 => dequantize_blocks::<Q4_1>(w, out),
                Kind::Q8_0 => dequantize_blocks::<Q8_0>(w, out),
                Kind::Q5_0 => dequantize_blocks::<Q5_0>(w, out),
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,f16c")]
    unsafe fn dequantize_blocks<const F: u8>(w: &[u8], out: &mut [f32]) {
        for b in 0..out.len() / 32 {
            let (lo, hi) = decode::<F>(w.as_ptr(), b);
            _mm512_storeu_ps(out.as_mut_ptr().add(b * 32), lo);
            _mm512_storeu_ps(out.as_mut_ptr().add(b * 32 + 16), hi);
        }
    }
}

/// `out = x Wᵀ` for many activation rows: tiles of weight rows are dequantized into L2-sized
/// buffers and multiplied with the few-row kernel (up to [`super::gemv::max_rows`] rows, with
/// AVX-512) or `gemm`'s micro-kernels; tiles in parallel.
fn tiled<T: GgmlType>(data: &[u8], n: usize, k: usize, xs: &[f32], m: usize) -> Option<Vec<f32>> {
    if !k.is_multiple_of(T::BLCK_SIZE) {
        return None;
    }
    let per_row = k / T::BLCK_SIZE;
    let w: &[T] = blocks(data)?;
    if w.len() != n * per_row {
        return None;
    }
    let tile = (TILE_ELEMS / k).clamp(8, 256);
    // For a few dozen rows the few-row kernel beats gemm's packing (see `gemv`).
    let few_rows = super::gemv::wide::available() && m <= super::gemv::max_rows();
    #[cfg(target_arch = "x86_64")]
    let fast_decode = match (T::DTYPE, std::mem::size_of::<T>()) {
        (GgmlDType::Q4_1, Q4_1::BYTES) if wide::available() => Q4_1::WIDE,
        (GgmlDType::Q8_0, Q8_0::BYTES) if wide::available() => Q8_0::WIDE,
        (GgmlDType::Q5_0, Q5_0::BYTES) if wide::available() => Q5_0::WIDE,
        _ => None,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let fast_decode: Option<WideKind> = None;
    let mut out = vec![0f32; m * n];
    let dst = SendPtr(out.as_mut_ptr());
    // The few-row kernel's operands on cache-line boundaries (see `gemv::Aligned`).
    let aligned_xs = few_rows.then(|| super::gemv::Aligned::copy_of(xs));
    let xs = aligned_xs.as_ref().map_or(xs, |a| a.as_slice());
    (0..n.div_ceil(tile)).into_par_iter().for_each_init(
        || super::gemv::Aligned::zeros(tile * k),
        |buf, t| {
            let buf = buf.as_mut_slice();
            let j0 = t * tile;
            let rows = tile.min(n - j0);
            let blocks = &w[j0 * per_row..(j0 + rows) * per_row];
            match fast_decode {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the CPU has the features; `blocks` holds rows · k / 32 whole blocks
                // of the format (T's size was checked against its bytes per block).
                Some(kind) => unsafe {
                    wide::dequantize(
                        kind,
                        std::slice::from_raw_parts(
                            blocks.as_ptr().cast::<u8>(),
                            std::mem::size_of_val(blocks),
                        ),
                        &mut buf[..rows * k],
                    )
                },
                _ => T::to_float(blocks, &mut buf[..rows * k]),
            }
            if few_rows {
                // SAFETY: the wide kernel is available; this task writes columns j0..j0 + rows
                // of every row of dst (row stride n), which no other task touches.
                unsafe {
                    super::gemv::wide::columns_into(&buf[..rows * k], k, xs, m, dst.at(j0), n)
                };
                return;
            }
            // SAFETY: dst has m × n elements; this task writes columns j0..j0 + rows of every
            // row (row stride n), which no other task touches. lhs is [m, k] row-major and
            // rhs(kk, c) = buf[c·k + kk] is the transpose of the [rows, k] tile.
            unsafe {
                gemm::gemm(
                    m,
                    rows,
                    k,
                    dst.at(j0),
                    1,
                    n as isize,
                    false,
                    xs.as_ptr(),
                    1,
                    k as isize,
                    buf.as_ptr(),
                    k as isize,
                    1,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
        },
    );
    Some(out)
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
    fn wide_decoders_equal_to_float_bit_for_bit() {
        #[cfg(target_arch = "x86_64")]
        {
            if !wide::available() {
                return;
            }
            let (n, k) = (16, 640);
            let mut w = pseudo(n * k, 3);
            w[7] = -40.0; // one dominant weight: the rest of its block collapses to the middle codes
            let w = Tensor::from_vec(w, (n, k), &Device::Cpu).unwrap();
            for (dtype, kind) in [
                (GgmlDType::Q4_1, WideKind::Q4_1),
                (GgmlDType::Q5_0, WideKind::Q5_0),
                (GgmlDType::Q8_0, WideKind::Q8_0),
            ] {
                let q = QTensor::quantize(&w, dtype).unwrap();
                let expected = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
                let expected = expected.to_vec1::<f32>().unwrap();
                let mut ours = vec![0f32; n * k];
                // SAFETY: checked above that the kernel is available; data holds n·k/32 blocks.
                unsafe { wide::dequantize(kind, &q.data().unwrap(), &mut ours) };
                let same = ours
                    .iter()
                    .zip(&expected)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{dtype:?}: AVX-512 decoding differs from to_float");
            }
        }
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
            for m in [1, 3, 4, 5, 8, 9, 40, 150] {
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
                // The portable byte decoders too, which the AVX-512 path replaces where present.
                if m <= ROW_DOT_MAX_M {
                    let data = q.data().unwrap();
                    let xs = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                    let portable = match dtype {
                        GgmlDType::Q4_1 => row_dot_with::<Q4_1>(&data, n, k, &xs, m, false),
                        GgmlDType::Q8_0 => row_dot_with::<Q8_0>(&data, n, k, &xs, m, false),
                        GgmlDType::Q5_0 => row_dot_with::<Q5_0>(&data, n, k, &xs, m, false),
                        _ => continue,
                    }
                    .unwrap();
                    let reference = reference.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                    for (a, b) in portable.iter().zip(&reference) {
                        assert!((a - b).abs() <= 1e-5 * scale, "{dtype:?} m={m} portable");
                    }
                }
            }
        }
    }
}
