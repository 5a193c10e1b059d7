//! What a lens is trained on: a text, tokenized here (each window starts with BOS where the model
//! reads one), or token sequences taken as they are — an experiment's prompts and generations
//! (`records.jsonl`), so that a lens can be fitted on the kind of tokens the tables are read on,
//! chat template and the model's own continuations included.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::model::TextTokenizer;

/// Training data: a text, or token sequences.
#[derive(Clone, Copy, Debug)]
pub enum TrainingData<'a> {
    /// Tokenized as one stream and cut into windows, each with BOS first where the tokenizer adds it.
    Text(&'a str),
    /// Concatenated as they are (each already starts the way the model read it) and cut into
    /// windows.
    Sequences(&'a [Vec<u32>]),
}

impl<'a> From<&'a str> for TrainingData<'a> {
    fn from(text: &'a str) -> Self {
        TrainingData::Text(text)
    }
}

impl<'a> From<&'a String> for TrainingData<'a> {
    fn from(text: &'a String) -> Self {
        TrainingData::Text(text)
    }
}

impl<'a> From<&'a [Vec<u32>]> for TrainingData<'a> {
    fn from(seqs: &'a [Vec<u32>]) -> Self {
        TrainingData::Sequences(seqs)
    }
}

impl<'a> From<&'a Vec<Vec<u32>>> for TrainingData<'a> {
    fn from(seqs: &'a Vec<Vec<u32>>) -> Self {
        TrainingData::Sequences(seqs)
    }
}

impl TrainingData<'_> {
    /// sha256 of the data (of the text's bytes, as before sequences existed; of the sequences'
    /// little-endian ids, each sequence ended by 0xFFFFFFFF).
    pub fn sha256(&self) -> String {
        match self {
            TrainingData::Text(t) => crate::model::fingerprint::bytes_sha256(t.as_bytes()),
            TrainingData::Sequences(s) => {
                let bytes: Vec<u8> = s
                    .iter()
                    .flat_map(|seq| seq.iter().copied().chain([u32::MAX]))
                    .flat_map(u32::to_le_bytes)
                    .collect();
                crate::model::fingerprint::bytes_sha256(&bytes)
            }
        }
    }

    /// Windows of `seq_len` token ids, in data order (a last partial window is dropped).
    pub(crate) fn windows(
        &self,
        tokenizer: &TextTokenizer,
        seq_len: usize,
    ) -> Result<Vec<Vec<u32>>> {
        Ok(match self {
            TrainingData::Text(text) => {
                let with_bos = tokenizer.encode("", true)?;
                let body = tokenizer.encode(text, false)?;
                let room = seq_len - with_bos.len();
                body.chunks_exact(room.max(1))
                    .map(|c| with_bos.iter().chain(c).copied().collect())
                    .collect()
            }
            TrainingData::Sequences(seqs) => sequence_windows(seqs, seq_len),
        })
    }
}

/// Sequences concatenated as they are and cut into windows of `seq_len` (a last partial window
/// dropped).
fn sequence_windows(seqs: &[Vec<u32>], seq_len: usize) -> Vec<Vec<u32>> {
    let all: Vec<u32> = seqs.iter().flatten().copied().collect();
    all.chunks_exact(seq_len.max(1))
        .map(<[u32]>::to_vec)
        .collect()
}

/// Token sequences read from an experiment's records, and the model that wrote them.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordSequences {
    /// Per record: its prompt ids (chat template and BOS as the model read them) then its
    /// generated ids.
    pub sequences: Vec<Vec<u32>>,
    /// The weights' sha256 in the records' provenance (None where a record carries none).
    pub model_sha256: Option<String>,
    /// The file read.
    pub path: PathBuf,
}

#[derive(Deserialize)]
struct RecordLine {
    #[serde(default)]
    index: usize,
    profile: RecordProfile,
}

#[derive(Deserialize)]
struct RecordProfile {
    prompt_ids: Vec<u32>,
    #[serde(default)]
    generated_ids: Vec<u32>,
    #[serde(default)]
    provenance: Option<RecordProvenance>,
}

#[derive(Deserialize)]
struct RecordProvenance {
    #[serde(default)]
    model_sha256: String,
}

/// Whether `path` names an experiment's records (a run folder holding `records.jsonl`, or that
/// file itself) rather than a text.
pub fn is_records(path: &Path) -> bool {
    path.join("records.jsonl").is_file() || path.file_name().is_some_and(|n| n == "records.jsonl")
}

/// The prompt-and-generation ids of every record of an experiment (`path`: its folder or its
/// `records.jsonl`), in item order (a resumed or batched run writes its lines in the order batches
/// finish), leaving out the first `skip` items (e.g. the items whose prompts a table is read on).
///
/// # Errors
/// No such file, a line that is not a record, records of several models, or nothing left after
/// `skip`.
pub fn read_record_sequences(path: &Path, skip: usize) -> Result<RecordSequences> {
    let file = if path.is_dir() {
        path.join("records.jsonl")
    } else {
        path.to_path_buf()
    };
    let raw = std::fs::read_to_string(&file).map_err(|e| Error::io(&file, e))?;
    let lines: Vec<(usize, &str)> = raw
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    if skip >= lines.len() {
        return Err(Error::invalid(format!(
            "--skip-records {skip} leaves nothing of the {} records of {}",
            lines.len(),
            file.display()
        )));
    }
    let mut records = lines
        .iter()
        .map(|(i, line)| {
            serde_json::from_str::<RecordLine>(line)
                .map(|r| (*i, r))
                .map_err(|e| {
                    Error::Data(format!(
                        "{} line {}: not an experiment record with a profile ({e})",
                        file.display(),
                        i + 1
                    ))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    records.sort_by_key(|(_, r)| r.index);
    let mut sequences = Vec::with_capacity(lines.len() - skip);
    let mut model_sha256: Option<String> = None;
    for (i, r) in records.into_iter().skip(skip) {
        let p = r.profile;
        if let Some(sha) = p
            .provenance
            .map(|x| x.model_sha256)
            .filter(|s| !s.is_empty())
        {
            match &model_sha256 {
                Some(seen) if *seen != sha => {
                    return Err(Error::invalid(format!(
                        "{} holds records of two models (line {}): train on one model's records",
                        file.display(),
                        i + 1
                    )))
                }
                _ => model_sha256 = Some(sha),
            }
        }
        sequences.push(p.prompt_ids.into_iter().chain(p.generated_ids).collect());
    }
    Ok(RecordSequences {
        sequences,
        model_sha256,
        path: file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_concatenated_and_cut_without_a_new_bos() {
        let seqs = vec![vec![1, 2, 3], vec![1, 4, 5, 6, 7]];
        let data = TrainingData::from(&seqs);
        assert_eq!(
            sequence_windows(&seqs, 3),
            vec![vec![1, 2, 3], vec![1, 4, 5]]
        );
        // Different data, different digests; the text digest is the bytes' sha256 as before.
        let other = vec![vec![1, 2], vec![3, 1, 4, 5, 6, 7]];
        assert_ne!(data.sha256(), TrainingData::from(&other).sha256());
        assert_eq!(
            TrainingData::from("abc").sha256(),
            crate::model::fingerprint::bytes_sha256(b"abc")
        );
    }
}
