//! What an experiment runs on: stories, topics, MMLU questions, a blank prompt or images. Each is
//! an [`Input`]: it loads itself from `--data` or from its default source at the plan's scale, and
//! says where it came from (the run context) and what it is (a [`DataIdentity`], part of the
//! hashed configuration).

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use image::DynamicImage;
use sha2::{Digest, Sha256};

use super::plan::Plan;
use super::settings::{DataIdentity, Scale};
use super::store::WorkItem;
use crate::data::images::{decode_image, labeled_images, read_image, synthetic_image};
use crate::data::mmlu_questions::{self as mmlu, PromptStyle, Question};
use crate::data::{tinystories, topics};
use crate::error::{Error, Result};

/// An input loaded for a run, with its provenance.
#[derive(Clone, Debug)]
pub struct Loaded<T> {
    /// What the numbers depend on (hashed into the configuration).
    pub identity: DataIdentity,
    /// Where it came from: a path, `embedded:…`, `hub:…` (the run context, not hashed).
    pub source: String,
    pub value: T,
}

/// Data an experiment runs on.
pub trait Input: Sized {
    /// Loads what `plan` names (`--data`) or the default source at the plan's scale.
    fn load(plan: &Plan) -> Result<Loaded<Self>>;

    /// The image of `item` (image sets only).
    fn image(&self, item: &WorkItem) -> Result<DynamicImage> {
        Err(Error::invalid(format!(
            "item {} is a text prompt, not an image",
            item.id
        )))
    }
}

fn digest(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

fn loaded<T>(dataset: &str, source: String, bytes: &[u8], records: usize, value: T) -> Loaded<T> {
    Loaded {
        identity: DataIdentity {
            dataset: dataset.into(),
            sha256: digest(bytes),
            records,
        },
        source,
        value,
    }
}

/// TinyStories stories: a given file (JSON Lines or text); else the embedded 60-story sample at
/// smoke scale, the Hub's validation split at paper scale.
#[derive(Clone, Debug)]
pub struct Stories(pub Vec<String>);

impl Input for Stories {
    fn load(plan: &Plan) -> Result<Loaded<Self>> {
        let (source, bytes, stories) = match (&plan.data, plan.scale) {
            (Some(path), _) => (
                path.display().to_string(),
                read(path)?,
                tinystories::load_stories(path)?,
            ),
            (None, Scale::Smoke) => (
                "embedded:data/tinystories_valid_sample.jsonl".into(),
                tinystories::SAMPLE_STORIES.as_bytes().to_vec(),
                tinystories::sample_stories()?,
            ),
            (None, Scale::Paper) => {
                let path = tinystories::hub_valid_path()?;
                (
                    format!(
                        "hub:{}/{}",
                        tinystories::HUB_DATASET,
                        tinystories::HUB_VALID_FILE
                    ),
                    read(&path)?,
                    tinystories::load_stories(&path)?,
                )
            }
        };
        Ok(loaded(
            "tinystories",
            source,
            &bytes,
            stories.len(),
            Stories(stories),
        ))
    }
}

/// Topics of the topic-format prompts: a given file (one per line), else the committed 150.
#[derive(Clone, Debug)]
pub struct Topics(pub Vec<String>);

impl Input for Topics {
    fn load(plan: &Plan) -> Result<Loaded<Self>> {
        let (source, bytes, list) = match &plan.data {
            Some(path) => (
                path.display().to_string(),
                read(path)?,
                topics::load_topics(path)?,
            ),
            None => (
                "embedded:data/topics.txt".into(),
                topics::DEFAULT_TOPICS.as_bytes().to_vec(),
                topics::default_topics(),
            ),
        };
        Ok(loaded("topics", source, &bytes, list.len(), Topics(list)))
    }
}

impl Topics {
    /// The first `n` topics in the three formats, topic-major, labelled by format.
    pub fn format_items(&self, n: usize) -> Result<Vec<WorkItem>> {
        Ok(topics::format_prompts(&self.0, n)?
            .into_iter()
            .enumerate()
            .map(|(index, p)| WorkItem {
                index,
                id: format!("topic{:03}-{}", p.topic_index, p.format.name()),
                label: p.format.name().into(),
                prompt: p.prompt,
                meta: BTreeMap::from([
                    ("topic".into(), p.topic.clone().into()),
                    ("format".into(), p.format.name().into()),
                ]),
            })
            .collect())
    }
}

/// MMLU questions: a given JSON Lines or Parquet file or Hub-layout folder; else the embedded
/// 228-question sample at smoke scale, the Hub's `cais/mmlu` test split at paper scale.
#[derive(Clone, Debug)]
pub struct Questions(pub Vec<Question>);

impl Input for Questions {
    fn load(plan: &Plan) -> Result<Loaded<Self>> {
        let (source, bytes, questions) = match (&plan.data, plan.scale) {
            (Some(path), _) => {
                let file = mmlu::resolve_file(path)?;
                // Parsed first: a missing file gets the MMLU loader's message and hint.
                let questions = mmlu::load(&file)?;
                (file.display().to_string(), read(&file)?, questions)
            }
            (None, Scale::Smoke) => (
                "embedded:data/mmlu_test_sample.jsonl".into(),
                mmlu::SAMPLE_QUESTIONS.as_bytes().to_vec(),
                mmlu::sample_questions()?,
            ),
            (None, Scale::Paper) => {
                let path = mmlu::hub_path("test")?;
                (
                    format!("hub:{}/all/{}", mmlu::HUB_DATASET, mmlu::hub_file("test")),
                    read(&path)?,
                    mmlu::read_parquet(&path)?,
                )
            }
        };
        Ok(loaded(
            "mmlu",
            source,
            &bytes,
            questions.len(),
            Questions(questions),
        ))
    }
}

impl Questions {
    /// A seeded, subject-stratified sample of `n` questions, each asked in every style in a row;
    /// an item's label is its style and its meta has the correct letter.
    pub fn items(&self, n: usize, seed: u64, styles: &[PromptStyle]) -> Result<Vec<WorkItem>> {
        let sample = mmlu::stratified_sample(&self.0, n, seed)?;
        let mut out = Vec::with_capacity(sample.len() * styles.len());
        for q in &sample {
            for &style in styles {
                out.push(WorkItem {
                    index: out.len(),
                    id: format!("{}-{}", q.id, style.name()),
                    label: style.name().into(),
                    prompt: style.prompt(q),
                    meta: BTreeMap::from([
                        ("question".into(), q.id.clone().into()),
                        ("subject".into(), q.subject.clone().into()),
                        ("correct".into(), q.answer_letter().into()),
                    ]),
                });
            }
        }
        Ok(out)
    }
}

/// The correct letter stored with a question's item.
pub fn correct_letter(item: &WorkItem) -> Result<String> {
    item.meta
        .get("correct")
        .and_then(|v| v.as_str())
        .map(String::from)
        .ok_or_else(|| Error::Data(format!("item {} has no correct answer", item.id)))
}

/// The blank prompt: no data (the family experiment samples from BOS alone).
#[derive(Clone, Copy, Debug)]
pub struct Blank;

impl Input for Blank {
    fn load(plan: &Plan) -> Result<Loaded<Self>> {
        if plan.data.is_some() {
            return Err(Error::invalid(format!(
                "{} runs on a blank prompt and loads no data; drop --data",
                plan.kind.name()
            )));
        }
        Ok(loaded("blank", "blank prompt (BOS)".into(), b"", 0, Blank))
    }
}

/// Synthetic images of a smoke run without `--data`.
pub const SMOKE_IMAGES: usize = 24;

/// Which images of a set a plan takes: classes and images per class from `--data` (`None`: all;
/// the paper: 20 × 20 at paper scale), or the number of seeded synthetic images without `--data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageSelection {
    pub classes: Option<usize>,
    pub per_class: Option<usize>,
    /// Synthetic images used instead of `--data` (0 with data).
    pub synthetic: usize,
}

impl ImageSelection {
    pub fn of(plan: &Plan) -> Result<Self> {
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
            classes,
            per_class,
            synthetic,
        })
    }
}

/// One image of a set: an id (a path relative to the set's folder, or `synthetic/<i>`) and
/// its class.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageRef {
    pub id: String,
    pub class: String,
    path: Option<PathBuf>,
}

/// Labelled images: a folder of class folders (ImageNet's layout, `DIR/<class>/<image>`) or a
/// list file of `path label` lines, the first classes and images by name ([`ImageSelection`]);
/// or seeded synthetic images (noise, stripes, discs) without `--data`.
#[derive(Clone, Debug)]
pub struct ImageSet {
    pub images: Vec<ImageRef>,
    seed: u64,
}

impl Input for ImageSet {
    /// # Errors
    /// Those of [`labeled_images`]; [`Error::BadImage`] for an unreadable file (every image is
    /// decoded once here, so a bad file stops the run before any work).
    fn load(plan: &Plan) -> Result<Loaded<Self>> {
        let pick = ImageSelection::of(plan)?;
        let Some(root) = &plan.data else {
            let images: Vec<ImageRef> = (0..pick.synthetic)
                .map(|i| ImageRef {
                    id: format!("synthetic/{i:03}"),
                    class: synthetic_image(i, plan.seed).0,
                    path: None,
                })
                .collect();
            let tag = format!("synthetic {} seed {}", pick.synthetic, plan.seed);
            return Ok(loaded(
                "synthetic-images",
                format!("{} synthetic images (seed {})", pick.synthetic, plan.seed),
                tag.as_bytes(),
                pick.synthetic,
                ImageSet {
                    images,
                    seed: plan.seed,
                },
            ));
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
            .take(pick.classes.unwrap_or(usize::MAX))
        {
            paths.sort();
            for path in paths.into_iter().take(pick.per_class.unwrap_or(usize::MAX)) {
                let id = path
                    .strip_prefix(&base)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                let bytes = read(&path)?;
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
        Ok(Loaded {
            identity: DataIdentity {
                dataset: "images".into(),
                sha256: format!("{:x}", hasher.finalize()),
                records: images.len(),
            },
            source: root.display().to_string(),
            value: ImageSet {
                images,
                seed: plan.seed,
            },
        })
    }

    /// The image of an item made by [`ImageSet`]'s model-major layout (item i shows image
    /// i mod n).
    fn image(&self, item: &WorkItem) -> Result<DynamicImage> {
        let k = item.index % self.images.len().max(1);
        let r = self
            .images
            .get(k)
            .ok_or_else(|| Error::Data(format!("item {} has no image", item.id)))?;
        match &r.path {
            Some(p) => read_image(p),
            None => Ok(synthetic_image(k, self.seed).1),
        }
    }
}
