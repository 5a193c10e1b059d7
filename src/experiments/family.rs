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
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::common::{FeatureLayout, Features, Scatter2d};
use super::config::{ExperimentConfig, Generation, Plan, Protocol, Scale};
use super::data::DataIdentity;
use super::progress::Progress;
use super::run::{
    check_same_weights, conclude, default_out_dir, pending, Pending, RunOptions, RunSummary,
};
use super::store::{OutputDir, Record, RunContext, WorkItem};
use crate::analysis::{repeated_split_f1, tsne, Labels, Table, TsneConfig};
use crate::error::{Error, Result};
use crate::model::registry;
use crate::model::{load, parse_device, Architecture, LoadOptions, ModelSource};
use crate::plots::{depth_normalized, profile_bands, projection_scatter, Band, Chart};
use crate::profile::depth_normalize;
use crate::runner::{device_name, ProfileRequest, Profiler, Sampling};

/// Points of the relative-depth axis the profiles are interpolated to.
pub const DEPTH_POINTS: usize = 32;

/// Sizes of the two offline models (not in the paper's registry), in billions of parameters.
const OFFLINE_SIZES: [(&str, f64); 2] = [("smollm2-135m", 0.135), ("gemma-3-270m", 0.268)];

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
/// `paper` expands to the registry's base models), else the two offline models.
pub fn model_sources(plan: &Plan) -> Result<Vec<String>> {
    let Some(list) = &plan.models else {
        return Ok(vec![
            crate::fetch::fetch_model(&crate::fetch::SMOLLM2)?
                .display()
                .to_string(),
            crate::fetch::fetch_model(&crate::fetch::GEMMA3)?
                .display()
                .to_string(),
        ]);
    };
    let mut out = Vec::new();
    for m in list {
        if m == "paper" {
            out.extend(
                registry::PAPER_MODELS
                    .iter()
                    .filter(|r| !r.instruct)
                    .map(|r| r.name.to_string()),
            );
        } else {
            out.push(m.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = out.iter().find(|m| !seen.insert(m.as_str())) {
        return Err(Error::invalid(format!(
            "model {dup} is listed twice in --models"
        )));
    }
    if out.is_empty() {
        return Err(Error::invalid("--models names no model"));
    }
    Ok(out)
}

/// The display name and known size of a model given as `source`.
pub fn describe_model(source: &str) -> FamilyModel {
    if let Some(r) = registry::lookup(source) {
        return FamilyModel {
            name: r.name.to_string(),
            params_b: Some(r.params_b),
        };
    }
    // A Hub id may carry a revision (`owner/name@refs/pr/3`): the name is the repository's.
    let path = match source.split_once('@') {
        Some((id, rev)) if !Path::new(source).exists() && !rev.is_empty() => id,
        _ => source,
    };
    let name = PathBuf::from(path.trim_end_matches('/'))
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| source.to_string());
    let lower = name.to_ascii_lowercase();
    let params_b = OFFLINE_SIZES
        .iter()
        .find(|(k, _)| lower.contains(k))
        .map(|(_, p)| *p);
    FamilyModel { name, params_b }
}

/// The names of the models a plan compares, without downloading anything.
fn model_names(plan: &Plan) -> Result<Vec<String>> {
    match &plan.models {
        None => Ok([
            crate::fetch::SMOLLM2.file_name,
            crate::fetch::GEMMA3.file_name,
        ]
        .iter()
        .map(|f| f.to_string())
        .collect()),
        Some(_) => model_sources(plan),
    }
}

impl FamilySpec {
    pub fn new(plan: &Plan) -> Result<Self> {
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
        if plan.data.is_some() {
            return Err(Error::invalid(
                "family runs on a blank prompt and loads no data; drop --data",
            ));
        }
        let mut names = std::collections::HashSet::new();
        if let Some(m) = models.iter().find(|m| !names.insert(m.name.as_str())) {
            return Err(Error::invalid(format!(
                "two models of --models are both named {}; give them distinct file or folder names",
                m.name
            )));
        }
        let spec = Self {
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

/// Model-major items: `samples` blank prompts per model, labelled with the model's name.
pub fn items(spec: &FamilySpec) -> Vec<WorkItem> {
    let mut out = Vec::with_capacity(spec.models.len() * spec.samples);
    for m in &spec.models {
        for s in 0..spec.samples {
            let mut meta = serde_json::Map::new();
            meta.insert("model".into(), m.name.clone().into());
            meta.insert("sample".into(), s.into());
            out.push(WorkItem {
                index: out.len(),
                id: format!("{}/s{s:03}", m.name),
                label: m.name.clone(),
                prompt: String::new(),
                meta,
            });
        }
    }
    out
}

/// The configuration of a family run (no single model: the identity names the list).
pub fn resolve(plan: &Plan) -> Result<ExperimentConfig> {
    let spec = FamilySpec::new(plan)?;
    let names: Vec<&str> = spec.models.iter().map(|m| m.name.as_str()).collect();
    let temperature = plan.temperature.unwrap_or(0.7);
    if !(temperature >= 0.0 && temperature.is_finite()) {
        return Err(Error::invalid(format!(
            "temperature must be a finite number ≥ 0, got {temperature}"
        )));
    }
    plan.resolve_several(
        super::ExperimentSpec::Family(spec.clone()),
        &names,
        "several",
        DataIdentity {
            dataset: "blank".into(),
            sha256: format!("{:x}", Sha256::digest(b"")),
            records: 0,
        },
        Generation {
            chat: false,
            add_bos: true,
            ignore_eos: true,
            temperature,
            sample_top_p: plan.sample_top_p,
        },
    )
}

/// Runs (or resumes) a family experiment: each model with items left is loaded in turn.
pub fn run(plan: &Plan, opts: &RunOptions) -> Result<RunSummary> {
    let sources = model_sources(plan)?;
    let cfg = resolve(plan)?;
    let super::ExperimentSpec::Family(spec) = &cfg.spec else {
        return Err(Error::invalid("not a family configuration"));
    };
    let all = items(spec);
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&cfg, opts.shard));
    let device = parse_device(&plan.device)?;
    let out = OutputDir::prepare(
        &dir,
        &cfg,
        &all,
        RunContext {
            model: sources.join(", "),
            data: "blank prompt (BOS)".into(),
            device: device_name(&device),
            shard: opts.shard.filter(|s| !s.is_whole()),
            // The family experiment samples one model at a time, one prompt at a time.
            batch: 1,
        },
    )?;
    let _lock = out.lock()?;
    let Pending {
        done, mine, todo, ..
    } = pending(&out, &dir, &all, opts.shard)?;
    out.log(&format!(
        "run: family of {} models, {} of {} items to do",
        sources.len(),
        todo.len(),
        mine.len()
    ))?;
    let mut progress = Progress::new(opts.progress, "family", mine.len(), mine.len() - todo.len());
    let start = Instant::now();
    for (m, source) in spec.models.iter().zip(&sources) {
        let mine_here: Vec<&WorkItem> =
            todo.iter().copied().filter(|i| i.label == m.name).collect();
        if mine_here.is_empty() {
            continue;
        }
        let loaded = load(
            &ModelSource::parse(source)?,
            &LoadOptions {
                device: device.clone(),
                dtype: plan.dtype,
            },
        )
        .map_err(|e| Error::invalid(format!("model {} ({source}): {e}", m.name)))?;
        check_same_weights(&done, &m.name, &loaded.model.info().sha256, &dir)?;
        let family = family_of(loaded.model.info().architecture);
        let mut profiler = Profiler::new(loaded, cfg.stats.stat_spec(&[])?)?;
        let bos = profiler.tokenizer.bos_token_id();
        let token_ids = match (spec.double_bos, bos) {
            (true, Some(b)) => Some(vec![b, b]),
            (true, None) => {
                return Err(Error::invalid(format!(
                    "model {} has no BOS token, so the authors' double-BOS prompt cannot be built",
                    m.name
                )))
            }
            _ => None,
        };
        for item in mine_here {
            let req = ProfileRequest {
                prompt: String::new(),
                generate: spec.tokens,
                ignore_eos: true,
                add_bos: true,
                token_ids: token_ids.clone(),
                sampling: Sampling {
                    temperature: cfg.generation.temperature,
                    top_p: cfg.generation.sample_top_p,
                    seed: cfg.seed.wrapping_add(item.index as u64),
                },
                ..Default::default()
            };
            let profile = profiler.run(&req)?;
            let mut record = Record::new(item, profile);
            record.label = family.to_string();
            out.append(std::slice::from_ref(&record))?;
            progress.inc(1);
        }
    }
    progress.finish();
    conclude(&out, dir, cfg, opts.shard, (todo.len(), mine.len()), start)
}

impl Record {
    /// The model a family record belongs to.
    fn label_model(&self) -> &str {
        self.meta
            .get("model")
            .and_then(|v| v.as_str())
            .unwrap_or("")
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

pub(super) fn mean_std_rows(rows: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
    let n = rows.len().max(1) as f64;
    let d = rows.first().map(Vec::len).unwrap_or(0);
    let mean: Vec<f64> = (0..d)
        .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n)
        .collect();
    let std = (0..d)
        .map(|j| (rows.iter().map(|r| (r[j] - mean[j]).powi(2)).sum::<f64>() / n).sqrt())
        .collect();
    (mean, std)
}

pub(super) fn zscore(row: &[f64]) -> Vec<f64> {
    let n = row.len().max(1) as f64;
    let m = row.iter().sum::<f64>() / n;
    let sd = (row.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n).sqrt();
    row.iter()
        .map(|v| if sd > 0.0 { (v - m) / sd } else { 0.0 })
        .collect()
}

/// Macro F1 (mean, std) of a kNN over `splits` random stratified 50/50 splits; a note instead
/// when there is one class only or the split cannot run.
pub(super) fn f1(
    x: &ndarray::Array2<f64>,
    labels: &[String],
    (k, splits): (usize, usize),
    seed: u64,
    what: &str,
    notes: &mut Vec<String>,
) -> Result<(Option<f64>, Option<f64>)> {
    let l = Labels::encode(labels);
    if l.n_classes() < 2 {
        notes.push(format!(
            "{what} F1: only one {what} ({}), nothing to classify",
            l.classes.first().map(String::as_str).unwrap_or("none")
        ));
        return Ok((None, None));
    }
    match repeated_split_f1(x.view(), &l, k, splits, 0.5, seed, false) {
        Ok(r) => Ok((Some(r.f1_mean), Some(r.f1_std))),
        Err(e) => {
            notes.push(format!("{what} F1 not computed: {e}"));
            Ok((None, None))
        }
    }
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
        let model = r.label_model().to_string();
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
    let to_matrix = |rows: &[Vec<f64>]| {
        ndarray::Array2::from_shape_vec((rows.len(), d), rows.concat())
            .map_err(|e| Error::Data(e.to_string()))
    };
    let x = to_matrix(&z_rows)?;
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
            &to_matrix(&size_rows)?,
            &size_labels,
            (spec.k, spec.splits),
            cfg.seed,
            "size bin",
            &mut notes,
        )?
    };
    let names: Vec<String> = records
        .iter()
        .map(|r| r.label_model().to_string())
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
    let band = |rows: &BTreeMap<String, Vec<Vec<f64>>>| -> Vec<Band> {
        spec.models
            .iter()
            .filter_map(|m| rows.get(&m.name).map(|r| (m, r)))
            .map(|(m, r)| {
                let (mean, std) = mean_std_rows(r);
                Band {
                    name: m.name.clone(),
                    mean,
                    std,
                    n: r.len(),
                }
            })
            .collect()
    };
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
        mean_profiles: band(&raw),
        depth_profiles: band(&depth),
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
                    super::paper::TABLE6_F1[0].1,
                    super::paper::TABLE6_F1[0].2
                ),
                models.join(", "),
            ]);
            t.row(vec![
                "model size".into(),
                f(r.f1_size_mean, r.f1_size_std),
                format!(
                    "{:.2} ± {:.2}",
                    super::paper::TABLE6_F1[1].1,
                    super::paper::TABLE6_F1[1].2
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
