//! Profile algebra: turning per-token profiles (tokens × layers) into feature vectors, entropy
//! differences, depth normalisation, layer subsets and per-feature standardisation.

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How a generation's per-token profiles become one feature vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// Token profiles one after the other (tokens · layers features): the paper's default.
    Concat,
    /// The mean profile over tokens (layers features).
    Mean,
    /// Tokens split into `w` nearly equal consecutive windows (as `numpy.array_split`), each
    /// averaged (w · layers features): the paper's format experiment uses 256 tokens, 8 windows.
    Windows(usize),
}

/// Aggregates a tokens × layers profile into one feature vector.
pub fn aggregate(profile: ArrayView2<f64>, how: Aggregation) -> Result<Array1<f64>> {
    let (t, l) = profile.dim();
    if t == 0 || l == 0 {
        return Err(Error::Data("cannot aggregate an empty profile".into()));
    }
    match how {
        Aggregation::Concat => Ok(profile.iter().cloned().collect()),
        Aggregation::Mean => Ok(profile
            .mean_axis(Axis(0))
            .unwrap_or_else(|| Array1::zeros(l))),
        Aggregation::Windows(w) => {
            if w == 0 || w > t {
                return Err(Error::invalid(format!(
                    "cannot split {t} tokens into {w} windows (need 1 ≤ w ≤ tokens)"
                )));
            }
            let mut out = Vec::with_capacity(w * l);
            let (base, extra) = (t / w, t % w);
            let mut start = 0;
            for i in 0..w {
                let len = base + usize::from(i < extra);
                let win = profile.slice(s![start..start + len, ..]);
                out.extend(win.mean_axis(Axis(0)).unwrap_or_else(|| Array1::zeros(l)));
                start += len;
            }
            Ok(Array1::from(out))
        }
    }
}

/// ΔH_i = H_i − H_{i−1} along the layers of each row (one column fewer).
pub fn delta(profile: ArrayView2<f64>) -> Array2<f64> {
    let l = profile.ncols();
    if l < 2 {
        return Array2::zeros((profile.nrows(), 0));
    }
    &profile.slice(s![.., 1..]) - &profile.slice(s![.., ..l - 1])
}

/// Indices i into ΔH of the `n` largest
/// increases (expansion), largest first; ties by smaller index.
pub fn largest_increase(dh: ArrayView1<f64>, n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..dh.len()).collect();
    idx.sort_by(|&a, &b| dh[b].total_cmp(&dh[a]).then(a.cmp(&b)));
    idx.truncate(n);
    idx
}

/// Indices of the `n` largest decreases (pruning), most negative first; ties by smaller index.
pub fn largest_decrease(dh: ArrayView1<f64>, n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..dh.len()).collect();
    idx.sort_by(|&a, &b| dh[a].total_cmp(&dh[b]).then(a.cmp(&b)));
    idx.truncate(n);
    idx
}

/// How blocks are chosen for skipping (the paper's Section 5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipStrategy {
    /// The blocks of largest entropy increase (max ΔH).
    Expansion,
    /// The blocks of largest entropy decrease (min ΔH).
    Pruning,
    /// A seeded random choice (the baseline).
    Random { seed: u64 },
}

/// The `n` blocks to skip under `strategy`, ranked by ΔH, where `dh[i]` is the write of block
/// `first_block + i` (blocks numbered 1..=L; see the crate docs, "Layers and blocks"). ΔH of a
/// profile that includes layer 0 (the embedding output) starts at block 1; ΔH of the L block
/// layers alone starts at block 2. Returns block numbers as
/// [`crate::model::Model::set_skipped_blocks`] takes them, in rank order.
pub fn blocks_to_skip(
    dh: ArrayView1<f64>,
    first_block: usize,
    strategy: SkipStrategy,
    n: usize,
) -> Vec<usize> {
    let ranked = match strategy {
        SkipStrategy::Expansion => largest_increase(dh, n),
        SkipStrategy::Pruning => largest_decrease(dh, n),
        SkipStrategy::Random { seed } => {
            use rand::seq::SliceRandom;
            use rand::SeedableRng;
            let mut idx: Vec<usize> = (0..dh.len()).collect();
            idx.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
            idx.truncate(n);
            idx
        }
    };
    ranked.into_iter().map(|i| i + first_block).collect()
}

/// Resamples each row (a profile over L layers) to `points` values by linear interpolation on a
/// relative depth axis [0, 1], so that models of different depth can be compared.
pub fn depth_normalize(profiles: ArrayView2<f64>, points: usize) -> Result<Array2<f64>> {
    if points < 2 {
        return Err(Error::invalid(format!(
            "depth normalisation needs at least 2 points, got {points}"
        )));
    }
    let l = profiles.ncols();
    if l < 2 {
        return Err(Error::invalid(format!(
            "depth normalisation needs profiles of at least 2 layers, got {l}"
        )));
    }
    let mut out = Array2::zeros((profiles.nrows(), points));
    for (mut o, row) in out.rows_mut().into_iter().zip(profiles.rows()) {
        for (j, v) in o.iter_mut().enumerate() {
            let x = j as f64 / (points - 1) as f64 * (l - 1) as f64;
            let i = (x.floor() as usize).min(l - 2);
            let f = x - i as f64;
            *v = row[i] * (1.0 - f) + row[i + 1] * f;
        }
    }
    Ok(out)
}

/// Layer subsets of the paper's Table 5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerSubset {
    First,
    Middle,
    Last,
    FirstMiddleLast,
    All,
}

impl LayerSubset {
    pub const ALL_SUBSETS: [LayerSubset; 5] = [
        LayerSubset::First,
        LayerSubset::Middle,
        LayerSubset::Last,
        LayerSubset::FirstMiddleLast,
        LayerSubset::All,
    ];

    /// Column indices for a profile of `l` layers (middle = ⌊l / 2⌋).
    pub fn indices(self, l: usize) -> Vec<usize> {
        if l == 0 {
            return Vec::new();
        }
        match self {
            LayerSubset::First => vec![0],
            LayerSubset::Middle => vec![l / 2],
            LayerSubset::Last => vec![l - 1],
            LayerSubset::FirstMiddleLast => {
                let mut v = vec![0, l / 2, l - 1];
                v.dedup();
                v
            }
            LayerSubset::All => (0..l).collect(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LayerSubset::First => "first-only",
            LayerSubset::Middle => "middle-only",
            LayerSubset::Last => "last-only",
            LayerSubset::FirstMiddleLast => "first+middle+last",
            LayerSubset::All => "all",
        }
    }
}

/// The columns (layers) of a tokens × layers profile in `subset`.
pub fn select_layers(profile: ArrayView2<f64>, subset: LayerSubset) -> Array2<f64> {
    profile.select(Axis(1), &subset.indices(profile.ncols()))
}

/// Per-feature standardisation (mean 0, unit population variance), fitted on training rows only,
/// as scikit-learn's `StandardScaler`: constant features are centred and left unscaled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    pub mean: Array1<f64>,
    pub scale: Array1<f64>,
}

impl Standardizer {
    pub fn fit(x: ArrayView2<f64>) -> Result<Self> {
        let n = x.nrows();
        if n == 0 {
            return Err(Error::Data("cannot fit a standardizer on zero rows".into()));
        }
        let mean = x
            .mean_axis(Axis(0))
            .unwrap_or_else(|| Array1::zeros(x.ncols()));
        let var = x.var_axis(Axis(0), 0.0);
        let scale = var.mapv(|v| if v > 0.0 { v.sqrt() } else { 1.0 });
        Ok(Self { mean, scale })
    }

    pub fn transform(&self, x: ArrayView2<f64>) -> Array2<f64> {
        (&x - &self.mean) / &self.scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn aggregations() {
        let p = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]];
        assert_eq!(
            aggregate(p.view(), Aggregation::Concat).unwrap().to_vec(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
        );
        assert_eq!(
            aggregate(p.view(), Aggregation::Mean).unwrap().to_vec(),
            vec![5.0, 6.0]
        );
        // 5 tokens in 2 windows: sizes 3 and 2, as numpy.array_split.
        assert_eq!(
            aggregate(p.view(), Aggregation::Windows(2))
                .unwrap()
                .to_vec(),
            vec![3.0, 4.0, 8.0, 9.0]
        );
        assert!(aggregate(p.view(), Aggregation::Windows(6)).is_err());
        assert!(aggregate(p.view(), Aggregation::Windows(0)).is_err());
    }

    #[test]
    fn deltas_and_extremes() {
        let p = array![[1.0, 3.0, 2.0, 6.0, 0.0]];
        let d = delta(p.view());
        assert_eq!(d.row(0).to_vec(), vec![2.0, -1.0, 4.0, -6.0]);
        assert_eq!(largest_increase(d.row(0), 2), vec![2, 0]);
        assert_eq!(largest_decrease(d.row(0), 2), vec![3, 1]);
    }

    #[test]
    fn skip_choices() {
        // ΔH over H_0..H_4 (embedding included): dh[i] is the write of block i + 1.
        let dh = ndarray::array![2.0, -1.0, 4.0, -6.0];
        assert_eq!(
            blocks_to_skip(dh.view(), 1, SkipStrategy::Expansion, 2),
            vec![3, 1]
        );
        assert_eq!(
            blocks_to_skip(dh.view(), 1, SkipStrategy::Pruning, 1),
            vec![4]
        );
        // ΔH over the block layers alone starts at block 2.
        assert_eq!(
            blocks_to_skip(dh.view(), 2, SkipStrategy::Expansion, 2),
            vec![4, 2]
        );
        let r = blocks_to_skip(dh.view(), 1, SkipStrategy::Random { seed: 1 }, 3);
        assert_eq!(r.len(), 3);
        assert!(r.iter().all(|&b| (1..=4).contains(&b)));
        assert_eq!(
            r,
            blocks_to_skip(dh.view(), 1, SkipStrategy::Random { seed: 1 }, 3)
        );
    }

    #[test]
    fn depth_normalisation_interpolates_linearly() {
        let p = array![[0.0, 10.0, 20.0]];
        let n = depth_normalize(p.view(), 5).unwrap();
        assert_eq!(n.row(0).to_vec(), vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        let same = depth_normalize(p.view(), 3).unwrap();
        assert_eq!(same, p);
        assert!(depth_normalize(p.view(), 1)
            .unwrap_err()
            .to_string()
            .contains("at least 2"));
    }

    #[test]
    fn layer_subsets() {
        assert_eq!(LayerSubset::FirstMiddleLast.indices(30), vec![0, 15, 29]);
        assert_eq!(LayerSubset::Middle.indices(18), vec![9]);
        let p = array![[1.0, 2.0, 3.0, 4.0]];
        assert_eq!(select_layers(p.view(), LayerSubset::Last), array![[4.0]]);
    }

    #[test]
    fn standardizer_matches_population_statistics() {
        let x = array![[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]];
        let s = Standardizer::fit(x.view()).unwrap();
        assert_eq!(s.mean.to_vec(), vec![3.0, 5.0]);
        assert!((s.scale[0] - (8.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert_eq!(s.scale[1], 1.0);
        let z = s.transform(x.view());
        assert!((z[[0, 0]] + 1.224744871391589).abs() < 1e-12);
        assert_eq!(z.column(1).to_vec(), vec![0.0, 0.0, 0.0]);
    }
}
