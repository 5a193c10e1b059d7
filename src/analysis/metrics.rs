//! Scores and tests, as scikit-learn and scipy compute them: ROC-AUC (binary and one-vs-rest
//! macro, tied scores on one threshold), macro F1, Spearman's ρ (average ranks), Kendall's τ-b
//! (ties in either variable counted as neither concordant nor discordant), the paired t-test and
//! its corrected form for cross-validation folds.

use ndarray::ArrayView2;
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::error::{Error, Result};

/// Area under the ROC curve of `scores` for `positive` labels. Tied scores share one threshold
/// (the trapezoid over their block), as `sklearn.metrics.roc_auc_score`.
pub fn roc_auc_binary(positive: &[bool], scores: &[f64]) -> Result<f64> {
    if positive.len() != scores.len() {
        return Err(Error::Data(format!(
            "{} labels but {} scores",
            positive.len(),
            scores.len()
        )));
    }
    if let Some(s) = scores.iter().find(|s| !s.is_finite()) {
        return Err(Error::Data(format!("score {s} is not finite")));
    }
    let n_pos = positive.iter().filter(|&&p| p).count();
    let n_neg = positive.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return Err(Error::Data(
            "ROC-AUC is undefined when only one class is present in the labels".into(),
        ));
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut tp, mut fp) = (0f64, 0f64);
    let (mut prev_tpr, mut prev_fpr) = (0f64, 0f64);
    let mut area = 0f64;
    let mut i = 0;
    while i < order.len() {
        let s = scores[order[i]];
        while i < order.len() && scores[order[i]] == s {
            if positive[order[i]] {
                tp += 1.0;
            } else {
                fp += 1.0;
            }
            i += 1;
        }
        let tpr = tp / n_pos as f64;
        let fpr = fp / n_neg as f64;
        area += (fpr - prev_fpr) * (tpr + prev_tpr) / 2.0;
        prev_tpr = tpr;
        prev_fpr = fpr;
    }
    Ok(area)
}

/// One-vs-rest macro ROC-AUC of class probabilities `proba` [n, classes] for labels `y`.
pub fn roc_auc_ovr_macro(y: &[usize], proba: ArrayView2<f64>) -> Result<f64> {
    let c = proba.ncols();
    if c < 2 {
        return Err(Error::Data("ROC-AUC needs at least two classes".into()));
    }
    if y.len() != proba.nrows() {
        return Err(Error::Data(format!(
            "{} labels but {} rows of probabilities",
            y.len(),
            proba.nrows()
        )));
    }
    if c == 2 {
        let pos: Vec<bool> = y.iter().map(|&v| v == 1).collect();
        return roc_auc_binary(&pos, &proba.column(1).to_vec());
    }
    let mut total = 0.0;
    for k in 0..c {
        let pos: Vec<bool> = y.iter().map(|&v| v == k).collect();
        total += roc_auc_binary(&pos, &proba.column(k).to_vec())?;
    }
    Ok(total / c as f64)
}

/// Macro-averaged F1 over the labels present in `y` or `pred` (0 for a label never predicted
/// correctly), as `f1_score(average="macro", zero_division=0)`.
pub fn f1_macro(y: &[usize], pred: &[usize]) -> Result<f64> {
    if y.len() != pred.len() {
        return Err(Error::Data(format!(
            "{} labels but {} predictions",
            y.len(),
            pred.len()
        )));
    }
    if y.is_empty() {
        return Err(Error::Data("F1 of zero samples".into()));
    }
    let mut labels: Vec<usize> = y.iter().chain(pred).copied().collect();
    labels.sort_unstable();
    labels.dedup();
    let mut total = 0.0;
    for &l in &labels {
        let tp = y
            .iter()
            .zip(pred)
            .filter(|&(&a, &b)| a == l && b == l)
            .count() as f64;
        let fp = y
            .iter()
            .zip(pred)
            .filter(|&(&a, &b)| a != l && b == l)
            .count() as f64;
        let fneg = y
            .iter()
            .zip(pred)
            .filter(|&(&a, &b)| a == l && b != l)
            .count() as f64;
        let denom = 2.0 * tp + fp + fneg;
        total += if denom > 0.0 { 2.0 * tp / denom } else { 0.0 };
    }
    Ok(total / labels.len() as f64)
}

/// Ranks 1..n with ties given their average rank (`scipy.stats.rankdata`).
pub fn average_ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &o in &order[i..=j] {
            ranks[o] = r;
        }
        i = j + 1;
    }
    ranks
}

fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len() as f64;
    let ma = a.iter().sum::<f64>() / n;
    let mb = b.iter().sum::<f64>() / n;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    let d = (saa * sbb).sqrt();
    (d > 0.0).then(|| (sab / d).clamp(-1.0, 1.0))
}

/// Spearman's ρ and its two-sided p-value (t-distribution with n − 2 degrees of freedom), as
/// `scipy.stats.spearmanr`. `None` when a variable is constant (ρ undefined).
pub fn spearman(x: &[f64], y: &[f64]) -> Result<Option<(f64, f64)>> {
    if x.len() != y.len() {
        return Err(Error::Data(format!(
            "Spearman needs paired samples: {} vs {}",
            x.len(),
            y.len()
        )));
    }
    if x.len() < 3 {
        return Err(Error::Data(format!(
            "Spearman needs at least 3 pairs, got {}",
            x.len()
        )));
    }
    if x.iter().chain(y).any(|v| !v.is_finite()) {
        return Err(Error::Data("Spearman input has non-finite values".into()));
    }
    let Some(rho) = pearson(&average_ranks(x), &average_ranks(y)) else {
        return Ok(None);
    };
    let df = (x.len() - 2) as f64;
    let p = if rho.abs() >= 1.0 {
        0.0
    } else {
        let t = rho * (df / ((1.0 - rho) * (1.0 + rho))).sqrt();
        two_sided_t(t, df)?
    };
    Ok(Some((rho, p)))
}

fn two_sided_t(t: f64, df: f64) -> Result<f64> {
    let dist = StudentsT::new(0.0, 1.0, df)
        .map_err(|e| Error::Data(format!("Student t with {df} degrees of freedom: {e}")))?;
    Ok((2.0 * dist.sf(t.abs())).min(1.0))
}

/// Paired two-sided t-test of `a` against `b` (`scipy.stats.ttest_rel`): (t, p). `None` when the
/// differences are all equal (no variance: the test is undefined).
pub fn paired_t_test(a: &[f64], b: &[f64]) -> Result<Option<(f64, f64)>> {
    if a.len() != b.len() {
        return Err(Error::Data(format!(
            "paired t-test needs equal lengths: {} vs {}",
            a.len(),
            b.len()
        )));
    }
    let n = a.len();
    if n < 2 {
        return Err(Error::Data("paired t-test needs at least 2 pairs".into()));
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let mean = d.iter().sum::<f64>() / n as f64;
    let var = d.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
    if var <= 0.0 {
        return Ok(None);
    }
    let t = mean / (var / n as f64).sqrt();
    Ok(Some((t, two_sided_t(t, (n - 1) as f64)?)))
}

/// Kendall's τ-b and its two-sided p-value from the normal approximation with the tie
/// corrections (`scipy.stats.kendalltau(x, y, method="asymptotic")`). Ties are neither concordant
/// nor discordant and shrink the denominator, so a statistic with many tied values (top-p counts
/// that do not change between blocks) is not credited for them. `None` when a variable is
/// constant. O(n log n) (Knight 1966): sort by x, count discordant pairs with a Fenwick tree.
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> Result<Option<(f64, f64)>> {
    if x.len() != y.len() {
        return Err(Error::Data(format!(
            "Kendall's τ needs paired samples: {} vs {}",
            x.len(),
            y.len()
        )));
    }
    let n = x.len();
    if n < 3 {
        return Err(Error::Data(format!(
            "Kendall's τ needs at least 3 pairs, got {n}"
        )));
    }
    if x.iter().chain(y).any(|v| !v.is_finite()) {
        return Err(Error::Data(
            "Kendall's τ input has non-finite values".into(),
        ));
    }
    let (rx, ry) = (dense_ranks(x), dense_ranks(y));
    // Sorted by x, then y: groups of equal x are contiguous, and within them y ascends.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (rx[i], ry[i]));
    let top = ry.iter().copied().max().unwrap_or(0);
    let mut tree = vec![0u64; top + 2];
    let (mut discordant, mut seen) = (0u64, 0u64);
    let mut start = 0;
    while start < n {
        let mut end = start;
        while end < n && rx[order[end]] == rx[order[start]] {
            end += 1;
        }
        // Pairs with a smaller x and a larger y: seen so far minus those with y ≤ this y.
        for &i in &order[start..end] {
            let mut at = ry[i] + 1;
            let mut not_larger = 0;
            while at > 0 {
                not_larger += tree[at];
                at &= at - 1;
            }
            discordant += seen - not_larger;
        }
        for &i in &order[start..end] {
            let mut at = ry[i] + 1;
            while at < tree.len() {
                tree[at] += 1;
                at += at & at.wrapping_neg();
            }
        }
        seen += (end - start) as u64;
        start = end;
    }
    let ties = |ranks: &[usize], keyed: &dyn Fn(usize) -> (usize, usize)| -> [f64; 3] {
        let mut sorted: Vec<(usize, usize)> = (0..ranks.len()).map(keyed).collect();
        sorted.sort_unstable();
        let mut sums = [0.0; 3];
        let mut i = 0;
        while i < sorted.len() {
            let mut j = i;
            while j < sorted.len() && sorted[j] == sorted[i] {
                j += 1;
            }
            let c = (j - i) as f64;
            sums[0] += c * (c - 1.0) / 2.0;
            sums[1] += c * (c - 1.0) * (c - 2.0);
            sums[2] += c * (c - 1.0) * (2.0 * c + 5.0);
            i = j;
        }
        sums
    };
    let [x_tie, x0, x1] = ties(&rx, &|i| (rx[i], 0));
    let [y_tie, y0, y1] = ties(&ry, &|i| (ry[i], 0));
    let [both_tie, _, _] = ties(&rx, &|i| (rx[i], ry[i]));
    let nf = n as f64;
    let total = nf * (nf - 1.0) / 2.0;
    if x_tie == total || y_tie == total {
        return Ok(None);
    }
    let con_minus_dis = total - x_tie - y_tie + both_tie - 2.0 * discordant as f64;
    let tau = (con_minus_dis / (total - x_tie).sqrt() / (total - y_tie).sqrt()).clamp(-1.0, 1.0);
    let m = nf * (nf - 1.0);
    let var = (m * (2.0 * nf + 5.0) - x1 - y1) / 18.0
        + (2.0 * x_tie * y_tie) / m
        + x0 * y0 / (9.0 * m * (nf - 2.0));
    let z = con_minus_dis / var.sqrt();
    let normal = statrs::distribution::Normal::standard();
    Ok(Some((tau, (2.0 * normal.sf(z.abs())).min(1.0))))
}

/// 0-based ranks with equal values sharing one rank and no gaps.
fn dense_ranks(v: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0; v.len()];
    let mut rank = 0;
    for (k, &i) in order.iter().enumerate() {
        if k > 0 && v[i] != v[order[k - 1]] {
            rank += 1;
        }
        ranks[i] = rank;
    }
    ranks
}

/// The corrected resampled t-test of Nadeau & Bengio (2003) for scores `a` and `b` on the same
/// cross-validation folds: the folds' training sets overlap, so their differences are correlated
/// and the plain paired t-test is too confident; the variance of the mean difference is taken as
/// var · (1/k + n_test/n_train) instead of var/k (k folds), against Student's t with k − 1 degrees
/// of freedom. `test_over_train`: n_test/n_train (1/9 for 10 folds). (t, p); `None` when the
/// differences are all equal.
pub fn corrected_paired_t_test(
    a: &[f64],
    b: &[f64],
    test_over_train: f64,
) -> Result<Option<(f64, f64)>> {
    if !(test_over_train > 0.0 && test_over_train.is_finite()) {
        return Err(Error::invalid(format!(
            "the test/train size ratio must be positive, got {test_over_train}"
        )));
    }
    let Some((t_plain, _)) = paired_t_test(a, b)? else {
        return Ok(None);
    };
    // t_plain = mean / √(var/k); the corrected t divides by √(var (1/k + r)) instead.
    let k = a.len() as f64;
    let t = t_plain * ((1.0 / k) / (1.0 / k + test_over_train)).sqrt();
    Ok(Some((t, two_sided_t(t, k - 1.0)?)))
}

/// Mean and population standard deviation (`numpy.mean`, `numpy.std`).
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    (m, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_simple_cases() {
        assert_eq!(roc_auc_binary(&[false, true], &[0.1, 0.9]).unwrap(), 1.0);
        assert_eq!(roc_auc_binary(&[false, true], &[0.5, 0.5]).unwrap(), 0.5);
        assert!(roc_auc_binary(&[true, true], &[0.1, 0.2]).is_err());
    }

    #[test]
    fn ranks_average_ties() {
        assert_eq!(
            average_ranks(&[3.0, 1.0, 3.0, 2.0]),
            vec![3.5, 1.0, 3.5, 2.0]
        );
    }

    #[test]
    fn degenerate_tests_are_none_not_nan() {
        assert!(paired_t_test(&[1.0, 2.0], &[0.0, 1.0]).unwrap().is_none());
        assert!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0])
            .unwrap()
            .is_none());
    }
}
