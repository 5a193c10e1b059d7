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

use super::common::{check_depths, labels_for, pct, FeatureLayout, Features, KnnScore, Scatter2d};
use super::config::{token_aggregation, ExperimentConfig, Plan, Protocol, Scale};
use super::paper;
use super::store::{Record, WorkItem};
use crate::analysis::{knn_cross_validate, pca, KnnCvConfig, KnnCvResult, Table};
use crate::data::tinystories::{authors_task_prompts, task_prompts};
use crate::error::{Error, Result};
use crate::lens::StatSpec;
use crate::plots::{profile_bands, projection_scatter, Band, Chart};
use crate::profile::{aggregate, select_layers, Aggregation, LayerSubset};

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

impl TasksSpec {
    pub fn new(plan: &Plan) -> Result<Self> {
        let per_task = match plan.scale {
            Scale::Smoke => 12,
            Scale::Paper => 800,
        };
        let spec = Self {
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
}

/// The work items: the paper's prompts (story-major, three tasks per story), or the authors'
/// generator under `--protocol authors`.
pub fn items(
    spec: &TasksSpec,
    protocol: Protocol,
    seed: u64,
    stories: &[String],
) -> Result<Vec<WorkItem>> {
    let prompts = match protocol {
        Protocol::Paper => task_prompts(stories, spec.per_task, seed)?,
        Protocol::Authors => authors_task_prompts(stories, spec.per_task, seed)?,
    };
    Ok(prompts
        .into_iter()
        .enumerate()
        .map(|(index, p)| {
            let mut meta = serde_json::Map::new();
            meta.insert("template".into(), p.template.name().into());
            meta.insert("phrasing".into(), p.phrasing.into());
            meta.insert("story".into(), p.story_index.into());
            WorkItem {
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
                meta,
            }
        })
        .collect())
}

/// Shannon entropy only.
pub fn stat_spec(cfg: &ExperimentConfig) -> Result<StatSpec> {
    cfg.stats.stat_spec(&[])
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
}

fn shannon_matrices(records: &[Record]) -> Result<Vec<ndarray::Array2<f64>>> {
    records.iter().map(|r| r.profile.shannon_matrix()).collect()
}

/// Mean ± std over the records of each label of their token-averaged profiles.
pub(crate) fn bands_by_label(
    records: &[Record],
    matrices: &[ndarray::Array2<f64>],
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
        let m = ndarray::Array2::from_shape_vec((rows.len(), l), rows.concat())
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

/// Computes the result from the records (sorted by item).
pub fn finish(
    cfg: &ExperimentConfig,
    spec: &TasksSpec,
    records: &[Record],
) -> Result<(TasksResult, Features)> {
    let l = check_depths(cfg, records)?;
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
        generation: super::common::generation_label(cfg),
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
        for (m, size, auc, sd) in paper::TABLE2_TASKS {
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
        for (s, (name, auc, sd)) in LayerSubset::ALL_SUBSETS.iter().zip(paper::TABLE5_SUBSETS) {
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

    /// Figure 10 and a PCA of the features.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        Ok(vec![
            profile_bands(&self.mean_profiles, "Shannon entropy (nats)")?,
            projection_scatter(&self.pca.projection(), &self.pca.labels, None)?,
        ])
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
