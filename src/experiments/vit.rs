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
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::common::{FeatureLayout, Features};
use super::config::{ExperimentConfig, Generation, Plan, Scale};
use super::data::DataIdentity;
use super::family::{describe_model, f1, mean_std_rows, zscore, DEPTH_POINTS};
use super::progress::Progress;
use super::run::{
    check_same_weights, conclude, default_out_dir, pending, Pending, RunOptions, RunSummary,
};
use super::store::{OutputDir, Record, RunContext, WorkItem};
use crate::analysis::Table;
use crate::data::images::{decode_image, labeled_images, read_image, synthetic_image};
use crate::error::{Error, Result};
use crate::model::vision::{is_vision_source, load_vision};
use crate::model::{parse_device, LoadOptions, ModelSource};
use crate::plots::{depth_normalized, depth_profile_bands, Band, Chart};
use crate::profile::depth_normalize;
use crate::runner::device_name;
use crate::vision::ImageProfiler;

/// The models of the paper's Figure 8 (ViT-Base/Large, DeiT-Tiny/Small/Base), as Hub ids.
pub const PAPER_MODELS: [&str; 5] = [
    "google/vit-base-patch16-224",
    "google/vit-large-patch16-224",
    "facebook/deit-tiny-patch16-224",
    "facebook/deit-small-patch16-224",
    "facebook/deit-base-patch16-224",
];

/// Synthetic images of a smoke run without `--data`.
const SMOKE_IMAGES: usize = 24;

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

impl VitSpec {
    pub fn new(plan: &Plan) -> Result<Self> {
        if plan.folds.is_some() {
            return Err(Error::invalid(
                "vit scores its kNN on 10 random stratified 50/50 splits, as family does; drop --folds",
            ));
        }
        if plan.k == Some(0) {
            return Err(Error::invalid("--k must be at least 1 neighbour"));
        }
        let models = model_sources(plan)?
            .iter()
            .map(|s| describe_model(s).name)
            .collect::<Vec<_>>();
        let mut seen = std::collections::HashSet::new();
        if let Some(m) = models.iter().find(|m| !seen.insert(m.as_str())) {
            return Err(Error::invalid(format!(
                "two models of --models are both named {m}; give them distinct folder names"
            )));
        }
        let (classes, per_class) = match (plan.scale, &plan.data) {
            (_, None) => (None, None),
            (Scale::Smoke, Some(_)) => (plan.classes, plan.n),
            (Scale::Paper, Some(_)) => (plan.classes.or(Some(20)), plan.n.or(Some(20))),
        };
        if classes == Some(0) || per_class == Some(0) || plan.n == Some(0) {
            return Err(Error::invalid(
                "vit needs at least one class (--classes) and one image (--n)",
            ));
        }
        let synthetic = match (&plan.data, plan.scale) {
            (Some(_), _) => 0,
            (None, Scale::Smoke) if plan.classes.is_some() => {
                return Err(Error::invalid(
                    "--classes picks classes from --data; without --data, --n sets the number of synthetic images",
                ))
            }
            (None, Scale::Smoke) => plan.n.unwrap_or(SMOKE_IMAGES),
            (None, Scale::Paper) => {
                return Err(Error::invalid(
                    "vit at paper scale runs on ImageNet-1K validation images: give --data DIR with DIR/<class>/<image> (the paper: 20 classes × 20 images), or a file of `path label` lines",
                ))
            }
        };
        Ok(Self {
            models,
            classes,
            per_class,
            synthetic,
            depth_points: DEPTH_POINTS,
            k: plan.k.unwrap_or(3),
            splits: 10,
        })
    }
}

/// The model list: `--models a,b` (folders or Hub ids; `paper`: [`PAPER_MODELS`]), else the tiny
/// ViT and DeiT fixtures of this repository.
pub fn model_sources(plan: &Plan) -> Result<Vec<String>> {
    let Some(list) = &plan.models else {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vision");
        let fixtures: Vec<PathBuf> = ["vit", "deit"].iter().map(|m| root.join(m)).collect();
        if fixtures.iter().any(|f| !f.join("config.json").is_file()) {
            return Err(Error::invalid(format!(
                "vit needs --models: the default tiny fixtures are not at {} (they ship with the repository, not the library); name ViT/DeiT folders or Hub ids, or `paper` for {}",
                root.display(),
                PAPER_MODELS.join(", ")
            )));
        }
        return Ok(fixtures.iter().map(|f| f.display().to_string()).collect());
    };
    let mut out = Vec::new();
    for m in list {
        if m.trim().is_empty() {
            return Err(Error::invalid(
                "--models holds an empty name (a stray comma?)",
            ));
        }
        if m == "paper" {
            out.extend(PAPER_MODELS.iter().map(|s| s.to_string()));
        } else {
            out.push(m.clone());
        }
    }
    if out.is_empty() {
        return Err(Error::invalid("--models names no model"));
    }
    Ok(out)
}

/// One image of the set: an id (a path relative to the set's folder, or `synthetic/<i>`) and
/// its class.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageRef {
    pub id: String,
    pub class: String,
    path: Option<PathBuf>,
}

/// The images a run uses, and their identity (what the numbers depend on).
#[derive(Clone, Debug)]
pub struct ImageSet {
    pub images: Vec<ImageRef>,
    pub source: String,
    pub identity: DataIdentity,
    seed: u64,
}

impl ImageSet {
    /// Reads or makes the images of `spec`.
    ///
    /// # Errors
    /// Those of [`labeled_images`]; [`Error::BadImage`] for an unreadable file.
    pub fn new(plan: &Plan, spec: &VitSpec) -> Result<Self> {
        let Some(root) = &plan.data else {
            let images = (0..spec.synthetic)
                .map(|i| ImageRef {
                    id: format!("synthetic/{i:03}"),
                    class: synthetic_image(i, plan.seed).0,
                    path: None,
                })
                .collect();
            let tag = format!("synthetic {} seed {}", spec.synthetic, plan.seed);
            return Ok(Self {
                images,
                source: format!("{} synthetic images (seed {})", spec.synthetic, plan.seed),
                identity: DataIdentity {
                    dataset: "synthetic-images".into(),
                    sha256: format!("{:x}", Sha256::digest(tag.as_bytes())),
                    records: spec.synthetic,
                },
                seed: plan.seed,
            });
        };
        let base = if root.is_dir() {
            root.clone()
        } else {
            root.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        let mut by_class: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for img in labeled_images(root)? {
            by_class.entry(img.label).or_default().push(img.path);
        }
        let mut images = Vec::new();
        let mut hasher = Sha256::new();
        for (class, mut paths) in by_class
            .into_iter()
            .take(spec.classes.unwrap_or(usize::MAX))
        {
            paths.sort();
            for path in paths.into_iter().take(spec.per_class.unwrap_or(usize::MAX)) {
                let id = path
                    .strip_prefix(&base)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
                // Every image is decoded once here, so a bad file stops the run before any work.
                decode_image(&bytes, &path)?;
                hasher.update(id.as_bytes());
                hasher.update(class.as_bytes());
                hasher.update(Sha256::digest(&bytes));
                images.push(ImageRef {
                    id,
                    class: class.clone(),
                    path: Some(path),
                });
            }
        }
        Ok(Self {
            identity: DataIdentity {
                dataset: "images".into(),
                sha256: format!("{:x}", hasher.finalize()),
                records: images.len(),
            },
            images,
            source: root.display().to_string(),
            seed: plan.seed,
        })
    }

    fn image(&self, r: &ImageRef, index: usize) -> Result<image::DynamicImage> {
        match &r.path {
            Some(p) => read_image(p),
            None => Ok(synthetic_image(index, self.seed).1),
        }
    }
}

/// Model-major items: every image for every model, labelled with the model's name.
pub fn items(spec: &VitSpec, set: &ImageSet) -> Vec<WorkItem> {
    let mut out = Vec::with_capacity(spec.models.len() * set.images.len());
    for m in &spec.models {
        for img in &set.images {
            let mut meta = serde_json::Map::new();
            meta.insert("model".into(), m.clone().into());
            meta.insert("class".into(), img.class.clone().into());
            out.push(WorkItem {
                index: out.len(),
                id: format!("{m}/{}", img.id),
                label: m.clone(),
                prompt: img.id.clone(),
                meta,
            });
        }
    }
    out
}

/// The configuration of a vit run (no single model: the identity names the list).
pub fn resolve(plan: &Plan, spec: &VitSpec, set: &ImageSet) -> Result<ExperimentConfig> {
    let names: Vec<&str> = spec.models.iter().map(String::as_str).collect();
    plan.resolve_several(
        super::ExperimentSpec::Vit(spec.clone()),
        &names,
        "vision",
        set.identity.clone(),
        Generation {
            chat: false,
            add_bos: false,
            ignore_eos: false,
            temperature: 0.0,
            sample_top_p: None,
        },
    )
}

/// Runs (or resumes) a vit experiment: each model with items left is loaded in turn, and its
/// images are profiled in fixed batches of `--batch` (a partly recorded batch is rerun whole, so
/// a resumed run writes the bytes an uninterrupted one does).
pub fn run(plan: &Plan, opts: &RunOptions) -> Result<RunSummary> {
    let sources = model_sources(plan)?;
    let spec = VitSpec::new(plan)?;
    let set = ImageSet::new(plan, &spec)?;
    let cfg = resolve(plan, &spec, &set)?;
    let all = items(&spec, &set);
    // A 50/50 split trains on half the profiles: k must fit in it.
    if spec.k > all.len() / 2 {
        return Err(Error::invalid(format!(
            "k = {} neighbours need at least {} profiles, and this run has {} ({} models × {} images); lower --k or add images",
            spec.k,
            2 * spec.k,
            all.len(),
            spec.models.len(),
            set.images.len()
        )));
    }
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&cfg, opts.shard));
    let device = parse_device(&plan.device)?;
    let batch = opts.batch.max(1);
    let out = OutputDir::prepare(
        &dir,
        &cfg,
        &all,
        RunContext {
            model: sources.join(", "),
            data: set.source.clone(),
            device: device_name(&device),
            shard: opts.shard.filter(|s| !s.is_whole()),
            batch,
        },
    )?;
    let _lock = out.lock()?;
    let Pending {
        done,
        is_done,
        mine,
        todo,
    } = pending(&out, &dir, &all, opts.shard)?;
    out.log(&format!(
        "run: vit on {} models, {} images, {} of {} items to do",
        sources.len(),
        set.images.len(),
        todo.len(),
        mine.len()
    ))?;
    // Every model must resolve (folder present, Hub files downloadable) before any work: a run
    // over five Hub models should not stop at the fourth.
    for (name, source) in spec.models.iter().zip(&sources) {
        let check = match ModelSource::parse(source)? {
            ModelSource::HubRepo { repo, revision } => crate::model::hub::snapshot_files(
                &repo,
                revision.as_deref(),
                &["preprocessor_config.json"],
                &[],
            )
            .map(|_| ()),
            s if is_vision_source(&s) => Ok(()),
            s => Err(Error::UnknownArchitecture {
                architecture: format!("{} as an image classifier", s.describe()),
                supported: "ViT and DeiT folders (config.json with model_type vit or deit, *.safetensors, preprocessor_config.json) and Hub ids".into(),
            }),
        };
        check.map_err(|e| Error::invalid(format!("model {name} ({source}): {e}")))?;
    }
    let mut progress = Progress::new(opts.progress, "vit", mine.len(), mine.len() - todo.len());
    let start = Instant::now();
    let n_images = set.images.len();
    for (name, source) in spec.models.iter().zip(&sources) {
        let mine_here: Vec<&WorkItem> = mine.iter().copied().filter(|i| &i.label == name).collect();
        if mine_here.iter().all(|i| is_done[i.index]) {
            continue;
        }
        let model = load_vision(
            &ModelSource::parse(source)?,
            &LoadOptions {
                device: device.clone(),
                dtype: plan.dtype,
            },
        )
        .map_err(|e| Error::invalid(format!("model {name} ({source}): {e}")))?;
        check_same_weights(&done, name, &model.info().sha256, &dir)?;
        if model.info().n_layers < 2 {
            return Err(Error::invalid(format!(
                "model {name} has {} block; profiles on a relative-depth axis need at least 2",
                model.info().n_layers
            )));
        }
        let family = family_of(name, &model.info().model_type);
        let mut profiler = ImageProfiler::new(model, cfg.stats.stat_spec(&[])?)?;
        for block in mine_here.chunks(batch) {
            if block.iter().all(|i| is_done[i.index]) {
                continue;
            }
            let images = block
                .iter()
                .map(|i| {
                    let k = i.index % n_images;
                    Ok((i.prompt.clone(), set.image(&set.images[k], k)?))
                })
                .collect::<Result<Vec<_>>>()?;
            let records: Vec<Record> = profiler
                .profile_images(&images, false)?
                .into_iter()
                .zip(block)
                .filter(|(_, i)| !is_done[i.index])
                .map(|(p, i)| {
                    let mut r = Record::new(i, p);
                    r.label = family.clone();
                    r
                })
                .collect();
            out.append(&records)?;
            progress.inc(records.len());
        }
    }
    progress.finish();
    conclude(&out, dir, cfg, opts.shard, (todo.len(), mine.len()), start)
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
    let mut raw: BTreeMap<&str, Vec<Vec<f64>>> = BTreeMap::new();
    let mut depth: BTreeMap<&str, Vec<Vec<f64>>> = BTreeMap::new();
    let mut families: BTreeMap<&str, String> = BTreeMap::new();
    let (mut rows, mut model_labels, mut family_labels) = (Vec::new(), Vec::new(), Vec::new());
    let mut classes = std::collections::BTreeSet::new();
    for r in records {
        let model = r.meta.get("model").and_then(|v| v.as_str()).unwrap_or("");
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
        raw.entry(model).or_default().push(m.row(0).to_vec());
        depth.entry(model).or_default().push(normalized.clone());
        families.insert(model, r.label.clone());
        let class = r.meta.get("class").and_then(|v| v.as_str()).unwrap_or("");
        classes.insert(class.to_string());
        rows.push(zscore(&normalized));
        model_labels.push(model.to_string());
        family_labels.push(r.label.clone());
    }
    let x = ndarray::Array2::from_shape_vec((rows.len(), d), rows.concat())
        .map_err(|e| Error::Data(e.to_string()))?;
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
    let band = |rows: &BTreeMap<&str, Vec<Vec<f64>>>| -> Vec<Band> {
        spec.models
            .iter()
            .filter_map(|m| rows.get(m.as_str()).map(|r| (m, r)))
            .map(|(m, r)| {
                let (mean, std) = mean_std_rows(r);
                Band {
                    name: m.clone(),
                    mean,
                    std,
                    n: r.len(),
                }
            })
            .collect()
    };
    let mean_profiles = band(&raw);
    let models = spec
        .models
        .iter()
        .filter_map(|m| {
            let b = mean_profiles.iter().find(|b| &b.name == m)?;
            Some(VitModelSummary {
                name: m.clone(),
                family: families.get(m.as_str()).cloned().unwrap_or_default(),
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
        depth_profiles: band(&depth),
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
