//! `tasks` — do entropy profiles tell task types apart? (Section 5.2, Table 2, Figure 10; the
//! layer-subset study of Appendix A.3, Table 5.)
//!
//! TinyStories stories with a generative, syntactic or semantic instruction
//! ([`crate::data::tinystories`]); `tokens` tokens are generated per prompt; the per-token Shannon
//! profiles are concatenated (the paper's text) or averaged (`--protocol authors`, the authors'
//! code for Table 2); a kNN (k = 29, 10-fold stratified CV, seed 42) gives the one-vs-rest ROC-AUC
//! against a stratified dummy, with a paired t-test over folds. Table 5 repeats the kNN (k = 11) on
//! the first, middle and last blocks, the three together, and all blocks.

use serde::{Deserialize, Serialize};

use super::experiment::Experiment;
use super::inputs::Stories;
use super::outputs::{
    bands_by_label, check_depths, check_knn_feasible, depths_by_label, generation_label, labels_for, pct,
    shannon_matrices, FeatureLayout, Features, KnnScore, Scatter2d,
};
use super::plan::{Plan, PlanOption};
use super::settings::{ExperimentConfig, Generation, Protocol, Scale, token_aggregation};
use super::store::{Record, WorkItem};
use crate::analysis::{knn_cross_validate, pca, KnnCvConfig, KnnCvResult, Table};
use crate::data::tinystories::{authors_task_prompts, task_prompts};
use crate::error::{Error, Result};
use crate::plots::{lens_fit_chart, prediction_depth_curves, profile_bands, projection_scatter, Band, Chart};
use crate::profile::{aggregate, select_layers, Aggregation, DepthSummary, LensFit, LayerSubset};
use crate::runner::Profiler;

/// Table 2: task-type kNN ROC-AUC (%, mean ± std over 10 folds): model, size, AUC, std.
pub const TABLE2_TASKS: [(&str, &str, f64, f64); 6] = [
    ("Gemma-2-it", "2.1B", 97.66, 0.47),
    ("Gemma-2-it", "8.9B", 98.38, 0.50),
    ("Llama-3.2-it", "1B", 94.94, 0.79),
    ("Llama-3.2-it", "3B", 94.77, 0.93),
    ("Llama-3-it", "8B", 96.10, 0.67),
    ("Phi-3", "3.6B", 97.07, 0.87),
];

/// Table 5 (Gemma-2-2B-it, k = 11, sampled generation): layer subset, AUC (%), std.
pub const TABLE5_SUBSETS: [(&str, f64, f64); 5] = [
    ("first-only", 68.34, 2.68),
    ("middle-only", 78.83, 3.07),
    ("last-only", 76.78, 2.36),
    ("first+middle+last", 86.13, 1.41),
    ("all", 90.49, 1.76),
];

/// The experiment (registered as `tasks`).
pub struct Tasks;

/// What `tasks` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TasksSpec {
    /// Prompts per task type.
    pub per_task: usize,
    /// Tokens generated per prompt.
    pub tokens: usize,
    /// How the per-token profiles become one feature vector.
    pub aggregation: Aggregation,
    /// The main kNN diagnostic (Table 2).
    pub knn: KnnCvConfig,
    /// Neighbours of the layer-subset study (Table 5: k = 11).
    pub subset_k: usize,
}

impl Experiment for Tasks {
    const NAME: &'static str = "tasks";
    const PAPER: &'static str = "Tables 2 and 5, Figure 10";
    const SUMMARY: &'static str = "TinyStories task types told apart by a kNN on the profiles";
    const OPTIONS: &'static [PlanOption] = &[
        PlanOption::Data,
        PlanOption::Chat,
        PlanOption::Sampling,
        PlanOption::Tokens,
        PlanOption::K,
        PlanOption::Folds,
        PlanOption::Kl,
    ];
    type Spec = TasksSpec;
    type Result = TasksResult;
    type Input = Stories;
    type Instrument = Profiler;

    fn spec(plan: &Plan) -> Result<TasksSpec> {
        let per_task = match plan.scale {
            Scale::Smoke => 12,
            Scale::Paper => 800,
        };
        let spec = TasksSpec {
            per_task: plan.n.unwrap_or(per_task),
            // The authors average over 8 generated tokens (Tables 2 and 4).
            tokens: plan.tokens.unwrap_or(8),
            aggregation: token_aggregation(plan.protocol),
            knn: plan.knn(),
            subset_k: plan.k.map(|k| k.min(11)).unwrap_or(11),
        };
        if spec.per_task == 0 || spec.tokens == 0 {
            return Err(Error::invalid(
                "tasks needs at least one prompt per task (--n) and one generated token (--tokens)",
            ));
        }
        Ok(spec)
    }

    fn tokens(spec: &TasksSpec) -> usize {
        spec.tokens
    }

    /// The authors' TinyStories runner samples at temperature 1 (`run_experiments_ts.py`).
    fn generation(plan: &Plan, _: &TasksSpec) -> Result<Generation> {
        plan.generation(match plan.protocol {
            Protocol::Paper => 0.0,
            Protocol::Authors => 1.0,
        })
    }

    /// The paper's prompts (story-major, three tasks per story), or the authors' generator under
    /// `--protocol authors`.
    fn items(cfg: &ExperimentConfig, spec: &TasksSpec, stories: &Stories) -> Result<Vec<WorkItem>> {
        let prompts = match cfg.protocol {
            Protocol::Paper => task_prompts(&stories.0, spec.per_task, cfg.seed)?,
            Protocol::Authors => authors_task_prompts(&stories.0, spec.per_task, cfg.seed)?,
        };
        Ok(prompts
            .into_iter()
            .enumerate()
            .map(|(index, p)| WorkItem {
                index,
                id: format!(
                    "story{:04}-{}-{}-{}",
                    p.story_index,
                    p.task.name(),
                    p.template.name(),
                    p.phrasing + 1
                ),
                label: p.task.name().into(),
                prompt: p.prompt,
                meta: [
                    ("template".to_string(), p.template.name().into()),
                    ("phrasing".to_string(), p.phrasing.into()),
                    ("story".to_string(), p.story_index.into()),
                ]
                .into(),
            })
            .collect())
    }

    fn check_feasible(_: &ExperimentConfig, spec: &TasksSpec, items: &[WorkItem]) -> Result<()> {
        check_knn_feasible(&spec.knn, &[spec.knn.k, spec.subset_k], items)
    }

    fn finish(
        cfg: &ExperimentConfig,
        spec: &TasksSpec,
        records: &[Record],
    ) -> Result<(TasksResult, Features)> {
        finish(cfg, spec, records)
    }

    fn comparison(results: &[&TasksResult]) -> Vec<Table> {
        TasksResult::comparison(results)
    }

    fn tables(result: &TasksResult) -> Vec<Table> {
        result.tables()
    }

    fn charts(result: &TasksResult) -> Result<Vec<Chart>> {
        result.charts()
    }
}

/// The kNN AUC of one layer subset (Table 5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubsetScore {
    /// Blocks used (1-based).
    pub blocks: Vec<usize>,
    #[serde(flatten)]
    pub score: KnnScore,
}

/// Table 5's five subsets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerSubsets {
    pub first: SubsetScore,
    pub middle: SubsetScore,
    pub last: SubsetScore,
    pub first_middle_last: SubsetScore,
    pub all: SubsetScore,
}

impl LayerSubsets {
    fn get(&self, s: LayerSubset) -> &SubsetScore {
        match s {
            LayerSubset::First => &self.first,
            LayerSubset::Middle => &self.middle,
            LayerSubset::Last => &self.last,
            LayerSubset::FirstMiddleLast => &self.first_middle_last,
            LayerSubset::All => &self.all,
        }
    }
}

/// `result.json` of `tasks`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TasksResult {
    pub experiment: String,
    pub model: String,
    /// How the tokens were generated: `greedy` or `sampled at T = …`, with or without the chat
    /// template (a run's other settings are in its config.json).
    #[serde(default)]
    pub generation: String,
    pub n_samples: usize,
    pub n_features: usize,
    pub n_classes: usize,
    pub classes: Vec<String>,
    pub tokens: usize,
    pub aggregation: Aggregation,
    /// The kNN (Table 2): ROC-AUC mean and std over folds, the stratified dummy's, the paired
    /// t-test of fold AUCs.
    pub auc_mean: f64,
    pub auc_std: f64,
    pub baseline_auc_mean: f64,
    pub baseline_auc_std: f64,
    pub p_value: Option<f64>,
    pub f1_macro_mean: f64,
    pub knn: KnnCvResult,
    /// Table 5.
    pub layer_subsets: LayerSubsets,
    /// Figure 10: per task, the mean over prompts of the token-averaged profile ± std.
    pub mean_profiles: Vec<Band>,
    /// PCA of the features.
    pub pca: Scatter2d,
    /// Prediction depth of the measured tokens, per task (absent for records written before depths
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
    spec: &TasksSpec,
    records: &[Record],
) -> Result<(TasksResult, Features)> {
    let l = check_depths(cfg, spec.tokens, records)?;
    let matrices = shannon_matrices(records)?;
    let mut features = Features::new(FeatureLayout::tokens_by_layers(
        spec.tokens,
        l,
        "shannon",
        spec.aggregation,
    ));
    for (r, m) in records.iter().zip(&matrices) {
        features.push(r, aggregate(m.view(), spec.aggregation)?.to_vec())?;
    }
    let x = features.matrix()?;
    let labels = labels_for(&features);
    let knn = knn_cross_validate(x.view(), &labels, &spec.knn)?;
    let subset_cfg = KnnCvConfig {
        k: spec.subset_k,
        ..spec.knn.clone()
    };
    let subset = |s: LayerSubset| -> Result<SubsetScore> {
        let rows: Vec<Vec<f64>> = matrices
            .iter()
            .map(|m| {
                aggregate(select_layers(m.view(), s).view(), spec.aggregation).map(|a| a.to_vec())
            })
            .collect::<Result<_>>()?;
        let d = rows.first().map(Vec::len).unwrap_or(0);
        let xs = ndarray::Array2::from_shape_vec((rows.len(), d), rows.concat())
            .map_err(|e| Error::Data(e.to_string()))?;
        let r = knn_cross_validate(xs.view(), &labels, &subset_cfg)?;
        Ok(SubsetScore {
            blocks: s.indices(l).into_iter().map(|j| j + 1).collect(),
            score: KnnScore::from(&r),
        })
    };
    let layer_subsets = LayerSubsets {
        first: subset(LayerSubset::First)?,
        middle: subset(LayerSubset::Middle)?,
        last: subset(LayerSubset::Last)?,
        first_middle_last: subset(LayerSubset::FirstMiddleLast)?,
        all: subset(LayerSubset::All)?,
    };
    let mean_profiles = bands_by_label(records, &matrices, &labels.classes)?;
    let projection = pca(x.view(), 2)?;
    let result = TasksResult {
        experiment: "tasks".into(),
        model: cfg.model.name.clone(),
        generation: generation_label(cfg),
        n_samples: knn.n_samples,
        n_features: knn.n_features,
        n_classes: knn.n_classes,
        classes: labels.classes.clone(),
        tokens: spec.tokens,
        aggregation: spec.aggregation,
        auc_mean: knn.auc_mean,
        auc_std: knn.auc_std,
        baseline_auc_mean: knn.baseline_auc_mean,
        baseline_auc_std: knn.baseline_auc_std,
        p_value: knn.p_value,
        f1_macro_mean: knn.f1_macro_mean,
        knn,
        layer_subsets,
        mean_profiles,
        pca: Scatter2d::new(&projection, &features.labels),
        prediction_depth: depths_by_label(records, &labels.classes),
        lens_fit: LensFit::of(records.iter().map(|r| &r.profile)),
    };
    Ok((result, features))
}

impl TasksResult {
    /// Our AUCs beside the paper's Tables 2 and 5, for one or more models.
    pub fn comparison(results: &[&TasksResult]) -> Vec<Table> {
        let mut t2 = Table::new(
            "Task types (Table 2): kNN ROC-AUC (%), ours beside the paper's",
            &[
                "model",
                "size",
                "kNN AUC (3 classes)",
                "dummy AUC",
                "source",
            ],
        );
        for r in results {
            t2.row(vec![
                r.model.clone(),
                "—".into(),
                format!("{} ± {}", pct(r.auc_mean), pct(r.auc_std)),
                format!("{} ± {}", pct(r.baseline_auc_mean), pct(r.baseline_auc_std)),
                format!(
                    "ours: {} prompts, {} tokens {}, {}",
                    r.n_samples,
                    r.tokens,
                    r.generation,
                    aggregation_name(r.aggregation)
                ),
            ]);
        }
        for (m, size, auc, sd) in TABLE2_TASKS {
            t2.row(vec![
                m.into(),
                size.into(),
                format!("{auc:.2} ± {sd:.2}"),
                "—".into(),
                "paper".into(),
            ]);
        }
        let mut header = vec!["blocks".to_string()];
        header.extend(results.iter().map(|r| {
            if r.generation.contains("chat") {
                format!("{} (chat template)", r.model)
            } else {
                r.model.clone()
            }
        }));
        header.push("paper (Gemma-2-2B-it)".into());
        let refs: Vec<&str> = header.iter().map(String::as_str).collect();
        let k = results
            .first()
            .map(|r| r.layer_subsets.all.score.k)
            .unwrap_or(11);
        let mut t5 = Table::new(
            format!("Layer subsets (Table 5): kNN ROC-AUC (%), k = {k}, ours beside the paper's"),
            &refs,
        );
        for (s, (name, auc, sd)) in LayerSubset::ALL_SUBSETS.iter().zip(TABLE5_SUBSETS) {
            let mut row = vec![name.to_string()];
            for r in results {
                let ours = r.layer_subsets.get(*s);
                row.push(format!(
                    "{} ± {} ({})",
                    pct(ours.score.auc_mean),
                    pct(ours.score.auc_std),
                    blocks_text(&ours.blocks)
                ));
            }
            row.push(format!("{auc:.2} ± {sd:.2}"));
            t5.row(row);
        }
        t5.note(
            "the paper's Table 5 uses sampled generation; ours uses each run's generation settings",
        );
        vec![t2, t5]
    }

    /// The kNN result table.
    pub fn tables(&self) -> Vec<Table> {
        vec![self.knn.table()]
    }

    /// Figure 10, a PCA of the features and the prediction depth per task.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        let mut charts = vec![
            profile_bands(&self.mean_profiles, "Shannon entropy (nats)")?,
            projection_scatter(&self.pca.projection(), &self.pca.labels, None)?,
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

fn aggregation_name(a: Aggregation) -> String {
    match a {
        Aggregation::Concat => "concatenated".into(),
        Aggregation::Mean => "mean over tokens".into(),
        Aggregation::Windows(w) => format!("{w} windows"),
    }
}

fn blocks_text(blocks: &[usize]) -> String {
    if blocks.len() > 3 {
        format!("blocks {}–{}", blocks[0], blocks[blocks.len() - 1])
    } else {
        format!(
            "block{} {}",
            if blocks.len() > 1 { "s" } else { "" },
            blocks
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}
