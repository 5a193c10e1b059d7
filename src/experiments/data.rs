//! The prompt data of an experiment: where it comes from (run context) and what it is (sha256 and
//! size, part of the hashed configuration).

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::{ExperimentKind, Plan, Scale};
use crate::data::mmlu::{self, Question};
use crate::data::{formats, tinystories};
use crate::error::Result;

/// The data as far as the numbers depend on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataIdentity {
    /// `tinystories` or `topics`.
    pub dataset: String,
    /// sha256 of the bytes the records were parsed from.
    pub sha256: String,
    /// Number of stories or topics available.
    pub records: usize,
}

/// Stories or topics, with where they came from.
#[derive(Clone, Debug)]
pub struct LoadedData {
    pub identity: DataIdentity,
    /// A file path, `embedded:…` or `hub:…`.
    pub source: String,
    /// Stories or topics (validate, tasks, formats).
    pub records: Vec<String>,
    /// MMLU questions (mmlu, skip).
    pub questions: Vec<Question>,
}

fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn loaded(dataset: &str, source: String, bytes: &[u8], records: Vec<String>) -> LoadedData {
    LoadedData {
        identity: DataIdentity {
            dataset: dataset.into(),
            sha256: digest(bytes),
            records: records.len(),
        },
        source,
        records,
        questions: Vec::new(),
    }
}

fn loaded_questions(source: String, bytes: &[u8], questions: Vec<Question>) -> LoadedData {
    LoadedData {
        identity: DataIdentity {
            dataset: "mmlu".into(),
            sha256: digest(bytes),
            records: questions.len(),
        },
        source,
        records: Vec::new(),
        questions,
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| crate::Error::io(path, e))
}

/// Loads what `plan` runs on: TinyStories for `tasks` (a given file; else the embedded 60-story
/// sample at smoke scale, the Hub's validation split at paper scale), topics for `validate` and
/// `formats` (a given file, else the committed 150 topics), MMLU questions for `mmlu` and `skip`
/// (a given JSON Lines or Parquet file or folder; else the embedded 228-question sample at smoke
/// scale, the Hub's `cais/mmlu` test split at paper scale).
pub fn load_data(plan: &Plan) -> Result<LoadedData> {
    match plan.kind {
        ExperimentKind::Family => Err(crate::Error::invalid(
            "family runs on a blank prompt and loads no data; drop --data",
        )),
        ExperimentKind::Vit => Err(crate::Error::invalid(
            "vit reads images, not text records (experiments::vit::ImageSet)",
        )),
        ExperimentKind::Mmlu | ExperimentKind::Skip => match (&plan.data, plan.scale) {
            (Some(path), _) => {
                let file = mmlu::resolve_file(path)?;
                // Parsed first: a missing file gets the MMLU loader's message and hint.
                let questions = mmlu::load(&file)?;
                Ok(loaded_questions(
                    file.display().to_string(),
                    &read(&file)?,
                    questions,
                ))
            }
            (None, Scale::Smoke) => Ok(loaded_questions(
                "embedded:data/mmlu_test_sample.jsonl".into(),
                mmlu::SAMPLE_QUESTIONS.as_bytes(),
                mmlu::sample_questions()?,
            )),
            (None, Scale::Paper) => {
                let path = mmlu::hub_path("test")?;
                Ok(loaded_questions(
                    format!("hub:{}/all/{}", mmlu::HUB_DATASET, mmlu::hub_file("test")),
                    &read(&path)?,
                    mmlu::read_parquet(&path)?,
                ))
            }
        },
        ExperimentKind::Tasks => match (&plan.data, plan.scale) {
            (Some(path), _) => Ok(loaded(
                "tinystories",
                path.display().to_string(),
                &read(path)?,
                tinystories::load_stories(path)?,
            )),
            (None, Scale::Smoke) => Ok(loaded(
                "tinystories",
                "embedded:data/tinystories_valid_sample.jsonl".into(),
                tinystories::SAMPLE_STORIES.as_bytes(),
                tinystories::sample_stories()?,
            )),
            (None, Scale::Paper) => {
                let path = tinystories::hub_valid_path()?;
                Ok(loaded(
                    "tinystories",
                    format!(
                        "hub:{}/{}",
                        tinystories::HUB_DATASET,
                        tinystories::HUB_VALID_FILE
                    ),
                    &read(&path)?,
                    tinystories::load_stories(&path)?,
                ))
            }
        },
        ExperimentKind::Validate | ExperimentKind::Formats => match &plan.data {
            Some(path) => Ok(loaded(
                "topics",
                path.display().to_string(),
                &read(path)?,
                formats::load_topics(path)?,
            )),
            None => Ok(loaded(
                "topics",
                "embedded:data/topics.txt".into(),
                formats::DEFAULT_TOPICS.as_bytes(),
                formats::default_topics(),
            )),
        },
    }
}
