//! `formats` — do entropy profiles tell output formats apart, and does it hold across Rényi
//! orders? (Section 5.3, Table 3, Figure 5; Appendix A.5, Figure 9.)
//!
//! The topic-format prompts ([`crate::data::topics`]); `tokens` tokens generated per prompt (the
//! paper: 256); Rényi entropies of every order from the same generation (one pass); each profile
//! split into `windows` equal consecutive windows of tokens, each averaged (the paper: 8); a kNN
//! per order; PCA of the Shannon features; cosine-similarity matrices between profiles per order.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::experiment::Experiment;
use super::inputs::Topics;
use super::outputs::{
    bands_by_label, check_depths, check_knn_feasible, depths_by_label, generation_label, pct, FeatureLayout,
    Features, KnnScore, Scatter2d,
};
use super::plan::{Plan, PlanOption};
use super::settings::{ExperimentConfig, Protocol, Scale, StatSettings, alpha_keys, parse_alpha_keys};
use super::store::{Record, WorkItem};
use crate::analysis::{knn_cross_validate, pca, KnnCvConfig, Labels, Table};
use crate::error::{Error, Result};
use crate::lens::{alpha_key, StatSpec};
use crate::plots::{
    cosine_similarity, matrix_std, lens_fit_chart, prediction_depth_curves, profile_bands, projection_scatter, similarity_panels, Band,
    Chart,
};
use crate::profile::{aggregate, Aggregation, DepthSummary, LensFit};
use crate::runner::Profiler;

/// Table 3: format kNN ROC-AUC (%) per Rényi order: model, α, AUC, std.
pub const TABLE3_FORMATS: [(&str, f64, f64, f64); 6] = [
    ("Gemma-2-2B-it", 0.5, 97.3, 1.6),
    ("Gemma-2-2B-it", 1.0, 98.7, 1.1),
    ("Gemma-2-2B-it", 5.0, 98.4, 1.7),
    ("Llama-3.2-1B-it", 0.5, 97.8, 1.6),
    ("Llama-3.2-1B-it", 1.0, 97.8, 2.4),
    ("Llama-3.2-1B-it", 5.0, 96.6, 2.6),
];

/// The experiment (registered as `formats`).
pub struct Formats;

/// What `formats` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormatsSpec {
    /// Topics, each prompted in the three formats.
    pub per_format: usize,
    /// Tokens generated per prompt.
    pub tokens: usize,
    /// Equal windows of tokens averaged into the features.
    pub windows: usize,
    /// Rényi orders (`1` is Shannon).
    pub alphas: Vec<String>,
    pub knn: KnnCvConfig,
    /// Samples in the similarity matrices drawn (the first ones, in item order).
    pub similarity_samples: usize,
}

impl FormatsSpec {
    fn orders(&self) -> Result<Vec<f64>> {
        parse_alpha_keys(&self.alphas)
    }
}

impl Experiment for Formats {
    const NAME: &'static str = "formats";
    const PAPER: &'static str = "Table 3, Figures 5 and 9";
    const SUMMARY: &'static str =
        "output formats told apart by a kNN on windowed profiles, per Rényi order";
    const OPTIONS: &'static [PlanOption] = &[
        PlanOption::Data,
        PlanOption::Chat,
        PlanOption::Sampling,
        PlanOption::Tokens,
        PlanOption::K,
        PlanOption::Folds,
        PlanOption::Alphas,
        PlanOption::Windows,
        PlanOption::Kl,
    ];
    type Spec = FormatsSpec;
    type Result = FormatsResult;
    type Input = Topics;
    type Instrument = Profiler;

    fn spec(plan: &Plan) -> Result<FormatsSpec> {
        if plan.protocol == Protocol::Authors {
            return Err(Error::invalid(
                "formats has no authors' protocol: the authors' generation is the paper's (greedy, 256 tokens, 8 windows), and their released classifier scores accuracy with k = 3/5/7 on unshuffled folds, not Table 3's ROC-AUC (docs/results.md); use --protocol paper",
            ));
        }
        let (per_format, tokens) = match plan.scale {
            Scale::Smoke => (12, 16),
            Scale::Paper => (150, 256),
        };
        let alphas = plan.alphas.clone().unwrap_or_else(|| vec![0.5, 1.0, 5.0]);
        if alphas.is_empty() {
            return Err(Error::invalid(
                "formats needs at least one Rényi order (--alpha)",
            ));
        }
        let spec = FormatsSpec {
            per_format: plan.n.unwrap_or(per_format),
            tokens: plan.tokens.unwrap_or(tokens),
            windows: plan.windows.unwrap_or(8),
            alphas: alpha_keys(&alphas),
            knn: plan.knn(),
            similarity_samples: 30,
        };
        if spec.per_format == 0 {
            return Err(Error::invalid("formats needs at least one topic (--n)"));
        }
        if spec.windows == 0 || spec.tokens < spec.windows {
            return Err(Error::invalid(format!(
                "{} tokens cannot be split into {} windows; generate at least as many tokens as windows",
                spec.tokens, spec.windows
            )));
        }
        let mut seen = alphas.clone();
        seen.sort_by(f64::total_cmp);
        seen.dedup();
        if seen.len() != alphas.len() {
            return Err(Error::invalid("each Rényi order may be given once"));
        }
        Ok(spec)
    }

    fn tokens(spec: &FormatsSpec) -> usize {
        spec.tokens
    }

    /// The topic-format prompts, topic-major.
    fn items(_: &ExperimentConfig, spec: &FormatsSpec, topics: &Topics) -> Result<Vec<WorkItem>> {
        topics.format_items(spec.per_format)
    }

    /// Shannon plus every other order of the spec.
    fn stat_spec(stats: &StatSettings, spec: &FormatsSpec) -> Result<StatSpec> {
        let others: Vec<f64> = spec.orders()?.into_iter().filter(|&a| a != 1.0).collect();
        stats.stat_spec(&others)
    }

    fn check_feasible(_: &ExperimentConfig, spec: &FormatsSpec, items: &[WorkItem]) -> Result<()> {
        check_knn_feasible(&spec.knn, &[spec.knn.k], items)
    }

    fn finish(
        cfg: &ExperimentConfig,
        spec: &FormatsSpec,
        records: &[Record],
    ) -> Result<(FormatsResult, Features)> {
        finish(cfg, spec, records)
    }

    fn comparison(results: &[&FormatsResult]) -> Vec<Table> {
        vec![FormatsResult::comparison(results)]
    }

    fn tables(result: &FormatsResult) -> Vec<Table> {
        result.tables()
    }

    fn charts(result: &FormatsResult) -> Result<Vec<Chart>> {
        result.charts()
    }
}

/// Figure 9 for one order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Similarity {
    pub alpha: String,
    /// σ of the cosine-similarity matrix over every sample, and over the drawn subset.
    pub sigma_all: f64,
    pub sigma_subset: f64,
    /// The subset's matrix (row-major).
    pub matrix: Vec<Vec<f64>>,
}

/// `result.json` of `formats`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormatsResult {
    pub experiment: String,
    pub model: String,
    /// How the tokens were generated: `greedy` or `sampled at T = …`, with or without the chat
    /// template (a run's other settings are in its config.json).
    #[serde(default)]
    pub generation: String,
    pub n_samples: usize,
    pub n_classes: usize,
    pub classes: Vec<String>,
    pub tokens: usize,
    pub windows: usize,
    /// Table 3: the kNN per Rényi order (`"0.5"`, `"1"` = Shannon, `"5"`).
    pub per_alpha: BTreeMap<String, KnnScore>,
    /// Figure 9.
    pub similarity: Vec<Similarity>,
    /// Ids of the samples in the similarity matrices.
    pub similarity_ids: Vec<String>,
    /// Figure 5: PCA of the windowed Shannon (or first order's) features.
    pub pca: Scatter2d,
    /// Per format, the mean over prompts of the token-averaged Shannon profile ± std.
    pub mean_profiles: Vec<Band>,
    /// Prediction depth of the measured tokens, per format (absent for records written before depths
    /// existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction_depth: Option<Vec<DepthSummary>>,
    /// The lens's fit on the measured tokens (mean KL to the final distribution and calibration
    /// gap per block), when the run measured KL (`--kl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lens_fit: Option<LensFit>,
}

/// Computes the result from the records (sorted by item).
pub fn finish(
    cfg: &ExperimentConfig,
    spec: &FormatsSpec,
    records: &[Record],
) -> Result<(FormatsResult, Features)> {
    let l = check_depths(cfg, spec.tokens, records)?;
    let orders = spec.orders()?;
    let w = spec.windows;
    let mut layout = FeatureLayout {
        axes: vec!["alpha".into(), "window".into(), "layer".into()],
        shape: vec![orders.len(), w, l],
        statistic: "renyi".into(),
        alphas: spec.alphas.clone(),
        aggregation: Aggregation::Windows(w),
        first_layer: 1,
    };
    if orders == [1.0] {
        layout.statistic = "shannon".into();
    }
    let mut features = Features::new(layout);
    let mut per_order: Vec<Vec<Vec<f64>>> = vec![Vec::new(); orders.len()];
    for r in records {
        let mut row = Vec::with_capacity(orders.len() * w * l);
        for (k, &a) in orders.iter().enumerate() {
            let m = r.profile.renyi_matrix(a)?;
            let f = aggregate(m.view(), Aggregation::Windows(w))?.to_vec();
            row.extend_from_slice(&f);
            per_order[k].push(f);
        }
        features.push(r, row)?;
    }
    let labels = Labels::encode(&features.labels);
    let n = records.len();
    let d = w * l;
    let matrices: Vec<ndarray::Array2<f64>> = per_order
        .into_iter()
        .map(|rows| {
            ndarray::Array2::from_shape_vec((n, d), rows.concat())
                .map_err(|e| Error::Data(e.to_string()))
        })
        .collect::<Result<_>>()?;
    let mut per_alpha = BTreeMap::new();
    for (&a, x) in orders.iter().zip(&matrices) {
        let r = knn_cross_validate(x.view(), &labels, &spec.knn)?;
        per_alpha.insert(alpha_key(a), KnnScore::from(&r));
    }
    let m = spec.similarity_samples.min(n);
    let similarity = orders
        .iter()
        .zip(&matrices)
        .map(|(&a, x)| {
            let all = cosine_similarity(x.view());
            let sub = all.slice(ndarray::s![..m, ..m]).to_owned();
            Similarity {
                alpha: alpha_key(a),
                sigma_all: matrix_std(all.view()),
                sigma_subset: matrix_std(sub.view()),
                matrix: sub.rows().into_iter().map(|r| r.to_vec()).collect(),
            }
        })
        .collect();
    let shannon_k = orders.iter().position(|&a| a == 1.0).unwrap_or(0);
    let projection = pca(matrices[shannon_k].view(), 2)?;
    let shannon: Vec<ndarray::Array2<f64>> = records
        .iter()
        .map(|r| r.profile.shannon_matrix())
        .collect::<Result<_>>()?;
    let result = FormatsResult {
        experiment: "formats".into(),
        model: cfg.model.name.clone(),
        generation: generation_label(cfg),
        n_samples: n,
        n_classes: labels.n_classes(),
        classes: labels.classes.clone(),
        tokens: spec.tokens,
        windows: w,
        per_alpha,
        similarity,
        similarity_ids: features.ids[..m].to_vec(),
        pca: Scatter2d::new(&projection, &features.labels),
        mean_profiles: bands_by_label(records, &shannon, &labels.classes)?,
        prediction_depth: depths_by_label(records, &labels.classes),
        lens_fit: LensFit::of(records.iter().map(|r| &r.profile)),
    };
    Ok((result, features))
}

impl FormatsResult {
    /// Our AUCs per order beside the paper's Table 3, for one or more models.
    pub fn comparison(results: &[&FormatsResult]) -> Table {
        let mut t = Table::new(
            "Output formats (Table 3): kNN ROC-AUC (%) per Rényi order, ours beside the paper's",
            &["model", "α", "kNN AUC (3 classes)", "dummy AUC", "source"],
        );
        for r in results {
            for (a, s) in &r.per_alpha {
                t.row(vec![
                    r.model.clone(),
                    a.clone(),
                    format!("{} ± {}", pct(s.auc_mean), pct(s.auc_std)),
                    format!("{} ± {}", pct(s.baseline_auc_mean), pct(s.baseline_auc_std)),
                    format!(
                        "ours: {} prompts, {} tokens {}, {} windows",
                        r.n_samples, r.tokens, r.generation, r.windows
                    ),
                ]);
            }
        }
        for (m, a, auc, sd) in TABLE3_FORMATS {
            t.row(vec![
                m.into(),
                alpha_key(a),
                format!("{auc:.1} ± {sd:.1}"),
                "—".into(),
                "paper".into(),
            ]);
        }
        t
    }

    /// The kNN per order and Figure 9's σ.
    pub fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            format!(
                "kNN per Rényi order (k = {}, stratified 10-fold CV) and σ of the cosine-similarity matrices",
                self.per_alpha.values().next().map(|s| s.k).unwrap_or(0)
            ),
            &["α", "AUC (%)", "dummy AUC (%)", "p-value", "macro F1 (%)", "σ all", "σ subset"],
        );
        for (a, s) in &self.per_alpha {
            let sim = self.similarity.iter().find(|x| &x.alpha == a);
            t.row(vec![
                a.clone(),
                format!("{} ± {}", pct(s.auc_mean), pct(s.auc_std)),
                format!("{} ± {}", pct(s.baseline_auc_mean), pct(s.baseline_auc_std)),
                s.p_value
                    .map(|p| format!("{p:.2e}"))
                    .unwrap_or_else(|| "n/a".into()),
                pct(s.f1_macro_mean),
                sim.map(|x| format!("{:.3}", x.sigma_all))
                    .unwrap_or_default(),
                sim.map(|x| format!("{:.3}", x.sigma_subset))
                    .unwrap_or_default(),
            ]);
        }
        vec![t]
    }

    /// Figure 5 (PCA), Figure 9 (similarity matrices) and the mean profile per format.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        let alphas = parse_alpha_keys(
            &self
                .similarity
                .iter()
                .map(|s| s.alpha.clone())
                .collect::<Vec<_>>(),
        )?;
        let sims: Vec<ndarray::Array2<f64>> = self
            .similarity
            .iter()
            .map(|s| {
                let n = s.matrix.len();
                ndarray::Array2::from_shape_vec((n, n), s.matrix.concat())
                    .map_err(|e| Error::Data(e.to_string()))
            })
            .collect::<Result<_>>()?;
        let mut charts = vec![
            projection_scatter(&self.pca.projection(), &self.pca.labels, None)?,
            similarity_panels(&alphas, &sims)?,
            profile_bands(&self.mean_profiles, "Shannon entropy (nats)")?,
        ];
        if let Some(d) = &self.prediction_depth {
            charts.push(prediction_depth_curves(d)?);
        }
        if let Some(fit) = &self.lens_fit {
            charts.push(lens_fit_chart(fit)?);
        }
        Ok(charts)
    }
}
