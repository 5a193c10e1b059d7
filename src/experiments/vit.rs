//! `vit` — entropy profiles of vision transformers (Appendix A.4, Figure 8).
//!
//! Every model classifies every image; the lens reads the class token after each block through
//! the model's final LayerNorm and head (DeiT with teacher: the mean of its two heads), and the
//! Shannon entropy over the classes per block is the image's profile. Profiles of models of
//! different depths go onto one relative-depth axis (linear interpolation, as for `family`);
//! Figure 8 shows the mean ± std per model. A kNN (k = 3, 10 random stratified 50/50 splits, each
//! interpolated profile z-scored on its own) says how well the profiles tell the models apart, and
//! the ViT family from the DeiT family (the paper: "ViTs start with higher entropy values, making
//! them easily distinguishable from DeiTs"; it gives no number).
//!
//! Images: `--data` names a folder of class folders (ImageNet's layout, `DIR/<class>/<image>`) or
//! a list file of `path label` lines; `--classes` and `--n` (images per class) take the first
//! classes and images by name (the paper: 20 classes × 20 images of ImageNet-1K). Without
//! `--data`, smoke scale uses `--n` (default 24) seeded synthetic images and the two tiny random
//! fixtures of this repository (`tests/fixtures/vision/`), so the numbers exercise the pipeline,
//! not a finding.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::experiment::{Batch, Cx, Experiment, Models};
use super::inputs::{ImageSelection, ImageSet};
use super::outputs::{FeatureLayout, Features};
use super::plan::{Plan, PlanOption};
use super::settings::{ExperimentConfig, Generation};
use super::several::{
    self, bands, f1, labelled, matrix, model_name, zscore, ModelItem, DEPTH_POINTS,
};
use super::store::{Record, WorkItem};
use crate::analysis::Table;
use crate::error::{Error, Result};
use crate::plots::{depth_normalized, depth_profile_bands, Band, Chart};
use crate::profile::depth_normalize;
use crate::runner::ImageProfiler;

/// The models of the paper's Figure 8 (ViT-Base/Large, DeiT-Tiny/Small/Base), as Hub ids.
pub const PAPER_MODELS: [&str; 5] = [
    "google/vit-base-patch16-224",
    "google/vit-large-patch16-224",
    "facebook/deit-tiny-patch16-224",
    "facebook/deit-small-patch16-224",
    "facebook/deit-base-patch16-224",
];

/// The experiment (registered as `vit`).
pub struct Vit;

/// What `vit` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VitSpec {
    /// Model names (folder names or Hub repo names).
    pub models: Vec<String>,
    /// Classes and images per class taken from `--data` (None: all).
    pub classes: Option<usize>,
    pub per_class: Option<usize>,
    /// Synthetic images used instead of `--data` (0 with data).
    pub synthetic: usize,
    pub depth_points: usize,
    pub k: usize,
    pub splits: usize,
}

/// The model list: `--models a,b` (folders or Hub ids; `paper`: [`PAPER_MODELS`]), else the tiny
/// ViT and DeiT fixtures of this repository.
pub fn model_sources(plan: &Plan) -> Result<Vec<String>> {
    let paper: Vec<String> = PAPER_MODELS.iter().map(|s| s.to_string()).collect();
    several::model_sources(plan, &paper, || {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vision");
        let fixtures: Vec<_> = ["vit", "deit"].iter().map(|m| root.join(m)).collect();
        if fixtures.iter().any(|f| !f.join("config.json").is_file()) {
            return Err(Error::invalid(format!(
                "vit needs --models: the default tiny fixtures are not at {} (they ship with the repository, not the library); name ViT/DeiT folders or Hub ids, or `paper` for {}",
                root.display(),
                PAPER_MODELS.join(", ")
            )));
        }
        Ok(fixtures.iter().map(|f| f.display().to_string()).collect())
    })
}

impl Experiment for Vit {
    const NAME: &'static str = "vit";
    const PAPER: &'static str = "Appendix A.4, Figure 8";
    const SUMMARY: &'static str =
        "vision transformers (ViT, DeiT): profiles over the classes on relative depth";
    const OPTIONS: &'static [PlanOption] = &[
        PlanOption::Models,
        PlanOption::Data,
        PlanOption::Classes,
        PlanOption::K,
        PlanOption::Folds,
    ];
    type Spec = VitSpec;
    type Result = VitResult;
    type Input = ImageSet;
    type Instrument = ImageProfiler;

    fn spec(plan: &Plan) -> Result<VitSpec> {
        if plan.folds.is_some() {
            return Err(Error::invalid(
                "vit scores its kNN on 10 random stratified 50/50 splits, as family does; drop --folds",
            ));
        }
        if plan.k == Some(0) {
            return Err(Error::invalid("--k must be at least 1 neighbour"));
        }
        let models: Vec<String> = model_sources(plan)?.iter().map(|s| model_name(s)).collect();
        let pick = ImageSelection::of(plan)?;
        Ok(VitSpec {
            models,
            classes: pick.classes,
            per_class: pick.per_class,
            synthetic: pick.synthetic,
            depth_points: DEPTH_POINTS,
            k: plan.k.unwrap_or(3),
            splits: 10,
        })
    }

    fn tokens(_: &VitSpec) -> usize {
        0
    }

    fn models(plan: &Plan, spec: &VitSpec) -> Result<Models> {
        several::named_models(&spec.models, &model_sources(plan)?)
    }

    fn generation(_: &Plan, _: &VitSpec) -> Result<Generation> {
        Ok(Generation::none())
    }

    /// Model-major: every image for every model.
    fn items(_: &ExperimentConfig, spec: &VitSpec, set: &ImageSet) -> Result<Vec<WorkItem>> {
        Ok(several::items(&spec.models, |_| {
            set.images
                .iter()
                .map(|img| ModelItem {
                    id: img.id.clone(),
                    prompt: img.id.clone(),
                    meta: BTreeMap::from([("class".to_string(), img.class.clone().into())]),
                })
                .collect()
        }))
    }

    /// A 50/50 split trains on half the profiles: k must fit in it.
    fn check_feasible(_: &ExperimentConfig, spec: &VitSpec, items: &[WorkItem]) -> Result<()> {
        if spec.k > items.len() / 2 {
            return Err(Error::invalid(format!(
                "k = {} neighbours need at least {} profiles, and this run has {} ({} models × {} images); lower --k or add images",
                spec.k,
                2 * spec.k,
                items.len(),
                spec.models.len(),
                items.len() / spec.models.len().max(1)
            )));
        }
        Ok(())
    }

    fn prepare(cx: &Cx<'_, Self>, profiler: &mut ImageProfiler) -> Result<()> {
        let n = profiler.model.info().n_layers;
        if n < 2 {
            return Err(Error::invalid(format!(
                "model {} has {n} block; profiles on a relative-depth axis need at least 2",
                cx.model
            )));
        }
        Ok(())
    }

    /// The batch's images in one pass; records labelled with the model's family.
    fn measure(
        cx: &Cx<'_, Self>,
        profiler: &mut ImageProfiler,
        batch: &Batch<'_>,
    ) -> Result<Vec<Record>> {
        let family = family_of(cx.model, &profiler.model.info().model_type);
        let records = <ImageProfiler as super::experiment::Instrument>::measure_batch(
            cx, profiler, batch,
        )?;
        Ok(labelled(records, &family))
    }

    fn finish(
        cfg: &ExperimentConfig,
        spec: &VitSpec,
        records: &[Record],
    ) -> Result<(VitResult, Features)> {
        finish(cfg, spec, records)
    }

    fn comparison(results: &[&VitResult]) -> Vec<Table> {
        vec![VitResult::comparison(results)]
    }

    fn tables(result: &VitResult) -> Vec<Table> {
        result.tables()
    }

    fn charts(result: &VitResult) -> Result<Vec<Chart>> {
        result.charts()
    }
}

/// `deit` or `vit`: DeiT checkpoints without distillation (facebook/deit-*-patch16-224) are
/// stored as ViT (`model_type` `vit`), so a name that says DeiT counts as DeiT.
pub fn family_of(name: &str, model_type: &str) -> String {
    if model_type == "deit" || name.to_ascii_lowercase().contains("deit") {
        "deit".into()
    } else {
        model_type.to_string()
    }
}

/// One model in the result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VitModelSummary {
    pub name: String,
    /// `vit` or `deit`.
    pub family: String,
    pub n_layers: usize,
    pub images: usize,
    /// Mean Shannon entropy (nats) after the first and the last block.
    pub first_block_entropy: f64,
    pub last_block_entropy: f64,
}

/// `result.json` of `vit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VitResult {
    pub experiment: String,
    pub models: Vec<VitModelSummary>,
    pub images_per_model: usize,
    pub classes: usize,
    /// Macro F1 of telling the models apart, and the ViT family from the DeiT family; None with a
    /// single model or family (see `notes`).
    pub f1_model_mean: Option<f64>,
    pub f1_model_std: Option<f64>,
    pub f1_family_mean: Option<f64>,
    pub f1_family_std: Option<f64>,
    pub k: usize,
    pub splits: usize,
    pub notes: Vec<String>,
    /// Per model: mean ± std over images of the profile on blocks 1..=L.
    pub mean_profiles: Vec<Band>,
    /// The same on the relative-depth axis (Figure 8).
    pub depth_profiles: Vec<Band>,
}

/// Computes the result from the records (sorted by item).
pub fn finish(
    cfg: &ExperimentConfig,
    spec: &VitSpec,
    records: &[Record],
) -> Result<(VitResult, Features)> {
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
    let (mut rows, mut model_labels, mut family_labels) = (Vec::new(), Vec::new(), Vec::new());
    let mut classes = std::collections::BTreeSet::new();
    for r in records {
        let model = r.meta_str("model");
        let m = r.profile.shannon_matrix()?;
        if m.nrows() != 1 {
            return Err(Error::Data(format!(
                "record {} has {} positions, expected one per image",
                r.id,
                m.nrows()
            )));
        }
        let normalized = depth_normalize(m.view(), d)?.row(0).to_vec();
        features.push(r, normalized.clone())?;
        raw.entry(model.to_string())
            .or_default()
            .push(m.row(0).to_vec());
        depth
            .entry(model.to_string())
            .or_default()
            .push(normalized.clone());
        families.insert(model.to_string(), r.label.clone());
        let class = r.meta_str("class");
        classes.insert(class.to_string());
        rows.push(zscore(&normalized));
        model_labels.push(model.to_string());
        family_labels.push(r.label.clone());
    }
    let x = matrix(&rows, d)?;
    let mut notes = Vec::new();
    let ks = (spec.k, spec.splits);
    let (f1_model_mean, f1_model_std) = f1(&x, &model_labels, ks, cfg.seed, "model", &mut notes)?;
    let (f1_family_mean, f1_family_std) =
        f1(&x, &family_labels, ks, cfg.seed, "family", &mut notes)?;
    if spec.synthetic > 0 {
        notes.push(format!(
            "{} synthetic images (noise, stripes, discs), not ImageNet: the profiles exercise the pipeline",
            spec.synthetic
        ));
    }
    let mean_profiles = bands(&spec.models, &raw);
    let models = spec
        .models
        .iter()
        .filter_map(|m| {
            let b = mean_profiles.iter().find(|b| &b.name == m)?;
            Some(VitModelSummary {
                name: m.clone(),
                family: families.get(m).cloned().unwrap_or_default(),
                n_layers: b.mean.len(),
                images: b.n,
                first_block_entropy: b.mean.first().copied().unwrap_or(f64::NAN),
                last_block_entropy: b.mean.last().copied().unwrap_or(f64::NAN),
            })
        })
        .collect();
    let result = VitResult {
        experiment: "vit".into(),
        models,
        images_per_model: records.len() / spec.models.len().max(1),
        classes: classes.len(),
        f1_model_mean,
        f1_model_std,
        f1_family_mean,
        f1_family_std,
        k: spec.k,
        splits: spec.splits,
        notes,
        mean_profiles,
        depth_profiles: bands(&spec.models, &depth),
    };
    Ok((result, features))
}

impl VitResult {
    /// Our separability and first-block entropies beside what the paper says of Figure 8.
    pub fn comparison(results: &[&VitResult]) -> Table {
        let mut t = Table::new(
            "Vision transformers (Appendix A.4, Figure 8): ours beside the paper",
            &["measure", "ours", "paper"],
        );
        let f = |m: Option<f64>, s: Option<f64>| match (m, s) {
            (Some(m), Some(s)) => format!("{:.2} ± {:.2}", m * 100.0, s * 100.0),
            _ => "—".into(),
        };
        for r in results {
            t.row(vec![
                "kNN macro F1 (%), which model".into(),
                f(r.f1_model_mean, r.f1_model_std),
                "— (not reported)".into(),
            ]);
            t.row(vec![
                "kNN macro F1 (%), ViT vs DeiT".into(),
                f(r.f1_family_mean, r.f1_family_std),
                "\"easily distinguishable\" (no number)".into(),
            ]);
            let mean_first = |fam: &str| {
                let v: Vec<f64> = r
                    .models
                    .iter()
                    .filter(|m| m.family == fam)
                    .map(|m| m.first_block_entropy)
                    .collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            };
            t.row(vec![
                "first-block entropy, ViT − DeiT (nats)".into(),
                match (mean_first("vit"), mean_first("deit")) {
                    (Some(a), Some(b)) => format!("{:+.3}", a - b),
                    _ => "—".into(),
                },
                "> 0: \"ViTs start with higher entropy values\"".into(),
            ]);
            for n in &r.notes {
                t.note(n.clone());
            }
        }
        t.note("the paper: ViT-Base/Large and DeiT-Tiny/Small/Base on 20 ImageNet-1K classes × 20 images; profiles start high and fall mostly in the last blocks; ViT-Large falls earlier and more smoothly");
        t
    }

    /// The models compared.
    pub fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            "Models",
            &[
                "model",
                "family",
                "blocks",
                "images",
                "H after block 1",
                "H after block L",
            ],
        );
        for m in &self.models {
            t.row(vec![
                m.name.clone(),
                m.family.clone(),
                m.n_layers.to_string(),
                m.images.to_string(),
                format!("{:.3}", m.first_block_entropy),
                format!("{:.3}", m.last_block_entropy),
            ]);
        }
        vec![t]
    }

    /// Figure 8 (mean ± std on relative depth) and the mean profiles overlaid.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        let overlay: Vec<(String, Vec<f64>)> = self
            .mean_profiles
            .iter()
            .map(|b| (b.name.clone(), b.mean.clone()))
            .collect();
        Ok(vec![
            depth_profile_bands(
                &self.depth_profiles,
                "Shannon entropy over the classes (nats)",
            )?,
            depth_normalized(&overlay, DEPTH_POINTS)?,
        ])
    }
}
