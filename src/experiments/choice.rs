//! Multiple-choice answers read from a model: the probability of each option letter after the
//! prompt (`letters`, the paper's §5.4), or the first option letter in a greedy generation
//! (`generate`, the authors' code). Shared by `mmlu` and `skip`.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::data::mmlu_questions::LETTERS;
use crate::error::{Error, Result};
use crate::model::TextTokenizer;

/// How the model's answer is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerMethod {
    /// The letter with the highest next-token probability after the prompt (paper §5.4).
    Letters,
    /// The first option letter in a greedy generation (the authors' `run_experiments.py`); an
    /// answer naming no option is wrong and flagged.
    Generate,
}

impl AnswerMethod {
    pub fn name(self) -> &'static str {
        match self {
            AnswerMethod::Letters => "letters",
            AnswerMethod::Generate => "generate",
        }
    }
}

impl FromStr for AnswerMethod {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "letters" => Ok(AnswerMethod::Letters),
            "generate" => Ok(AnswerMethod::Generate),
            o => Err(Error::invalid(format!(
                "unknown answer method `{o}` (expected letters or generate)"
            ))),
        }
    }
}

/// The token ids scored for each option letter: the letter after a space (`" A"`, how a
/// tokenizer usually continues `Answer:`) and the bare letter (`"A"`), each where it is one
/// token. A letter's probability is the sum over its ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LetterTokens {
    pub ids: BTreeMap<String, Vec<u32>>,
}

impl LetterTokens {
    /// Finds the ids in `tokenizer`'s vocabulary; fails when a letter has no single-token form.
    pub fn new(tokenizer: &TextTokenizer) -> Result<Self> {
        let mut ids = BTreeMap::new();
        for letter in LETTERS {
            let mut forms = Vec::new();
            for text in [format!(" {letter}"), letter.to_string()] {
                if let [id] = tokenizer.encode(&text, false)?.as_slice() {
                    if !forms.contains(id) {
                        forms.push(*id);
                    }
                }
            }
            if forms.is_empty() {
                return Err(Error::invalid(format!(
                    "the tokenizer splits both \" {letter}\" and \"{letter}\" into several tokens, so option letters cannot be scored; use --method generate"
                )));
            }
            ids.insert(letter.to_string(), forms);
        }
        let all: Vec<u32> = ids.values().flatten().copied().collect();
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        if unique.len() != all.len() {
            return Err(Error::invalid(format!(
                "two option letters share a token id ({ids:?}); use --method generate"
            )));
        }
        Ok(Self { ids })
    }

    /// Next-token probability of each letter (the sum over its forms) from `logits`.
    pub fn probs(&self, logits: &[f32]) -> Result<BTreeMap<String, f64>> {
        if logits.iter().any(|v| v.is_nan()) {
            return Err(Error::Data(
                "the model's logits contain NaN; its answer cannot be scored".into(),
            ));
        }
        let max = logits
            .iter()
            .fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let z: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
        let mut out = BTreeMap::new();
        for (letter, ids) in &self.ids {
            let mut p = 0.0;
            for &id in ids {
                let v = logits.get(id as usize).ok_or_else(|| {
                    Error::Data(format!(
                        "token id {id} of option {letter} is outside the model's {} logits",
                        logits.len()
                    ))
                })?;
                p += (*v as f64 - max).exp() / z;
            }
            out.insert(letter.clone(), p);
        }
        Ok(out)
    }
}

/// The letter of highest probability (the earlier letter on a tie).
pub fn most_probable(probs: &BTreeMap<String, f64>) -> Option<String> {
    let mut best: Option<(&String, f64)> = None;
    for letter in LETTERS {
        if let Some((k, &p)) = probs.get_key_value(letter) {
            if best.is_none_or(|(_, b)| p > b) {
                best = Some((k, p));
            }
        }
    }
    best.map(|(k, _)| k.clone())
}

/// The first option letter A-D standing on its own in `text`: not preceded or followed by a
/// letter or digit (`"B"`, `" B."`, `"(C)"`, `"Answer: D"` match; `"Because"`, `"AB"` do not).
/// An English article "A" counts, as in the authors' pattern.
pub fn first_letter(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !matches!(c, 'A'..='D') {
            continue;
        }
        let before = i.checked_sub(1).map(|j| chars[j]);
        let after = chars.get(i + 1).copied();
        if !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric) {
            return Some(c.to_string());
        }
    }
    None
}

/// One run with blocks skipped (the `skip` experiment).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkipTrial {
    /// `expansion`, `pruning` or `random`.
    pub strategy: String,
    /// Share of the blocks skipped (before rounding).
    pub fraction: f64,
    /// The blocks skipped, numbered 1..=L, in rank order.
    pub skipped: Vec<usize>,
    pub letter_probs: BTreeMap<String, f64>,
    pub chosen: Option<String>,
}

/// The model's answer to one multiple-choice prompt, as stored in `records.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Prompt style (`base`, `instruct`, `humble`).
    pub style: String,
    /// The exact text the model was given (after the chat template, when used).
    pub prompt: String,
    /// Next-token probability of each letter after the prompt (see [`LetterTokens`]).
    pub letter_probs: BTreeMap<String, f64>,
    /// The chosen letter; `None` when a generation named no option.
    pub chosen: Option<String>,
    /// The correct letter.
    pub correct: String,
    /// The greedy generation the letter was read from (`generate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<String>,
    /// A generation that named no option (counted wrong).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flagged: bool,
    /// Token ids compared for each letter.
    pub letter_ids: BTreeMap<String, Vec<u32>>,
    /// Runs with blocks skipped (`skip` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<SkipTrial>,
}

impl Answer {
    pub fn is_correct(&self) -> bool {
        self.chosen.as_deref() == Some(self.correct.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_found_in_generations() {
        assert_eq!(first_letter(" B. Paris").as_deref(), Some("B"));
        assert_eq!(first_letter("(C) 4").as_deref(), Some("C"));
        assert_eq!(first_letter("Because D").as_deref(), Some("D"));
        assert_eq!(first_letter("AB CD"), None);
        assert_eq!(first_letter("The answer is 4"), None);
        assert_eq!(first_letter("E or F"), None);
        assert_eq!(first_letter("D"), Some("D".into()));
    }

    #[test]
    fn probabilities_sum_the_forms_and_ties_go_to_the_earlier_letter() {
        let t = LetterTokens {
            ids: [
                ("A", vec![0, 1]),
                ("B", vec![2]),
                ("C", vec![3, 5]),
                ("D", vec![4]),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        };
        let logits = [0.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        let p = t.probs(&logits).unwrap();
        let z = 6.0 + 1f64.exp();
        assert!((p["A"] - 2.0 / z).abs() < 1e-12);
        assert!((p["B"] - 1.0 / z).abs() < 1e-12);
        assert_eq!(p["A"], p["C"]);
        assert_eq!(most_probable(&p).as_deref(), Some("A"));
        assert!(t.probs(&[f32::NAN; 7]).is_err());
        assert!(t.probs(&[0.0; 3]).is_err());
    }
}
