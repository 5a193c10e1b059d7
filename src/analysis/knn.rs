//! k-nearest-neighbour classification on profiles, with the semantics of scikit-learn's
//! `KNeighborsClassifier(algorithm="brute", metric="euclidean")`.
//!
//! Brute-force search computes squared distances as ‖q‖² − 2 q·x + ‖x‖² (one matrix product per
//! chunk of queries) and keeps the k smallest in a fixed-size max-heap scanned in training order,
//! which rejects a candidate equal to the current k-th distance and, when evicting among equal
//! distances, follows the heap's layout: the same neighbours scikit-learn selects under exact
//! ties. `predict_proba` sums uniform or 1/distance weights per class; a query at zero distance
//! from training points gives those points weight 1 and every other neighbour weight 0.
//!
//! linfa-nn's k-d tree and ball tree are available for large low-dimensional training sets; they
//! return the same neighbours except under exact distance ties (resolved there by training order).

use linfa_nn::distance::L2Dist;
use linfa_nn::{CommonNearestNeighbour, NearestNeighbour};
use ndarray::{s, Array2, ArrayView2, Axis};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Neighbour weighting, as scikit-learn's `weights`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Weighting {
    #[default]
    Uniform,
    Distance,
}

impl std::str::FromStr for Weighting {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "uniform" => Ok(Weighting::Uniform),
            "distance" => Ok(Weighting::Distance),
            o => Err(Error::invalid(format!(
                "unknown weighting `{o}` (expected uniform or distance)"
            ))),
        }
    }
}

/// How neighbours are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NeighborSearch {
    /// Exhaustive search with scikit-learn's tie semantics (default).
    #[default]
    Brute,
    /// linfa-nn k-d tree.
    KdTree,
    /// linfa-nn ball tree.
    BallTree,
}

/// Largest chunk of queries per distance product (one chunk per thread below that).
const MAX_QUERY_CHUNK: usize = 512;

/// A fitted k-NN classifier over encoded labels `0..n_classes`.
#[derive(Clone, Debug)]
pub struct KnnClassifier {
    k: usize,
    weighting: Weighting,
    search: NeighborSearch,
    n_classes: usize,
    x: Array2<f64>,
    x_norm2: Vec<f64>,
    y: Vec<usize>,
}

/// Checks a feature matrix for NaN and infinities.
pub fn check_finite(x: ArrayView2<f64>, what: &str) -> Result<()> {
    if let Some(((r, c), v)) = x.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(Error::Data(format!(
            "{what} has a non-finite value {v} at row {}, column {} (counting from 1, as in the file); remove or impute it first",
            r + 1,
            c + 1
        )));
    }
    Ok(())
}

impl KnnClassifier {
    pub fn fit(
        x: ArrayView2<f64>,
        y: &[usize],
        n_classes: usize,
        k: usize,
        weighting: Weighting,
    ) -> Result<Self> {
        Self::fit_with(x, y, n_classes, k, weighting, NeighborSearch::Brute)
    }

    pub fn fit_with(
        x: ArrayView2<f64>,
        y: &[usize],
        n_classes: usize,
        k: usize,
        weighting: Weighting,
        search: NeighborSearch,
    ) -> Result<Self> {
        Self::fit_owned(x.to_owned(), y, n_classes, k, weighting, search)
    }

    /// As [`KnnClassifier::fit_with`], taking the training matrix without copying it.
    pub fn fit_owned(
        x: Array2<f64>,
        y: &[usize],
        n_classes: usize,
        k: usize,
        weighting: Weighting,
        search: NeighborSearch,
    ) -> Result<Self> {
        let n = x.nrows();
        if y.len() != n {
            return Err(Error::Data(format!(
                "{n} training rows but {} labels",
                y.len()
            )));
        }
        if k == 0 {
            return Err(Error::invalid("k must be at least 1"));
        }
        if k > n {
            return Err(Error::invalid(format!(
                "k = {k} neighbours requested but the training set has only {n} samples; lower --k"
            )));
        }
        if x.ncols() == 0 {
            return Err(Error::Data("features have zero columns".into()));
        }
        if let Some(&bad) = y.iter().find(|&&c| c >= n_classes) {
            return Err(Error::Data(format!("label {bad} outside 0..{n_classes}")));
        }
        check_finite(x.view(), "the training features")?;
        Ok(Self::from_checked(x, y, n_classes, k, weighting, search))
    }

    /// Builds the classifier from inputs already validated (cross-validation checks once).
    pub(crate) fn from_checked(
        x: Array2<f64>,
        y: &[usize],
        n_classes: usize,
        k: usize,
        weighting: Weighting,
        search: NeighborSearch,
    ) -> Self {
        let x_norm2 = x.rows().into_iter().map(|r| r.dot(&r)).collect();
        Self {
            k,
            weighting,
            search,
            n_classes,
            x,
            x_norm2,
            y: y.to_vec(),
        }
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// Distances and training indices of the k nearest neighbours of every query, nearest first.
    pub fn kneighbors(&self, q: ArrayView2<f64>) -> Result<(Array2<f64>, Array2<usize>)> {
        if q.ncols() != self.x.ncols() {
            return Err(Error::Data(format!(
                "queries have {} features, the training set {}",
                q.ncols(),
                self.x.ncols()
            )));
        }
        check_finite(q, "the query features")?;
        let rows: Vec<Vec<(f64, usize)>> = match self.search {
            NeighborSearch::Brute => self.brute(q),
            NeighborSearch::KdTree | NeighborSearch::BallTree => self.tree(q)?,
        };
        let m = q.nrows();
        let mut dist = Array2::zeros((m, self.k));
        let mut idx = Array2::zeros((m, self.k));
        for (i, row) in rows.into_iter().enumerate() {
            for (j, (d, t)) in row.into_iter().enumerate() {
                dist[[i, j]] = d;
                idx[[i, j]] = t;
            }
        }
        Ok((dist, idx))
    }

    fn brute(&self, q: ArrayView2<f64>) -> Vec<Vec<(f64, usize)>> {
        // One matrix product per thread: each product re-packs the training matrix.
        let m = q.nrows();
        let chunk = m
            .div_ceil(rayon::current_num_threads())
            .clamp(1, MAX_QUERY_CHUNK);
        let chunks: Vec<(usize, usize)> = (0..m)
            .step_by(chunk)
            .map(|s| (s, (s + chunk).min(m)))
            .collect();
        chunks
            .into_par_iter()
            .flat_map_iter(|(a, b)| {
                let qc = q.slice(s![a..b, ..]);
                let dots = qc.dot(&self.x.t());
                (0..b - a)
                    .map(|i| {
                        let qi = qc.row(i);
                        let qn = qi.dot(&qi);
                        let mut heap = KHeap::new(self.k);
                        for (j, &xn) in self.x_norm2.iter().enumerate() {
                            heap.push(-2.0 * dots[[i, j]] + qn + xn, j);
                        }
                        // Selection on ‖q‖² − 2q·x + ‖x‖². Where that is at rounding level, the
                        // distance is recomputed directly, so a duplicated point is at exactly 0.
                        let mut row: Vec<(f64, usize)> = heap
                            .into_sorted()
                            .into_iter()
                            .map(|(d2, j)| {
                                let d2 = if d2 <= 1e-12 * (qn + self.x_norm2[j]) {
                                    qi.iter()
                                        .zip(self.x.row(j))
                                        .map(|(a, b)| (a - b) * (a - b))
                                        .sum()
                                } else {
                                    d2
                                };
                                (d2.max(0.0).sqrt(), j)
                            })
                            .collect();
                        row.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                        row
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn tree(&self, q: ArrayView2<f64>) -> Result<Vec<Vec<(f64, usize)>>> {
        let algo = match self.search {
            NeighborSearch::KdTree => CommonNearestNeighbour::KdTree,
            _ => CommonNearestNeighbour::BallTree,
        };
        let index = algo
            .from_batch(&self.x, L2Dist)
            .map_err(|e| Error::Data(format!("cannot build the neighbour index: {e}")))?;
        q.rows()
            .into_iter()
            .map(|qi| {
                let found = index
                    .k_nearest(qi, self.k)
                    .map_err(|e| Error::Data(format!("neighbour query failed: {e}")))?;
                let mut row: Vec<(f64, usize)> = found
                    .into_iter()
                    .map(|(p, j)| {
                        let d: f64 = p
                            .iter()
                            .zip(qi.iter())
                            .map(|(a, b)| (a - b) * (a - b))
                            .sum();
                        (d.sqrt(), j)
                    })
                    .collect();
                row.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                Ok(row)
            })
            .collect()
    }

    /// Class probabilities [queries, n_classes].
    pub fn predict_proba(&self, q: ArrayView2<f64>) -> Result<Array2<f64>> {
        let (dist, idx) = self.kneighbors(q)?;
        let m = q.nrows();
        let mut proba = Array2::<f64>::zeros((m, self.n_classes));
        for i in 0..m {
            let d = dist.row(i);
            let weights: Vec<f64> = match self.weighting {
                Weighting::Uniform => vec![1.0; self.k],
                Weighting::Distance => {
                    if d.iter().any(|&x| x == 0.0) {
                        d.iter()
                            .map(|&x| if x == 0.0 { 1.0 } else { 0.0 })
                            .collect()
                    } else {
                        d.iter().map(|&x| 1.0 / x).collect()
                    }
                }
            };
            let mut row = proba.row_mut(i);
            for (w, &t) in weights.iter().zip(idx.row(i)) {
                row[self.y[t]] += w;
            }
            let total: f64 = row.sum();
            let total = if total == 0.0 { 1.0 } else { total };
            row.mapv_inplace(|v| v / total);
        }
        Ok(proba)
    }

    /// Most probable class per query (the smallest class index among equals).
    pub fn predict(&self, q: ArrayView2<f64>) -> Result<Vec<usize>> {
        Ok(argmax_rows(self.predict_proba(q)?.view()))
    }
}

/// Index of the first maximum of each row.
pub fn argmax_rows(p: ArrayView2<f64>) -> Vec<usize> {
    p.axis_iter(Axis(0))
        .map(|r| {
            let mut best = 0;
            for (j, &v) in r.iter().enumerate() {
                if v > r[best] {
                    best = j;
                }
            }
            best
        })
        .collect()
}

/// Fixed-size max-heap of (squared distance, index) with scikit-learn's insertion rule.
struct KHeap {
    values: Vec<f64>,
    indices: Vec<usize>,
}

impl KHeap {
    fn new(k: usize) -> Self {
        Self {
            values: vec![f64::INFINITY; k],
            indices: vec![0; k],
        }
    }

    /// Rejects `val` unless it is strictly below the root; otherwise it replaces the root and
    /// sifts down, moving to the larger child (the left one when both are equal) while that child
    /// is strictly larger.
    fn push(&mut self, val: f64, idx: usize) {
        let size = self.values.len();
        if val >= self.values[0] {
            return;
        }
        let mut cur = 0;
        loop {
            let left = 2 * cur + 1;
            let right = left + 1;
            let swap = if left >= size {
                break;
            } else if right >= size || self.values[left] >= self.values[right] {
                if val < self.values[left] {
                    left
                } else {
                    break;
                }
            } else if val < self.values[right] {
                right
            } else {
                break;
            };
            self.values[cur] = self.values[swap];
            self.indices[cur] = self.indices[swap];
            cur = swap;
        }
        self.values[cur] = val;
        self.indices[cur] = idx;
    }

    /// Entries by increasing distance (ties by index, for a stable presentation).
    fn into_sorted(self) -> Vec<(f64, usize)> {
        let mut v: Vec<(f64, usize)> = self.values.into_iter().zip(self.indices).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn heap_tie_rule_matches_scikit_learn_example() {
        // 1-D training points [-1, -1, 0, 0], query 0, k = 3: the two points at distance 1 tie
        // for the last place. scikit-learn's ArgKmin keeps {1, 2, 3} (its heap evicts the root,
        // which is index 0 here), not the lowest indices {0, 2, 3}.
        let x = array![[-1.0], [-1.0], [0.0], [0.0]];
        let knn = KnnClassifier::fit(x.view(), &[0, 1, 0, 1], 2, 3, Weighting::Uniform).unwrap();
        let (d, i) = knn.kneighbors(array![[0.0]].view()).unwrap();
        let mut idx = i.row(0).to_vec();
        idx.sort();
        assert_eq!(idx, vec![1, 2, 3]);
        assert_eq!(d.row(0).to_vec(), vec![0.0, 0.0, 1.0]);
        // Hence the probabilities: labels of {1, 2, 3} are 1, 0, 1.
        let p = knn.predict_proba(array![[0.0]].view()).unwrap();
        assert!((p[[0, 1]] - 2.0 / 3.0).abs() < 1e-15);
    }

    #[test]
    fn errors_are_clear() {
        let x = array![[0.0], [1.0]];
        let e = KnnClassifier::fit(x.view(), &[0, 1], 2, 3, Weighting::Uniform).unwrap_err();
        assert!(e.to_string().contains("only 2 samples"), "{e}");
        let bad = array![[0.0], [f64::NAN]];
        let e = KnnClassifier::fit(bad.view(), &[0, 1], 2, 1, Weighting::Uniform).unwrap_err();
        assert!(e.to_string().contains("non-finite"), "{e}");
        let e = KnnClassifier::fit(x.view(), &[0], 2, 1, Weighting::Uniform).unwrap_err();
        assert!(e.to_string().contains("labels"), "{e}");
    }

    #[test]
    fn trees_agree_with_brute_force_without_ties() {
        let n = 200;
        let x = Array2::from_shape_fn((n, 3), |(i, j)| {
            ((i * 7 + j * 13) as f64 * 0.618).sin() * 10.0
        });
        let y: Vec<usize> = (0..n).map(|i| i % 3).collect();
        let q = Array2::from_shape_fn((20, 3), |(i, j)| {
            ((i * 5 + j * 3) as f64 * 0.377).cos() * 9.0
        });
        let brute = KnnClassifier::fit(x.view(), &y, 3, 7, Weighting::Distance).unwrap();
        for search in [NeighborSearch::KdTree, NeighborSearch::BallTree] {
            let tree =
                KnnClassifier::fit_with(x.view(), &y, 3, 7, Weighting::Distance, search).unwrap();
            let a = brute.predict_proba(q.view()).unwrap();
            let b = tree.predict_proba(q.view()).unwrap();
            assert!((a - b).iter().all(|d| d.abs() < 1e-12), "{search:?}");
        }
    }
}
