//! `x Wᵀ` for dense f32 weights and few activation rows (decoding one token per sequence): each
//! weight row is read once and dotted with every activation row, weight rows in parallel. A
//! general GEMM packs both operands first, which for one to eight rows costs more than the product
//! and leaves decoding well below the memory bandwidth that bounds it.

use rayon::prelude::*;

/// Activation rows up to which [`product`] is used.
pub const MAX_ROWS: usize = 8;
/// Weight rows per parallel task.
const ROWS_PER_TASK: usize = 32;
/// Accumulator lanes per activation row.
const LANES: usize = 16;

/// `out[i, j] = xs[i] · w[j]` for `w` [n, k] and `xs` [m, k] (row-major, m ≤ [`MAX_ROWS`]) →
/// [m, n]; `None` when the shapes do not fit.
pub fn product(w: &[f32], n: usize, k: usize, xs: &[f32], m: usize) -> Option<Vec<f32>> {
    if m == 0 || m > MAX_ROWS || w.len() != n * k || xs.len() != m * k {
        return None;
    }
    Some(by_weight_rows(n, m, ROWS_PER_TASK, |j, out| {
        dot_rows(&w[j * k..(j + 1) * k], xs, k, out)
    }))
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
    let mut acc = [[0f32; LANES]; MAX_ROWS];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_row_product_equals_a_plain_product() {
        let (n, k) = (70, 133); // neither a multiple of the lanes nor of the task size
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        for m in [1, 3, 8] {
            let xs: Vec<f32> = (0..m * k)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) / 7.0)
                .collect();
            let ours = product(&w, n, k, &xs, m).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let exact: f64 = (0..k)
                        .map(|c| f64::from(xs[i * k + c]) * f64::from(w[j * k + c]))
                        .sum();
                    let got = f64::from(ours[i * n + j]);
                    assert!(
                        (got - exact).abs() <= 1e-4 * exact.abs().max(1.0),
                        "{m} {i} {j}"
                    );
                }
            }
        }
        assert!(product(&w, n, k, &[0.0; 9 * 133], 9).is_none());
    }
}
