//! `x Wᵀ` for dense f32 weights and few activation rows (decoding, and the lens at one position):
//! the weights are read once, straight from their row-major layout. A general GEMM packs both
//! operands first, which for a few to a few dozen rows costs more than the product: the lens'
//! [30 × 576] × [576 × 49,152] product at one decoding step reads 113 MB that it would copy first.
//!
//! With AVX-512 a register-blocked kernel computes 4 weight rows × 6 activation rows, or 3 × 8,
//! at a time (24 accumulators over 16 lanes of the shared dimension); without it, each weight row
//! is dotted with every activation row (up to [`MAX_ROWS_PORTABLE`]).

use rayon::prelude::*;

/// Activation rows up to which [`product`] applies, with AVX-512 (past it a packed GEMM is
/// faster: measured on the lens and layer shapes of SmolLM2, Gemma 3 and Llama 3).
pub const MAX_ROWS_WIDE: usize = 128;
/// Activation rows up to which [`product`] applies without AVX-512.
pub const MAX_ROWS_PORTABLE: usize = 8;
/// Weight rows per parallel task.
const ROWS_PER_TASK: usize = 32;
/// Accumulator lanes per activation row (portable kernel).
const LANES: usize = 16;

/// Activation rows up to which [`product`] applies on this CPU.
pub fn max_rows() -> usize {
    if wide::available() {
        MAX_ROWS_WIDE
    } else {
        MAX_ROWS_PORTABLE
    }
}

/// `out[i, j] = xs[i] · w[j]` for `w` [n, k] and `xs` [m, k] (row-major, m ≤ [`max_rows`]) →
/// [m, n]; `None` when the shapes do not fit.
pub fn product(w: &[f32], n: usize, k: usize, xs: &[f32], m: usize) -> Option<Vec<f32>> {
    if m == 0 || m > max_rows() || w.len() != n * k || xs.len() != m * k {
        return None;
    }
    if wide::available() {
        return Some(wide::product(w, n, k, xs, m));
    }
    Some(portable(w, n, k, xs, m))
}

/// [`product`] without AVX-512 (m ≤ [`MAX_ROWS_PORTABLE`]).
fn portable(w: &[f32], n: usize, k: usize, xs: &[f32], m: usize) -> Vec<f32> {
    by_weight_rows(n, m, ROWS_PER_TASK, |j, out| {
        dot_rows(&w[j * k..(j + 1) * k], xs, k, out)
    })
}

/// `[m, n]` output of a product computed one weight row at a time: `dot(j, out)` writes
/// `x_i · w_j` into `out[i]` for every activation row i; weight rows in parallel, `rows_per_task`
/// to a task.
pub(super) fn by_weight_rows(
    n: usize,
    m: usize,
    rows_per_task: usize,
    dot: impl Fn(usize, &mut [f32]) + Sync,
) -> Vec<f32> {
    // Transposed result ([n, m]) so that every task writes one contiguous range.
    let mut t = vec![0f32; n * m];
    t.par_chunks_mut(rows_per_task * m)
        .enumerate()
        .for_each(|(task, out)| {
            for (r, out_row) in out.chunks_mut(m).enumerate() {
                dot(task * rows_per_task + r, out_row);
            }
        });
    if m == 1 {
        return t;
    }
    let mut out = vec![0f32; m * n];
    for j in 0..n {
        for i in 0..m {
            out[i * n + j] = t[j * m + i];
        }
    }
    out
}

fn dot_rows(w: &[f32], xs: &[f32], k: usize, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { dot_rows_avx2(w, xs, k, out) };
        }
    }
    dot_rows_generic(w, xs, k, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_rows_avx2(w: &[f32], xs: &[f32], k: usize, out: &mut [f32]) {
    dot_rows_generic(w, xs, k, out)
}

/// Lane-wise partial sums (vectorised by the compiler), then a horizontal sum per row.
#[inline(always)]
fn dot_rows_generic(w: &[f32], xs: &[f32], k: usize, out: &mut [f32]) {
    let mut acc = [[0f32; LANES]; MAX_ROWS_PORTABLE];
    let whole = k - k % LANES;
    for (r, (acc, o)) in acc.iter_mut().zip(out.iter_mut()).enumerate() {
        let x = &xs[r * k..(r + 1) * k];
        for (cw, cx) in w[..whole]
            .chunks_exact(LANES)
            .zip(x[..whole].chunks_exact(LANES))
        {
            for l in 0..LANES {
                acc[l] += cw[l] * cx[l];
            }
        }
        let tail: f32 = w[whole..].iter().zip(&x[whole..]).map(|(a, b)| a * b).sum();
        *o = acc.iter().sum::<f32>() + tail;
    }
}

/// f32 storage whose slice starts on a 64-byte boundary (a cache line), so that the wide
/// kernel's vector loads from it do not straddle two lines (every row, when the row length is a
/// multiple of 16): with its operands in cache the kernel ran about a quarter faster from
/// aligned activations (docs/benchmarks.md). Only where the values sit changes, never a value.
pub(super) struct Aligned {
    data: Vec<f32>,
    offset: usize,
    len: usize,
}

impl Aligned {
    /// `len` zeros.
    pub(super) fn zeros(len: usize) -> Self {
        // 15 spare elements cover any start within a line (the allocation is 4-byte aligned).
        let data = vec![0f32; len + 15];
        let offset = data.as_ptr().align_offset(64).min(15);
        Self { data, offset, len }
    }

    /// A copy of `values`.
    pub(super) fn copy_of(values: &[f32]) -> Self {
        let mut a = Self::zeros(values.len());
        a.as_mut_slice().copy_from_slice(values);
        a
    }

    pub(super) fn as_slice(&self) -> &[f32] {
        &self.data[self.offset..self.offset + self.len]
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data[self.offset..self.offset + self.len]
    }
}

/// A raw output pointer shared by parallel tasks, each of which writes its own columns.
#[derive(Clone, Copy)]
pub(super) struct SendPtr(pub(super) *mut f32);
// SAFETY: tasks write disjoint column ranges of the output (see the users).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// Going through a method makes closures capture the whole (Send) wrapper, not the field.
    pub(super) fn at(self, offset: usize) -> *mut f32 {
        // SAFETY: callers stay within the allocation.
        unsafe { self.0.add(offset) }
    }
}

/// The AVX-512 kernel: weight rows in tasks of [`wide::TASK_ROWS`], and within a task every
/// group of 6 activation rows against every group of 4 weight rows (the task's weights stay in
/// L2 while the groups of activations pass over them).
pub(super) mod wide {
    /// Weight rows per parallel task.
    pub(super) const TASK_ROWS: usize = 64;
    /// Weight rows × activation rows of one register tile: 4 × 6, or 3 × 8 where 7 or more
    /// activation rows remain, so that a batch of 8 (and each 8 of 32) takes one pass over the
    /// weights instead of two (6 + 2): 2-5 % less time in batch 8's products on a two-port
    /// AVX-512 Xeon (docs/benchmarks.md). Each output's sum is the same either way.
    const RW: usize = 4;
    const RX: usize = 6;
    const RW_WIDE_X: usize = 3;
    const RX_WIDE: usize = 8;

    pub(crate) fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512bw")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    use super::SendPtr;

    /// Caller: [`available`] returned true; `w` is [n, k], `xs` [m, k].
    #[cfg(target_arch = "x86_64")]
    pub(super) fn product(w: &[f32], n: usize, k: usize, xs: &[f32], m: usize) -> Vec<f32> {
        use rayon::prelude::*;
        let mut out = vec![0f32; m * n];
        let dst = SendPtr(out.as_mut_ptr());
        let aligned = super::Aligned::copy_of(xs);
        let xs = aligned.as_slice();
        (0..n.div_ceil(TASK_ROWS)).into_par_iter().for_each(|task| {
            let j0 = task * TASK_ROWS;
            let rows = TASK_ROWS.min(n - j0);
            // SAFETY: avx512f is present (caller); this task's weight rows j0..j0 + rows are
            // in bounds, and their columns of out (row stride n) are written by this task only.
            unsafe { columns_into(&w[j0 * k..(j0 + rows) * k], k, xs, m, dst.at(j0), n) }
        });
        out
    }

    /// `out[r·ld + j] = xs[r] · w[j]` for the rows j of `w` ([rows, k]) and r < m, on this
    /// thread.
    ///
    /// # Safety
    /// [`available`] returned true, `xs` holds m rows of k, and `out[r·ld + j]` is valid for
    /// writes for every r < m and j < rows.
    #[cfg(target_arch = "x86_64")]
    pub(crate) unsafe fn columns_into(
        w: &[f32],
        k: usize,
        xs: &[f32],
        m: usize,
        out: *mut f32,
        ld: usize,
    ) {
        let rows = w.len().checked_div(k).unwrap_or(0);
        debug_assert!(xs.len() >= m * k);
        // Every group of activation rows against every group of weight rows: the weight rows
        // stay in L2 while the groups of activations pass over them.
        let mut r0 = 0;
        while r0 < m {
            let left = m - r0;
            let (nx, rw) = if left > RX {
                (RX_WIDE.min(left), RW_WIDE_X)
            } else {
                (left, RW)
            };
            for j in (0..rows).step_by(rw) {
                let nw = rw.min(rows - j);
                // SAFETY: rows j..j + nw of w and r0..r0 + nx of xs are in bounds; the output
                // entries are valid (caller).
                unsafe {
                    tile(
                        w.as_ptr().add(j * k),
                        xs.as_ptr().add(r0 * k),
                        k,
                        out.add(r0 * ld + j),
                        ld,
                        (nw, nx),
                        r0 == 0,
                    )
                }
            }
            r0 += nx;
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(super) fn product(_: &[f32], _: usize, _: usize, _: &[f32], _: usize) -> Vec<f32> {
        unreachable!("the wide kernel is x86-64 only")
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(crate) unsafe fn columns_into(
        _: &[f32],
        _: usize,
        _: &[f32],
        _: usize,
        _: *mut f32,
        _: usize,
    ) {
        unreachable!("the wide kernel is x86-64 only")
    }

    /// `out[r·ld + i] = x_r · w_i` for i < nw ≤ 4, r < nx ≤ 6 (or nw ≤ 3, nx ≤ 8), rows of
    /// stride k; the first pass over these weight rows prefetches the next ones.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
    unsafe fn tile(
        w: *const f32,
        x: *const f32,
        k: usize,
        out: *mut f32,
        ld: usize,
        (nw, nx): (usize, usize),
        first_pass: bool,
    ) {
        macro_rules! dispatch {
            ($($a:literal)*; $($b:literal)*) => {
                dispatch!(@outer [$($a)*] [$($b)*])
            };
            (@outer [$($a:literal)*] $bs:tt) => {
                match nw {
                    $($a => dispatch!(@inner $a $bs),)*
                    _ => unreachable!(),
                }
            };
            (@inner $a:literal [$($b:literal)*]) => {
                match nx {
                    $($b => if first_pass {
                        block::<$a, $b, true>(w, x, k, out, ld)
                    } else {
                        block::<$a, $b, false>(w, x, k, out, ld)
                    },)*
                    _ => unreachable!(),
                }
            };
        }
        if nx <= RX {
            dispatch!(1 2 3 4; 1 2 3 4 5 6)
        } else {
            dispatch!(1 2 3; 7 8)
        }
    }

    // Not inlined: each instantiation alone in its function keeps its 24 accumulators in
    // registers (inlined into `tile`, they spilled to the stack).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
    #[inline(never)]
    // Index loops over constant bounds: unrolled, every index is a constant.
    #[allow(clippy::needless_range_loop)]
    unsafe fn block<const NW: usize, const NX: usize, const PREFETCH: bool>(
        w: *const f32,
        x: *const f32,
        k: usize,
        out: *mut f32,
        ld: usize,
    ) {
        use std::arch::x86_64::*;
        // One flat array, indexed by constants once the loops unroll: LLVM then keeps every
        // accumulator in a register (a nested array made it shuffle and spill them).
        let mut acc = [_mm512_setzero_ps(); 32];
        let whole = k - k % 16;
        let mut c = 0;
        while c < whole {
            let mut wv = [_mm512_setzero_ps(); 4];
            for i in 0..NW {
                wv[i] = _mm512_loadu_ps(w.add(i * k + c));
            }
            if PREFETCH {
                // The next group's rows (contiguous after these): rows of a few cache lines are
                // too short for the hardware prefetcher to reach memory speed on its own. Past
                // the last rows the address leaves the slice: `wrapping_add` forms it without the
                // in-bounds promise of `add`, and a prefetch never faults.
                for i in 0..NW {
                    _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add((NW + i) * k + c).cast::<i8>());
                }
            }
            for r in 0..NX {
                let xv = _mm512_loadu_ps(x.add(r * k + c));
                for i in 0..NW {
                    acc[i * 8 + r] = _mm512_fmadd_ps(wv[i], xv, acc[i * 8 + r]);
                }
            }
            c += 16;
        }
        if whole < k {
            let mask: __mmask16 = (1u16 << (k - whole)) - 1;
            let mut wv = [_mm512_setzero_ps(); 4];
            for i in 0..NW {
                wv[i] = _mm512_maskz_loadu_ps(mask, w.add(i * k + whole));
            }
            for r in 0..NX {
                let xv = _mm512_maskz_loadu_ps(mask, x.add(r * k + whole));
                for i in 0..NW {
                    acc[i * 8 + r] = _mm512_fmadd_ps(wv[i], xv, acc[i * 8 + r]);
                }
            }
        }
        for i in 0..NW {
            for r in 0..NX {
                *out.add(r * ld + i) = _mm512_reduce_add_ps(acc[i * 8 + r]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_storage_starts_on_a_cache_line_and_keeps_the_values() {
        for len in [0, 1, 15, 16, 577] {
            let values: Vec<f32> = (0..len).map(|i| i as f32 * 0.5).collect();
            let a = Aligned::copy_of(&values);
            assert_eq!(a.as_slice(), &values[..]);
            if len > 0 {
                assert_eq!(a.as_slice().as_ptr() as usize % 64, 0, "len {len}");
            }
            let mut z = Aligned::zeros(len);
            assert!(z.as_mut_slice().iter().all(|&v| v == 0.0));
            assert_eq!(z.as_mut_slice().len(), len);
        }
    }

    #[test]
    fn few_row_product_equals_a_plain_product() {
        // Neither a multiple of the lanes, of the register block nor of the task size.
        let (n, k) = (133, 141);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        for m in [1, 3, 6, 7, 8, 13, 30, 64] {
            let xs: Vec<f32> = (0..m * k)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) / 7.0)
                .collect();
            let mut results = vec![];
            if m <= max_rows() {
                results.push(("product", product(&w, n, k, &xs, m).unwrap()));
            }
            if m <= MAX_ROWS_PORTABLE {
                results.push(("portable", portable(&w, n, k, &xs, m)));
            }
            if wide::available() {
                results.push(("wide", wide::product(&w, n, k, &xs, m)));
            }
            for (kernel, ours) in results {
                for i in 0..m {
                    for j in 0..n {
                        let exact: f64 = (0..k)
                            .map(|c| f64::from(xs[i * k + c]) * f64::from(w[j * k + c]))
                            .sum();
                        let got = f64::from(ours[i * n + j]);
                        assert!(
                            (got - exact).abs() <= 1e-4 * exact.abs().max(1.0),
                            "{kernel} m={m} ({i}, {j}): {got} vs {exact}"
                        );
                    }
                }
            }
        }
        let too_many = max_rows() + 1;
        assert!(product(&w, n, k, &vec![0.0; too_many * k], too_many).is_none());
    }
}
