//! `family` — do entropy profiles tell model families and sizes apart? (Section 5.1, Figures 3
//! and 4, Table 6.)
//!
//! Each model generates from a blank prompt (BOS alone; `--protocol authors`: BOS twice, as the
//! authors' notebook) `tokens` tokens sampled at temperature 0.7 (the authors: 32), `samples`
//! times (the authors: 64; seed + item index per sample). A sample's profile is its Shannon
//! profile averaged over the generated tokens; profiles of models of different depths are
//! brought onto one relative-depth axis by linear interpolation (B.1), Figure 4 overlays the
//! per-model means. Each interpolated profile is standardised on its own (B.1: "we standardise the
//! samples": per sample, z-scored over its depth points) before a kNN (k = 3) over 10 random
//! stratified 50/50 splits gives the macro F1 of the family and of the size bin (< 1B, 1-3B,
//! 3-5B, > 5B; Table 6). t-SNE (Figure 3) uses the authors' settings (perplexity 20, 300
//! iterations, PCA initialisation, seed 42; exact gradient) and, beside it, the library's
//! defaults (perplexity 30, 1000 iterations).
//!
//! Unlike the other experiments, one run covers several models: they are loaded one after the
//! other, and each record keeps its model's sha256 (checked on resume).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::experiment::{Batch, Cx, Experiment, Models};
use super::inputs::Blank;
use super::outputs::{FeatureLayout, Features, Scatter2d};
use super::plan::{Plan, PlanOption};
use super::settings::{ExperimentConfig, Generation, Protocol, Scale};
use super::several::{self, bands, f1, labelled, matrix, zscore, ModelItem, DEPTH_POINTS};
use super::store::{Record, WorkItem};
use crate::analysis::{tsne, Table, TsneConfig};
use crate::error::{Error, Result};
use crate::model::paper_models;
use crate::model::Architecture;
use crate::plots::{depth_normalized, profile_bands, projection_scatter, Band, Chart};
use crate::profile::depth_normalize;
use crate::runner::{ProfileRequest, Profiler, Sampling};

/// Table 6: kNN (k = 3) macro F1 (%) over 10 random 50/50 splits: task, mean, std.
pub const TABLE6_F1: [(&str, f64, f64); 2] =
    [("model family", 97.99, 0.66), ("model size", 96.31, 0.87)];

/// Sizes of the two offline models (not in the paper's registry), in billions of parameters.
const OFFLINE_SIZES: [(&str, f64); 2] = [("smollm2-135m", 0.135), ("gemma-3-270m", 0.268)];

/// The experiment (registered as `family`).
pub struct Family;

/// One model of the comparison, as far as the numbers depend on it (its path may differ).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FamilyModel {
    /// Registry short name, or the file or folder name.
    pub name: String,
    /// Parameters in billions, where known (registry, offline models); else the size F1 leaves
    /// the model out.
    pub params_b: Option<f64>,
}

/// What `family` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FamilySpec {
    pub models: Vec<FamilyModel>,
    /// Samples per model.
    pub samples: usize,
    /// Tokens sampled per sample.
    pub tokens: usize,
    /// BOS twice (the authors' notebook) instead of once.
    pub double_bos: bool,
    pub depth_points: usize,
    /// kNN neighbours and random 50/50 splits of Table 6.
    pub k: usize,
    pub splits: usize,
    pub tsne: TsneConfig,
}

/// The model list a plan names: `--models a,b` (registry names, Hub ids, files, folders;
/// `paper` expands to the registry's base models), else the two offline models (fetched).
pub fn model_sources(plan: &Plan) -> Result<Vec<String>> {
    several::model_sources(plan, &paper_list(), || {
        Ok(vec![
            crate::fetch::fetch_model(&crate::fetch::SMOLLM2)?
                .display()
                .to_string(),
            crate::fetch::fetch_model(&crate::fetch::GEMMA3)?
                .display()
                .to_string(),
        ])
    })
}

fn paper_list() -> Vec<String> {
    paper_models::PAPER_MODELS
        .iter()
        .filter(|r| !r.instruct)
        .map(|r| r.name.to_string())
        .collect()
}

/// The names of the models a plan compares, without downloading anything.
fn model_names(plan: &Plan) -> Result<Vec<String>> {
    several::model_sources(plan, &paper_list(), || {
        Ok([
            crate::fetch::SMOLLM2.file_name,
            crate::fetch::GEMMA3.file_name,
        ]
        .iter()
        .map(|f| f.to_string())
        .collect())
    })
}

/// The display name and known size of a model given as `source`.
pub fn describe_model(source: &str) -> FamilyModel {
    if let Some(r) = paper_models::lookup(source) {
        return FamilyModel {
            name: r.name.to_string(),
            params_b: Some(r.params_b),
        };
    }
    let name = several::model_name(source);
    let lower = name.to_ascii_lowercase();
    let params_b = OFFLINE_SIZES
        .iter()
        .find(|(k, _)| lower.contains(k))
        .map(|(_, p)| *p);
    FamilyModel { name, params_b }
}

/// The authors' t-SNE: perplexity 20, 300 iterations, PCA initialisation, seed 42.
pub fn authors_tsne() -> TsneConfig {
    TsneConfig {
        perplexity: 20.0,
        iterations: 300,
        seed: 42,
        ..TsneConfig::default()
    }
}

/// The family a model's architecture belongs to (`llama`, `gemma`, `qwen`, …); SmolLM2 is a
/// Llama-architecture model and counts as `llama`.
pub fn family_of(arch: Architecture) -> &'static str {
    match arch {
        Architecture::Gemma | Architecture::Gemma2 | Architecture::Gemma3 => "gemma",
        Architecture::Qwen2 | Architecture::Qwen3 => "qwen",
        Architecture::Llama => "llama",
        Architecture::Gpt2 => "gpt2",
        Architecture::Phi3 => "phi",
        Architecture::Mistral => "mistral",
        Architecture::GptNeoX => "gpt-neox",
        _ => "other",
    }
}

/// The size bin of Table 6.
pub fn size_bin(params_b: f64) -> &'static str {
    if params_b < 1.0 {
        "<1B"
    } else if params_b < 3.0 {
        "1-3B"
    } else if params_b <= 5.0 {
        "3-5B"
    } else {
        ">5B"
    }
}

impl Experiment for Family {
    const NAME: &'static str = "family";
    const PAPER: &'static str = "Figures 3 and 4, Table 6";
    const SUMMARY: &'static str =
        "model families and sizes told apart by blank-prompt profiles on relative depth";
    const OPTIONS: &'static [PlanOption] = &[
        PlanOption::Models,
        PlanOption::Sampling,
        PlanOption::Tokens,
        PlanOption::K,
    ];
    type Spec = FamilySpec;
    type Result = FamilyResult;
    type Input = Blank;
    type Instrument = Profiler;

    fn spec(plan: &Plan) -> Result<FamilySpec> {
        // Smoke: 24 samples over the two offline models are the fewest the authors' t-SNE
        // (perplexity 20) runs on; 16 tokens keep Gemma's 262k-token lens to a few minutes.
        let (samples, tokens) = match plan.scale {
            Scale::Smoke => (12, 16),
            Scale::Paper => (64, 32),
        };
        let models: Vec<FamilyModel> = model_names(plan)?
            .iter()
            .map(|s| describe_model(s))
            .collect();
        let spec = FamilySpec {
            models,
            samples: plan.n.unwrap_or(samples),
            tokens: plan.tokens.unwrap_or(tokens),
            double_bos: plan.protocol == Protocol::Authors,
            depth_points: DEPTH_POINTS,
            k: plan.k.unwrap_or(3),
            splits: 10,
            tsne: authors_tsne(),
        };
        if spec.samples == 0 || spec.tokens == 0 {
            return Err(Error::invalid(
                "family needs at least one sample per model (--n) and one token (--tokens)",
            ));
        }
        Ok(spec)
    }

    fn tokens(spec: &FamilySpec) -> usize {
        spec.tokens
    }

    fn models(plan: &Plan, spec: &FamilySpec) -> Result<Models> {
        let names: Vec<String> = spec.models.iter().map(|m| m.name.clone()).collect();
        several::named_models(&names, &model_sources(plan)?)
    }

    /// Sampled at temperature 0.7 (the authors' notebook), never in a chat template.
    fn generation(plan: &Plan, _: &FamilySpec) -> Result<Generation> {
        plan.generation(0.7)
    }

    /// Model-major: `samples` blank prompts per model.
    fn items(_: &ExperimentConfig, spec: &FamilySpec, _: &Blank) -> Result<Vec<WorkItem>> {
        let names: Vec<String> = spec.models.iter().map(|m| m.name.clone()).collect();
        Ok(several::items(&names, |_| {
            (0..spec.samples)
                .map(|s| ModelItem {
                    id: format!("s{s:03}"),
                    prompt: String::new(),
                    meta: BTreeMap::from([("sample".to_string(), s.into())]),
                })
                .collect()
        }))
    }

    /// The batch's samples from BOS (the authors: BOS twice), each seeded by seed + item index;
    /// records are labelled with the model's family.
    fn measure(cx: &Cx<'_, Self>, profiler: &mut Profiler, batch: &Batch<'_>) -> Result<Vec<Record>> {
        let token_ids = match (cx.spec.double_bos, profiler.tokenizer.bos_token_id()) {
            (true, Some(b)) => Some(vec![b, b]),
            (true, None) => {
                return Err(Error::invalid(format!(
                    "model {} has no BOS token, so the authors' double-BOS prompt cannot be built",
                    cx.model
                )))
            }
            _ => None,
        };
        let g = &cx.cfg.generation;
        let reqs: Vec<ProfileRequest> = batch
            .items()
            .iter()
            .map(|item| ProfileRequest {
                prompt: String::new(),
                generate: cx.spec.tokens,
                ignore_eos: true,
                add_bos: true,
                token_ids: token_ids.clone(),
                sampling: Sampling {
                    temperature: g.temperature,
                    sample_top_p: g.sample_top_p,
                    seed: cx.cfg.seed.wrapping_add(item.index as u64),
                },
                ..Default::default()
            })
            .collect();
        let profiles = profiler.run_batch(&reqs)?;
        let family = family_of(profiler.model.info().architecture);
        Ok(labelled(
            batch.keep_todo(batch.items().iter().zip(profiles), Record::new),
            family,
        ))
    }

    fn finish(
        cfg: &ExperimentConfig,
        spec: &FamilySpec,
        records: &[Record],
    ) -> Result<(FamilyResult, Features)> {
        finish(cfg, spec, records)
    }

    fn comparison(results: &[&FamilyResult]) -> Vec<Table> {
        vec![FamilyResult::comparison(results)]
    }

    fn tables(result: &FamilyResult) -> Vec<Table> {
        result.tables()
    }

    fn charts(result: &FamilyResult) -> Result<Vec<Chart>> {
        result.charts()
    }
}

/// One model in the result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub name: String,
    pub family: String,
    pub params_b: Option<f64>,
    pub size_bin: Option<String>,
    pub n_layers: usize,
    pub samples: usize,
}

/// `result.json` of `family`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FamilyResult {
    pub experiment: String,
    pub models: Vec<ModelSummary>,
    pub samples_per_model: usize,
    pub tokens: usize,
    pub temperature: f64,
    /// Macro F1 of the family (Table 6), mean and std over the splits; null with fewer than two
    /// families (see `notes`).
    pub f1_family_mean: Option<f64>,
    pub f1_family_std: Option<f64>,
    pub f1_size_mean: Option<f64>,
    pub f1_size_std: Option<f64>,
    pub k: usize,
    pub splits: usize,
    /// Standardisation of the kNN inputs: `per sample`.
    pub standardization: String,
    pub notes: Vec<String>,
    /// Per model: mean ± std over samples of the token-averaged profile, on blocks 1..=L.
    pub mean_profiles: Vec<Band>,
    /// The same on the relative-depth axis (Figure 4).
    pub depth_profiles: Vec<Band>,
    /// Figure 3: t-SNE with the authors' settings, and with the library's defaults.
    pub tsne: Option<Scatter2d>,
    pub tsne_defaults: Option<Scatter2d>,
}

/// Computes the result from the records (sorted by item).
pub fn finish(
    cfg: &ExperimentConfig,
    spec: &FamilySpec,
    records: &[Record],
) -> Result<(FamilyResult, Features)> {
    if records.is_empty() {
        return Err(Error::Data("no records to analyse".into()));
    }
    let d = spec.depth_points;
    let mut layout =
        FeatureLayout::tokens_by_layers(1, d, "shannon", crate::profile::Aggregation::Mean);
    layout.axes = vec!["relative_depth".into()];
    let mut features = Features::new(layout);
    let mut raw: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    let mut depth: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    let mut layers: BTreeMap<String, usize> = BTreeMap::new();
    let (mut fam_labels, mut size_labels, mut size_rows) = (Vec::new(), Vec::new(), Vec::new());
    let mut z_rows = Vec::new();
    for r in records {
        let model = r.meta_str("model").to_string();
        let m = r.profile.shannon_matrix()?;
        if m.nrows() != spec.tokens {
            return Err(Error::Data(format!(
                "record {} has {} positions, expected {}",
                r.id,
                m.nrows(),
                spec.tokens
            )));
        }
        let mean = m.mean_axis(ndarray::Axis(0)).unwrap_or_default();
        let row = ndarray::Array2::from_shape_vec((1, mean.len()), mean.to_vec())
            .map_err(|e| Error::Data(e.to_string()))?;
        let normalized = depth_normalize(row.view(), d)?.row(0).to_vec();
        features.push(r, normalized.clone())?;
        raw.entry(model.clone()).or_default().push(mean.to_vec());
        depth
            .entry(model.clone())
            .or_default()
            .push(normalized.clone());
        families.insert(model.clone(), r.label.clone());
        layers.insert(model.clone(), m.ncols());
        let z = zscore(&normalized);
        fam_labels.push(r.label.clone());
        let params = spec
            .models
            .iter()
            .find(|x| x.name == model)
            .and_then(|x| x.params_b);
        if let Some(p) = params {
            size_labels.push(size_bin(p).to_string());
            size_rows.push(z.clone());
        }
        z_rows.push(z);
    }
    let x = matrix(&z_rows, d)?;
    let mut notes = Vec::new();
    let (f1_family_mean, f1_family_std) = f1(
        &x,
        &fam_labels,
        (spec.k, spec.splits),
        cfg.seed,
        "family",
        &mut notes,
    )?;
    let (f1_size_mean, f1_size_std) = if size_rows.is_empty() {
        notes.push("size F1: no model of known size".into());
        (None, None)
    } else {
        if size_rows.len() < records.len() {
            notes.push("size F1 leaves out the models of unknown size".into());
        }
        f1(
            &matrix(&size_rows, d)?,
            &size_labels,
            (spec.k, spec.splits),
            cfg.seed,
            "size bin",
            &mut notes,
        )?
    };
    let names: Vec<String> = records
        .iter()
        .map(|r| r.meta_str("model").to_string())
        .collect();
    let mut project = |t: &TsneConfig, what: &str| -> Option<Scatter2d> {
        match tsne(x.view(), t) {
            Ok(p) => Some(Scatter2d::new(&p, &names)),
            Err(e) => {
                notes.push(format!("{what} t-SNE not computed: {e}"));
                None
            }
        }
    };
    let tsne_authors = project(&spec.tsne, "authors'");
    let tsne_defaults = project(
        &TsneConfig {
            seed: cfg.seed,
            ..TsneConfig::default()
        },
        "default",
    );
    let names_in_order: Vec<String> = spec.models.iter().map(|m| m.name.clone()).collect();
    let result = FamilyResult {
        experiment: "family".into(),
        models: spec
            .models
            .iter()
            .map(|m| ModelSummary {
                name: m.name.clone(),
                family: families.get(&m.name).cloned().unwrap_or_default(),
                params_b: m.params_b,
                size_bin: m.params_b.map(|p| size_bin(p).to_string()),
                n_layers: layers.get(&m.name).copied().unwrap_or(0),
                samples: raw.get(&m.name).map(Vec::len).unwrap_or(0),
            })
            .collect(),
        samples_per_model: spec.samples,
        tokens: spec.tokens,
        temperature: cfg.generation.temperature,
        f1_family_mean,
        f1_family_std,
        f1_size_mean,
        f1_size_std,
        k: spec.k,
        splits: spec.splits,
        standardization: "per sample (each interpolated profile z-scored over its depth points)"
            .into(),
        notes,
        mean_profiles: bands(&names_in_order, &raw),
        depth_profiles: bands(&names_in_order, &depth),
        tsne: tsne_authors,
        tsne_defaults,
    };
    Ok((result, features))
}

impl FamilyResult {
    /// Our F1 beside the paper's Table 6.
    pub fn comparison(results: &[&FamilyResult]) -> Table {
        let mut t = Table::new(
            "Model family and size (Table 6): kNN macro F1 (%), ours beside the paper's",
            &["task", "ours", "paper", "ours: models"],
        );
        let f = |m: Option<f64>, s: Option<f64>| match (m, s) {
            (Some(m), Some(s)) => format!("{:.2} ± {:.2}", m * 100.0, s * 100.0),
            _ => "—".into(),
        };
        for r in results {
            let models: Vec<String> = r
                .models
                .iter()
                .map(|m| format!("{} ({})", m.name, m.family))
                .collect();
            t.row(vec![
                "model family".into(),
                f(r.f1_family_mean, r.f1_family_std),
                format!(
                    "{:.2} ± {:.2}",
                    TABLE6_F1[0].1,
                    TABLE6_F1[0].2
                ),
                models.join(", "),
            ]);
            t.row(vec![
                "model size".into(),
                f(r.f1_size_mean, r.f1_size_std),
                format!(
                    "{:.2} ± {:.2}",
                    TABLE6_F1[1].1,
                    TABLE6_F1[1].2
                ),
                format!(
                    "{} samples per model, {} tokens at T = {}",
                    r.samples_per_model, r.tokens, r.temperature
                ),
            ]);
            for n in &r.notes {
                t.note(n.clone());
            }
        }
        t.note(
            "the paper: 12 models of the GPT-2, Gemma, Llama and Qwen families, 0.1-9B parameters",
        );
        t
    }

    /// The models compared.
    pub fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            "Models",
            &[
                "model",
                "family",
                "parameters",
                "size bin",
                "blocks",
                "samples",
            ],
        );
        for m in &self.models {
            t.row(vec![
                m.name.clone(),
                m.family.clone(),
                m.params_b.map(|p| format!("{p} B")).unwrap_or("—".into()),
                m.size_bin.clone().unwrap_or("—".into()),
                m.n_layers.to_string(),
                m.samples.to_string(),
            ]);
        }
        vec![t]
    }

    /// Figure 4 (mean profiles on relative depth), the per-model profiles on their own blocks,
    /// and Figure 3 (t-SNE, authors' settings).
    pub fn charts(&self) -> Result<Vec<Chart>> {
        let overlay: Vec<(String, Vec<f64>)> = self
            .mean_profiles
            .iter()
            .map(|b| (b.name.clone(), b.mean.clone()))
            .collect();
        let mut charts = vec![
            depth_normalized(&overlay, DEPTH_POINTS)?,
            profile_bands(
                &self.mean_profiles,
                "Shannon entropy (nats), mean over tokens",
            )?,
        ];
        for s in [&self.tsne, &self.tsne_defaults].into_iter().flatten() {
            charts.push(projection_scatter(&s.projection(), &s.labels, None)?);
        }
        Ok(charts)
    }
}
