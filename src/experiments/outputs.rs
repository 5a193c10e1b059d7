//! What experiments write beside `result.json` and the pieces their results share: the feature
//! matrix of `profiles.npy` and its layout (`index.json`), kNN scores, 2-D projections, mean ± std
//! profile bands, and the checks their `finish` starts with.

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use super::settings::ExperimentConfig;
use super::store::{Record, WorkItem};
use crate::analysis::{KnnCvConfig, KnnCvResult, Labels, Projection};
use crate::error::{Error, Result};
use crate::plots::Band;
use crate::profile::{aggregate, Aggregation, DepthSummary};

/// How a row of `profiles.npy` is laid out (stored in `index.json`): the row is the C-order
/// flattening of an array of `shape` along `axes`; entry j of the `layer` axis is layer
/// `first_layer + j` (layer ℓ: the residual after block ℓ; layer 0: the embedding output).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureLayout {
    /// e.g. `["token", "layer"]`, `["layer"]`, `["alpha", "window", "layer"]`.
    pub axes: Vec<String>,
    pub shape: Vec<usize>,
    /// `shannon`, or `renyi` with `alphas`.
    pub statistic: String,
    /// Rényi orders along the `alpha` axis (keys: `0.5`, `1` = Shannon, `5`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alphas: Vec<String>,
    /// How the per-token profiles were combined: `concat`, `mean` or `windows`.
    pub aggregation: Aggregation,
    /// The layer of the first entry along `layer`: 1 (the first block's output), or 0 where the
    /// embedding output was measured.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub first_layer: usize,
}

fn one() -> usize {
    1
}

fn is_one(x: &usize) -> bool {
    *x == 1
}

impl FeatureLayout {
    /// Per-token profiles combined by `aggregation` (concat: token × layer; mean: layer).
    pub fn tokens_by_layers(
        tokens: usize,
        layers: usize,
        statistic: &str,
        aggregation: Aggregation,
    ) -> Self {
        let (axes, shape) = match aggregation {
            Aggregation::Concat => (vec!["token", "layer"], vec![tokens, layers]),
            Aggregation::Mean => (vec!["layer"], vec![layers]),
            Aggregation::Windows(w) => (vec!["window", "layer"], vec![w, layers]),
        };
        Self {
            axes: axes.into_iter().map(String::from).collect(),
            shape,
            statistic: statistic.into(),
            alphas: Vec::new(),
            aggregation,
            first_layer: 1,
        }
    }

    pub fn n_features(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The rows of `profiles.npy` with their ids and labels (`index.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Features {
    pub ids: Vec<String>,
    pub labels: Vec<String>,
    pub layout: FeatureLayout,
    #[serde(skip)]
    pub rows: Vec<f64>,
}

impl Features {
    pub fn new(layout: FeatureLayout) -> Self {
        Self {
            ids: Vec::new(),
            labels: Vec::new(),
            layout,
            rows: Vec::new(),
        }
    }

    /// Appends `row` for `record`.
    pub fn push(&mut self, record: &Record, row: Vec<f64>) -> Result<()> {
        if row.len() != self.layout.n_features() {
            return Err(Error::Data(format!(
                "record {} gives {} features, the layout has {}",
                record.id,
                row.len(),
                self.layout.n_features()
            )));
        }
        self.ids.push(record.id.clone());
        self.labels.push(record.label.clone());
        self.rows.extend(row);
        Ok(())
    }

    pub fn n_rows(&self) -> usize {
        self.ids.len()
    }

    /// samples × features.
    pub fn matrix(&self) -> Result<Array2<f64>> {
        Array2::from_shape_vec((self.n_rows(), self.layout.n_features()), self.rows.clone())
            .map_err(|e| Error::Data(e.to_string()))
    }
}

/// `index.json`: what each row of `profiles.npy` is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileIndex {
    pub n_rows: usize,
    pub n_features: usize,
    pub ids: Vec<String>,
    pub labels: Vec<String>,
    pub layout: FeatureLayout,
}

impl From<&Features> for ProfileIndex {
    fn from(f: &Features) -> Self {
        Self {
            n_rows: f.n_rows(),
            n_features: f.layout.n_features(),
            ids: f.ids.clone(),
            labels: f.labels.clone(),
            layout: f.layout.clone(),
        }
    }
}

/// Every record has `tokens` measured positions over the model's blocks; returns L.
pub fn check_depths(cfg: &ExperimentConfig, tokens: usize, records: &[Record]) -> Result<usize> {
    let l = cfg.model.n_layers;
    let t = tokens;
    if records.is_empty() {
        return Err(Error::Data("no records to analyse".into()));
    }
    for r in records {
        if r.profile.n_blocks != l || r.profile.positions.len() != t {
            return Err(Error::Data(format!(
                "record {} has {} positions × {} blocks, expected {t} × {l}",
                r.id,
                r.profile.positions.len(),
                r.profile.n_blocks
            )));
        }
    }
    Ok(l)
}

/// The kNN numbers a result keeps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KnnScore {
    pub k: usize,
    pub auc_mean: f64,
    pub auc_std: f64,
    pub baseline_auc_mean: f64,
    pub baseline_auc_std: f64,
    pub p_value: Option<f64>,
    pub f1_macro_mean: f64,
    pub auc_folds: Vec<f64>,
}

impl From<&KnnCvResult> for KnnScore {
    fn from(r: &KnnCvResult) -> Self {
        Self {
            k: r.k,
            auc_mean: r.auc_mean,
            auc_std: r.auc_std,
            baseline_auc_mean: r.baseline_auc_mean,
            baseline_auc_std: r.baseline_auc_std,
            p_value: r.p_value,
            f1_macro_mean: r.f1_macro_mean,
            auc_folds: r.auc_folds.clone(),
        }
    }
}

/// A 2-D projection with the label of each point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scatter2d {
    pub method: String,
    pub points: Vec<[f64; 2]>,
    pub labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained_variance_ratio: Option<Vec<f64>>,
}

impl Scatter2d {
    pub fn new(p: &Projection, labels: &[String]) -> Self {
        Self {
            method: p.method.clone(),
            points: p
                .coords
                .rows()
                .into_iter()
                .map(|r| [r[0], r.get(1).copied().unwrap_or(0.0)])
                .collect(),
            labels: labels.to_vec(),
            explained_variance_ratio: p.explained_variance_ratio.clone(),
        }
    }

    pub fn projection(&self) -> Projection {
        let mut coords = Array2::zeros((self.points.len(), 2));
        for (i, p) in self.points.iter().enumerate() {
            coords[[i, 0]] = p[0];
            coords[[i, 1]] = p[1];
        }
        Projection {
            method: self.method.clone(),
            coords,
            explained_variance_ratio: self.explained_variance_ratio.clone(),
            kl_divergence: None,
        }
    }
}

/// Labels for the kNN, with the per-class counts checked against the folds.
pub fn labels_for(features: &Features) -> Labels {
    Labels::encode(&features.labels)
}

/// Fails before any work when a kNN cross-validation with `knn`'s folds and each of `ks`
/// neighbours cannot run on these items' labels (a class with fewer members than folds, or k
/// larger than a training fold).
pub fn check_knn_feasible(knn: &KnnCvConfig, ks: &[usize], items: &[WorkItem]) -> Result<()> {
    let folds = knn.folds;
    let labels = Labels::encode(&items.iter().map(|i| i.label.as_str()).collect::<Vec<_>>());
    let split = crate::analysis::crossval::stratified_kfold(
        &labels.encoded,
        labels.n_classes(),
        folds,
        knn.seed,
    )?;
    let smallest_train = items.len() - split.iter().map(Vec::len).max().unwrap_or(0);
    for &k in ks {
        if k == 0 || k > smallest_train {
            return Err(Error::invalid(format!(
                "k = {k} neighbours cannot run on {} items in {folds} folds (a training fold has {smallest_train}); lower --k or --folds, or raise --n",
                items.len()
            )));
        }
    }
    Ok(())
}

/// Mean ± std over the records of each label of their token-averaged profiles (`matrices`: each
/// record's tokens × layers).
pub fn bands_by_label(
    records: &[Record],
    matrices: &[Array2<f64>],
    classes: &[String],
) -> Result<Vec<Band>> {
    let mut out = Vec::new();
    for c in classes {
        let rows: Vec<Vec<f64>> = records
            .iter()
            .zip(matrices)
            .filter(|(r, _)| &r.label == c)
            .map(|(_, m)| aggregate(m.view(), Aggregation::Mean).map(|a| a.to_vec()))
            .collect::<Result<_>>()?;
        let l = rows.first().map(Vec::len).unwrap_or(0);
        let m = Array2::from_shape_vec((rows.len(), l), rows.concat())
            .map_err(|e| Error::Data(e.to_string()))?;
        out.push(Band {
            name: c.clone(),
            mean: m.mean_axis(ndarray::Axis(0)).unwrap_or_default().to_vec(),
            std: m.std_axis(ndarray::Axis(0), 0.0).to_vec(),
            n: rows.len(),
        });
    }
    Ok(out)
}

/// The prediction depths of each label's records, in `classes` order; `None` when a record
/// carries none (written before depths existed) or a class has no records.
pub fn depths_by_label(records: &[Record], classes: &[String]) -> Option<Vec<DepthSummary>> {
    classes
        .iter()
        .map(|c| {
            DepthSummary::of(
                c.clone(),
                records.iter().filter(|r| &r.label == c).map(|r| &r.profile),
            )
        })
        .collect()
}

/// The Shannon matrix (tokens × layers) of every record.
pub fn shannon_matrices(records: &[Record]) -> Result<Vec<Array2<f64>>> {
    records.iter().map(|r| r.profile.shannon_matrix()).collect()
}

/// Formats `x` (a fraction) as a percentage with two decimals.
pub fn pct(x: f64) -> String {
    crate::analysis::table::fmt_pct(x)
}

/// `greedy` / `sampled at T = 1`, plus `, chat template` when prompts were wrapped in it and
/// `, tuned lens <sha256 prefix>` when a tuned lens read them.
pub fn generation_label(cfg: &ExperimentConfig) -> String {
    let g = &cfg.generation;
    let mut s = if g.temperature > 0.0 {
        format!("sampled at T = {}", g.temperature)
    } else {
        "greedy".to_string()
    };
    if g.chat {
        s.push_str(", chat template");
    }
    // Logit-lens runs keep their labels (and their result.json bytes).
    if let Some(lens) = &cfg.lens {
        s.push_str(&format!(
            ", {} lens {}",
            lens.kind,
            &lens.sha256[..lens.sha256.len().min(8)]
        ));
    }
    s
}
