//! MMLU (Hendrycks et al., 2021) for the correctness experiment (paper §5.4 / A.2): questions with
//! subject, four options and the answer; a seeded, subject-stratified subsample; the prompts of
//! Appendix B.3 (Table 8) in its three styles.
//!
//! Questions load from a local JSON Lines file (`{"subject", "question", "choices": [4], "answer"}`
//! per line, the layout of `cais/mmlu` rows and of this repository's `data/mmlu/`), a Parquet file as the Hub
//! stores `cais/mmlu` (`all/<split>-00000-of-00001.parquet`), or the Hub itself through `hf-hub`.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// The Hub dataset.
pub const HUB_DATASET: &str = "cais/mmlu";
/// The option letters, in order.
pub const LETTERS: [&str; 4] = ["A", "B", "C", "D"];

/// One multiple-choice question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// `<subject>/<n>`: the n-th question of its subject in the file's order (0-based).
    pub id: String,
    /// The MMLU subject as the dataset names it (`high_school_psychology`).
    pub subject: String,
    pub question: String,
    pub choices: [String; 4],
    /// Index of the correct option, 0..=3.
    pub answer: usize,
}

impl Question {
    /// The letter of the correct option.
    pub fn answer_letter(&self) -> &'static str {
        LETTERS[self.answer]
    }

    /// The subject as prose: underscores become spaces (`high school psychology`).
    pub fn subject_text(&self) -> String {
        self.subject.replace('_', " ")
    }
}

/// The three prompt styles of Appendix B.3 (Table 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptStyle {
    /// The question as it is.
    Base,
    /// An explicit instruction to reply with the correct option.
    Instruct,
    /// The instruction plus "if unsure, reply with a random option".
    Humble,
}

impl PromptStyle {
    pub const ALL: [PromptStyle; 3] = [
        PromptStyle::Base,
        PromptStyle::Instruct,
        PromptStyle::Humble,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PromptStyle::Base => "base",
            PromptStyle::Instruct => "instruct",
            PromptStyle::Humble => "humble",
        }
    }

    /// The prompt of Table 8 for `q`, one line, ending with `Answer:` (the model's next token is
    /// its answer). The subject is written as prose (underscores as spaces).
    pub fn prompt(self, q: &Question) -> String {
        let head = match self {
            PromptStyle::Base => format!("Subject: {}", q.subject_text()),
            PromptStyle::Instruct => format!(
                "The following is a multiple-choice question about {}. Reply only with the correct option.",
                q.subject_text()
            ),
            PromptStyle::Humble => format!(
                "The following is a multiple-choice question about {}. Reply only with the correct option. If you are unsure about the answer, reply with a completely random option.",
                q.subject_text()
            ),
        };
        let [a, b, c, d] = &q.choices;
        format!(
            "{head} Question: {} Choices: A. {a} B. {b} C. {c} D. {d} Answer:",
            q.question
        )
    }
}

impl fmt::Display for PromptStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PromptStyle {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        PromptStyle::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown MMLU prompt style `{s}` (expected base, instruct or humble)"
                ))
            })
    }
}

/// A row before validation: `answer` as an index or a letter.
#[derive(Deserialize)]
struct Row {
    subject: String,
    question: String,
    choices: Vec<String>,
    answer: Value,
}

/// Checks rows and numbers them within their subject.
fn questions_from_rows(rows: Vec<Row>, what: &str) -> Result<Vec<Question>> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for (i, row) in rows.into_iter().enumerate() {
        let bad = |reason: String| Error::Data(format!("{what}, question {}: {reason}", i + 1));
        let choices: [String; 4] = row
            .choices
            .try_into()
            .map_err(|c: Vec<String>| bad(format!("{} choices, expected 4", c.len())))?;
        let answer = match &row.answer {
            Value::Number(n) => n.as_u64().map(|a| a as usize),
            Value::String(s) => LETTERS.iter().position(|l| l == s),
            _ => None,
        }
        .filter(|&a| a < 4)
        .ok_or_else(|| bad(format!("answer {} is not 0-3 or A-D", row.answer)))?;
        if row.subject.is_empty() || row.question.is_empty() {
            return Err(bad("empty subject or question".into()));
        }
        let n = seen.entry(row.subject.clone()).or_insert(0);
        out.push(Question {
            id: format!("{}/{}", row.subject, n),
            subject: row.subject,
            question: row.question,
            choices,
            answer,
        });
        *n += 1;
    }
    if out.is_empty() {
        return Err(Error::Data(format!("{what} holds no questions")));
    }
    Ok(out)
}

/// Parses JSON Lines of `{"subject", "question", "choices", "answer"}` (answer 0-3 or A-D).
pub fn parse_jsonl(text: &str, what: &str) -> Result<Vec<Question>> {
    let rows = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<Row>(l)
                .map_err(|e| Error::Data(format!("{what} line {}: {e}", i + 1)))
        })
        .collect::<Result<Vec<_>>>()?;
    questions_from_rows(rows, what)
}

/// Reads a Parquet file with the columns of `cais/mmlu` (`question`, `subject`, `choices`,
/// `answer`).
///
/// # Errors
/// [`Error::Data`] for a file that is not such a table, and when the crate was built without its
/// `parquet` feature (the message says how to get it, or to use JSON Lines).
#[cfg(not(feature = "parquet"))]
pub fn read_parquet(path: &Path) -> Result<Vec<Question>> {
    Err(Error::Data(format!(
        "{}: reading Parquet needs entropy-lens built with its `parquet` feature (on for the command; in a notebook `:dep entropy-lens = {{ ..., features = [\"parquet\"] }}`), or give the questions as JSON Lines",
        path.display()
    )))
}

/// Reads a Parquet file with the columns of `cais/mmlu` (`question`, `subject`, `choices`,
/// `answer`).
#[cfg(feature = "parquet")]
pub fn read_parquet(path: &Path) -> Result<Vec<Question>> {
    // The parquet crate indexes out of bounds on some corrupt pages (found by tests/fuzz.rs).
    crate::error::guard_dependency(
        || read_parquet_unguarded(path),
        |msg| {
            Error::Data(format!(
                "{}: corrupt Parquet file (the parquet library failed on it: {msg}); download it again",
                path.display()
            ))
        },
    )
}

#[cfg(feature = "parquet")]
fn read_parquet_unguarded(path: &Path) -> Result<Vec<Question>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::{Field, ListAccessor};

    let what = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let bad = |e: parquet::errors::ParquetError| Error::Data(format!("{what}: {e}"));
    let reader = SerializedFileReader::new(file).map_err(bad)?;
    let mut rows = Vec::new();
    for (i, row) in reader.get_row_iter(None).map_err(bad)?.enumerate() {
        let row = row.map_err(bad)?;
        let mut subject = None;
        let mut question = None;
        let mut choices = None;
        let mut answer = None;
        for (name, field) in row.get_column_iter() {
            match (name.as_str(), field) {
                ("subject", Field::Str(s)) => subject = Some(s.clone()),
                ("question", Field::Str(s)) => question = Some(s.clone()),
                ("choices", Field::ListInternal(list)) => {
                    choices = Some(
                        (0..list.len())
                            .map(|j| list.get_string(j).cloned())
                            .collect::<std::result::Result<Vec<String>, _>>()
                            .map_err(bad)?,
                    )
                }
                ("answer", Field::Long(a)) => answer = Some(Value::from(*a)),
                ("answer", Field::Int(a)) => answer = Some(Value::from(*a)),
                ("answer", Field::Str(a)) => answer = Some(Value::from(a.clone())),
                _ => {}
            }
        }
        let missing = |col: &str| {
            Error::Data(format!(
                "{what}, row {}: no `{col}` column of the expected type (cais/mmlu has question: string, subject: string, choices: list<string>, answer: int64)",
                i + 1
            ))
        };
        rows.push(Row {
            subject: subject.ok_or_else(|| missing("subject"))?,
            question: question.ok_or_else(|| missing("question"))?,
            choices: choices.ok_or_else(|| missing("choices"))?,
            answer: answer.ok_or_else(|| missing("answer"))?,
        });
    }
    questions_from_rows(rows, &what)
}

/// The embedded sample: the first 4 questions of each of the 57 subjects of the test split (228),
/// in the test split's order, for smoke runs without a download.
pub const SAMPLE_QUESTIONS: &str = include_str!("../../data/mmlu_test_sample.jsonl");

/// The embedded sample's questions (ids `<subject>/<n>` as in the full test split: n < 4).
pub fn sample_questions() -> Result<Vec<Question>> {
    parse_jsonl(SAMPLE_QUESTIONS, "embedded:data/mmlu_test_sample.jsonl")
}

/// The file a local path stands for: the path itself, or in a folder `test.jsonl` or the Hub's
/// `all/test-00000-of-00001.parquet`.
pub fn resolve_file(path: &Path) -> Result<PathBuf> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    for candidate in [
        path.join("test.jsonl"),
        path.join("all").join(hub_file("test")),
    ] {
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(Error::Data(format!(
        "{} holds neither test.jsonl nor all/{}",
        path.display(),
        hub_file("test")
    )))
}

/// Loads questions from a local path: a `.jsonl` / `.json` file, a `.parquet` file, or a folder in
/// the Hub's layout of `cais/mmlu` holding `all/test-*.parquet` (or `test.jsonl`).
pub fn load(path: &Path) -> Result<Vec<Question>> {
    let path = &resolve_file(path)?;
    if path.extension().is_some_and(|e| e == "parquet") {
        return read_parquet(path);
    }
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::Data(format!(
            "MMLU file {} not found\n  hint: pass a JSON Lines or Parquet file of cais/mmlu with --data, or omit --data to use the Hub",
            path.display()
        )),
        _ => Error::io(path, e),
    })?;
    parse_jsonl(&text, &path.display().to_string())
}

/// The file name of a split in the Hub repository (`test-00000-of-00001.parquet`).
pub fn hub_file(split: &str) -> String {
    format!("{split}-00000-of-00001.parquet")
}

/// Path of `all/<split>-00000-of-00001.parquet` of `cais/mmlu` in the Hub cache (`HF_HOME`),
/// downloading it when missing (`HF_HUB_OFFLINE=1`: the cache only).
pub fn hub_path(split: &str) -> Result<PathBuf> {
    if !cfg!(feature = "parquet") {
        // Said before the download, not after it.
        return Err(Error::Data(format!(
            "{HUB_DATASET} on the Hub is Parquet, which needs entropy-lens built with its `parquet` feature; or pass the questions as JSON Lines (--data data/mmlu/test.jsonl, the whole test split)"
        )));
    }
    let file = format!("all/{}", hub_file(split));
    let repo = hf_hub::Repo::new(HUB_DATASET.to_string(), hf_hub::RepoType::Dataset);
    if let Some(p) = hf_hub::Cache::from_env().repo(repo.clone()).get(&file) {
        return Ok(p);
    }
    let hint = "hint: pass a local copy with --data (JSON Lines or Parquet of cais/mmlu)";
    if std::env::var("HF_HUB_OFFLINE")
        .is_ok_and(|v| matches!(v.as_str(), "1" | "true" | "yes" | "on"))
    {
        return Err(Error::Hub(format!(
            "{HUB_DATASET}/{file} is not in the Hub cache and HF_HUB_OFFLINE is set\n  {hint}"
        )));
    }
    hf_hub::api::sync::ApiBuilder::from_env()
        .with_progress(true)
        .build()
        .and_then(|api| api.repo(repo).get(&file))
        .map_err(|e| Error::Hub(format!("cannot fetch {HUB_DATASET}/{file}: {e}\n  {hint}")))
}

/// The questions of a split (`test`, `dev`, `validation`) of `cais/mmlu` from the Hub.
pub fn load_from_hub(split: &str) -> Result<Vec<Question>> {
    read_parquet(&hub_path(split)?)
}

/// A seeded, subject-stratified subsample of `n` questions: each subject contributes in
/// proportion to its size (largest remainders break ties, then subject order), the questions of a
/// subject are drawn by a seeded shuffle. The result is ordered by subject, then by position in the
/// source. `n` at least the number of questions returns them all.
pub fn stratified_sample(questions: &[Question], n: usize, seed: u64) -> Result<Vec<Question>> {
    if n == 0 {
        return Err(Error::invalid("an MMLU sample needs at least one question"));
    }
    if n >= questions.len() {
        return Ok(questions.to_vec());
    }
    let mut by_subject: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, q) in questions.iter().enumerate() {
        by_subject.entry(&q.subject).or_default().push(i);
    }
    let total = questions.len() as f64;
    let mut quota: Vec<(&str, usize, f64)> = by_subject
        .iter()
        .map(|(s, idx)| {
            let exact = n as f64 * idx.len() as f64 / total;
            (*s, exact.floor() as usize, exact - exact.floor())
        })
        .collect();
    let mut left = n - quota.iter().map(|q| q.1).sum::<usize>();
    let mut order: Vec<usize> = (0..quota.len()).collect();
    order.sort_by(|&a, &b| quota[b].2.total_cmp(&quota[a].2).then(a.cmp(&b)));
    for &k in order.iter().cycle() {
        if left == 0 {
            break;
        }
        if quota[k].1 < by_subject[quota[k].0].len() {
            quota[k].1 += 1;
            left -= 1;
        }
    }
    let mut picked = Vec::with_capacity(n);
    for (s, take, _) in quota {
        let mut idx = by_subject[s].clone();
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ fnv1a(s));
        idx.shuffle(&mut rng);
        let mut chosen: Vec<usize> = idx.into_iter().take(take).collect();
        chosen.sort_unstable();
        picked.extend(chosen.into_iter().map(|i| questions[i].clone()));
    }
    Ok(picked)
}

/// A stable 64-bit hash of a subject name (each subject draws from its own stream).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(subject: &str, answer: usize) -> Question {
        Question {
            id: format!("{subject}/0"),
            subject: subject.into(),
            question: "What is 2 + 2?".into(),
            choices: ["3".into(), "4".into(), "5".into(), "22".into()],
            answer,
        }
    }

    #[test]
    fn prompts_are_table_8_exactly() {
        let q = q("elementary_mathematics", 1);
        assert_eq!(
            PromptStyle::Base.prompt(&q),
            "Subject: elementary mathematics Question: What is 2 + 2? Choices: A. 3 B. 4 C. 5 D. 22 Answer:"
        );
        assert_eq!(
            PromptStyle::Instruct.prompt(&q),
            "The following is a multiple-choice question about elementary mathematics. Reply only with the correct option. Question: What is 2 + 2? Choices: A. 3 B. 4 C. 5 D. 22 Answer:"
        );
        assert_eq!(
            PromptStyle::Humble.prompt(&q),
            "The following is a multiple-choice question about elementary mathematics. Reply only with the correct option. If you are unsure about the answer, reply with a completely random option. Question: What is 2 + 2? Choices: A. 3 B. 4 C. 5 D. 22 Answer:"
        );
        assert_eq!(q.answer_letter(), "B");
        assert_eq!(
            "Humble".parse::<PromptStyle>().unwrap(),
            PromptStyle::Humble
        );
        assert!("polite"
            .parse::<PromptStyle>()
            .unwrap_err()
            .to_string()
            .contains("humble"));
    }

    #[test]
    fn rows_are_checked_and_numbered_per_subject() {
        let text = r#"{"subject": "a", "question": "x?", "choices": ["1","2","3","4"], "answer": 3}
{"subject": "b", "question": "y?", "choices": ["1","2","3","4"], "answer": "B"}
{"subject": "a", "question": "z?", "choices": ["1","2","3","4"], "answer": 0}"#;
        let qs = parse_jsonl(text, "t").unwrap();
        assert_eq!(
            qs.iter().map(|q| q.id.as_str()).collect::<Vec<_>>(),
            ["a/0", "b/0", "a/1"]
        );
        assert_eq!(qs[1].answer, 1);
        for (bad, needle) in [
            (
                r#"{"subject": "a", "question": "x", "choices": ["1","2","3"], "answer": 0}"#,
                "3 choices",
            ),
            (
                r#"{"subject": "a", "question": "x", "choices": ["1","2","3","4"], "answer": 4}"#,
                "answer 4",
            ),
            (
                r#"{"subject": "a", "question": "x", "choices": ["1","2","3","4"], "answer": "E"}"#,
                "0-3 or A-D",
            ),
            (r#"{"subject": "a", "question": "x"}"#, "line 1"),
            ("", "no questions"),
        ] {
            let e = parse_jsonl(bad, "t").unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn stratified_sample_is_proportional_seeded_and_ordered() {
        let mut qs = Vec::new();
        for (s, count) in [("a", 60), ("b", 30), ("c", 10)] {
            for i in 0..count {
                let mut x = q(s, i % 4);
                x.id = format!("{s}/{i}");
                qs.push(x);
            }
        }
        let pick = stratified_sample(&qs, 10, 42).unwrap();
        let count = |s: &str| pick.iter().filter(|q| q.subject == s).count();
        assert_eq!((count("a"), count("b"), count("c")), (6, 3, 1));
        assert_eq!(pick, stratified_sample(&qs, 10, 42).unwrap());
        assert_ne!(pick, stratified_sample(&qs, 10, 7).unwrap());
        // Ordered by subject, then source position.
        let pos: Vec<usize> = pick
            .iter()
            .map(|p| qs.iter().position(|q| q.id == p.id).unwrap())
            .collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]));
        // Remainders: 7 of 100 → 4.2, 2.1, 0.7 → 4, 2, 1.
        let pick = stratified_sample(&qs, 7, 1).unwrap();
        assert_eq!(pick.iter().filter(|q| q.subject == "c").count(), 1);
        assert_eq!(stratified_sample(&qs, 500, 1).unwrap().len(), 100);
        assert!(stratified_sample(&qs, 0, 1).is_err());
    }
}
