//! `mmlu` — do entropy profiles carry signal about answer correctness? (Appendix A.2, Table 4.)
//!
//! A seeded, subject-stratified sample of MMLU questions, each asked in the three prompt styles
//! of Appendix B.3 ([`crate::data::mmlu_questions::PromptStyle`]). The model's answer is the option letter
//! of highest next-token probability after the prompt (`letters`, §5.4) or the first option
//! letter of a greedy generation (`generate`, the authors' code, `--protocol authors`); records
//! keep the letter probabilities, the chosen and the correct letter. `tokens` tokens are generated
//! greedily for the profile (the authors: 8); per style, the accuracy, and a kNN (k = 29, 10-fold
//! stratified, seed 42) separating the profiles of correct from wrong answers, against the
//! stratified dummy with the paired t-test.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::choice::{first_letter, most_probable, Answer, AnswerMethod, LetterTokens};
use super::experiment::{Batch, Cx, Experiment};
use super::inputs::{correct_letter, Questions};
use super::outputs::{
    bands_by_label, check_depths, depths_by_label, pct, shannon_matrices, FeatureLayout, Features, KnnScore,
};
use super::plan::{Plan, PlanOption};
use super::settings::{ExperimentConfig, Protocol, Scale, token_aggregation};
use super::store::{Record, WorkItem};
use crate::analysis::{knn_cross_validate, KnnCvConfig, Labels, Table};
use crate::data::mmlu_questions::PromptStyle;
use crate::error::{Error, Result};
use crate::plots::{prediction_depth_curves, profile_bands, Band, Chart};
use crate::profile::{aggregate, Aggregation, DepthSummary, EntropyProfile};
use crate::runner::{ProfileRequest, Profiler};

/// Table 4 (instruction-tuned Llama and Gemma): model, prompt style, LLM accuracy (%), kNN ROC-AUC
/// (%) correct vs wrong, std.
pub const TABLE4_MMLU: [(&str, &str, f64, f64, f64); 6] = [
    ("Llama", "base", 50.89, 73.61, 1.52),
    ("Llama", "humble", 58.51, 69.90, 1.06),
    ("Llama", "instruct", 60.62, 67.23, 1.62),
    ("Gemma", "base", 56.10, 71.88, 1.63),
    ("Gemma", "humble", 54.71, 72.78, 1.15),
    ("Gemma", "instruct", 56.38, 68.36, 1.23),
];

/// The experiment (registered as `mmlu`).
pub struct Mmlu;

/// What `mmlu` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MmluSpec {
    /// Questions in the sample; each is asked in every style.
    pub questions: usize,
    pub styles: Vec<PromptStyle>,
    pub method: AnswerMethod,
    /// Tokens generated greedily per prompt; the profile covers them.
    pub tokens: usize,
    pub aggregation: Aggregation,
    pub knn: KnnCvConfig,
}

impl Experiment for Mmlu {
    const NAME: &'static str = "mmlu";
    const PAPER: &'static str = "Table 4";
    const SUMMARY: &'static str =
        "MMLU accuracy and correct-vs-wrong kNN per prompt style";
    const OPTIONS: &'static [PlanOption] = &[
        PlanOption::Data,
        PlanOption::Chat,
        PlanOption::Sampling,
        PlanOption::Tokens,
        PlanOption::K,
        PlanOption::Folds,
        PlanOption::Method,
    ];
    type Spec = MmluSpec;
    type Result = MmluResult;
    type Input = Questions;
    type Instrument = Profiler;

    fn spec(plan: &Plan) -> Result<MmluSpec> {
        let questions = match plan.scale {
            Scale::Smoke => 40,
            Scale::Paper => 1000,
        };
        let method = plan.method.unwrap_or(match plan.protocol {
            Protocol::Paper => AnswerMethod::Letters,
            Protocol::Authors => AnswerMethod::Generate,
        });
        let spec = MmluSpec {
            questions: plan.n.unwrap_or(questions),
            styles: PromptStyle::ALL.to_vec(),
            method,
            tokens: plan.tokens.unwrap_or(8),
            aggregation: token_aggregation(plan.protocol),
            knn: plan.knn(),
        };
        if spec.questions == 0 || spec.tokens == 0 {
            return Err(Error::invalid(
                "mmlu needs at least one question (--n) and one generated token (--tokens)",
            ));
        }
        Ok(spec)
    }

    fn tokens(spec: &MmluSpec) -> usize {
        spec.tokens
    }

    /// Question-major: every style of a question in a row.
    fn items(cfg: &ExperimentConfig, spec: &MmluSpec, questions: &Questions) -> Result<Vec<WorkItem>> {
        questions.items(spec.questions, cfg.seed, &spec.styles)
    }

    fn prepare(cx: &Cx<'_, Self>, profiler: &mut Profiler) -> Result<()> {
        let letters = LetterTokens::new(&profiler.tokenizer)?;
        cx.log(&format!("option letters compared as token ids {:?}", letters.ids))
    }

    /// The batch's questions as one left-padded batch: each profile over `tokens` greedy tokens,
    /// and each answer from the next-token logits after its prompt.
    fn measure(cx: &Cx<'_, Self>, profiler: &mut Profiler, batch: &Batch<'_>) -> Result<Vec<Record>> {
        let letters = LetterTokens::new(&profiler.tokenizer)?;
        let reqs: Vec<ProfileRequest> = batch.items().iter().map(|i| cx.request(i)).collect();
        let scored = profiler.run_batch_scored(&reqs, None)?;
        let measured = batch.items().iter().zip(reqs.iter().zip(scored));
        batch
            .keep_todo(measured, |item, (req, (profile, logits))| {
                answer(cx.spec, profiler, &letters, item, req, profile, &logits)
            })
            .into_iter()
            .collect()
    }

    fn finish(
        cfg: &ExperimentConfig,
        spec: &MmluSpec,
        records: &[Record],
    ) -> Result<(MmluResult, Features)> {
        finish(cfg, spec, records)
    }

    fn comparison(results: &[&MmluResult]) -> Vec<Table> {
        vec![MmluResult::comparison(results)]
    }

    fn tables(result: &MmluResult) -> Vec<Table> {
        result.tables()
    }

    fn charts(result: &MmluResult) -> Result<Vec<Chart>> {
        result.charts()
    }
}

/// The record of one item from its profile and the next-token logits after its prompt.
fn answer(
    spec: &MmluSpec,
    profiler: &Profiler,
    letters: &LetterTokens,
    item: &WorkItem,
    req: &ProfileRequest,
    profile: EntropyProfile,
    logits: &[f32],
) -> Result<Record> {
    let letter_probs = letters.probs(logits)?;
    let (chosen, generated) = match spec.method {
        AnswerMethod::Letters => (most_probable(&letter_probs), None),
        AnswerMethod::Generate => (
            first_letter(&profile.generated_text),
            Some(profile.generated_text.clone()),
        ),
    };
    let answer = Answer {
        style: item.label.clone(),
        prompt: profiler.model_text(req)?,
        flagged: chosen.is_none(),
        letter_probs,
        chosen,
        correct: correct_letter(item)?,
        generated,
        letter_ids: letters.ids.clone(),
        trials: Vec::new(),
    };
    Ok(Record::answered(item, profile, answer))
}

/// Why the kNN cannot run on these labels (too few of a class for the folds, or for k), if so.
fn knn_obstacle(labels: &Labels, knn: &KnnCvConfig) -> Option<String> {
    let n = labels.encoded.len();
    if labels.n_classes() < 2 {
        return Some(format!(
            "all {n} answers are {}: nothing to separate",
            labels
                .classes
                .first()
                .map(String::as_str)
                .unwrap_or("absent")
        ));
    }
    let counts = labels.counts();
    if let Some((c, &m)) = counts.iter().enumerate().min_by_key(|(_, &m)| m) {
        if m < knn.folds {
            return Some(format!(
                "only {m} {} answers, fewer than the {} folds",
                labels.classes[c], knn.folds
            ));
        }
    }
    let split = match crate::analysis::crossval::stratified_kfold(
        &labels.encoded,
        labels.n_classes(),
        knn.folds,
        knn.seed,
    ) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    let smallest_train = n - split.iter().map(Vec::len).max().unwrap_or(0);
    if knn.k == 0 || knn.k > smallest_train {
        return Some(format!(
            "k = {} neighbours cannot run on {n} answers in {} folds (a training fold has {smallest_train})",
            knn.k, knn.folds
        ));
    }
    None
}

/// The kNN result of one style, or why it could not run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StyleScore {
    pub n: usize,
    pub n_correct: usize,
    pub accuracy: f64,
    /// Answers that named no option (`generate`).
    pub flagged: usize,
    #[serde(flatten)]
    pub knn: Option<KnnScore>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knn_skipped: Option<String>,
}

/// `result.json` of `mmlu`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MmluResult {
    pub experiment: String,
    pub model: String,
    /// `letters` or `generate`.
    pub method: String,
    pub n_questions: usize,
    pub tokens: usize,
    pub aggregation: Aggregation,
    /// Share of correct answers per style.
    pub accuracy_by_style: BTreeMap<String, f64>,
    /// kNN correct-vs-wrong ROC-AUC per style (null where it could not run: see `by_style`).
    pub auc_by_style: BTreeMap<String, Option<KnnScore>>,
    pub by_style: BTreeMap<String, StyleScore>,
    /// Token ids compared for each letter.
    pub letter_ids: BTreeMap<String, Vec<u32>>,
    /// Mean profile ± std per style and correctness.
    pub mean_profiles: Vec<Band>,
    /// Prediction depth of the measured tokens of the generated answers, per style and correctness (absent for records written before depths
    /// existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction_depth: Option<Vec<DepthSummary>>,
}

/// Computes the result from the records (sorted by item).
pub fn finish(
    cfg: &ExperimentConfig,
    spec: &MmluSpec,
    records: &[Record],
) -> Result<(MmluResult, Features)> {
    let l = check_depths(cfg, spec.tokens, records)?;
    let mut features = Features::new(FeatureLayout::tokens_by_layers(
        spec.tokens,
        l,
        "shannon",
        spec.aggregation,
    ));
    let matrices = shannon_matrices(records)?;
    for (r, m) in records.iter().zip(&matrices) {
        features.push(r, aggregate(m.view(), spec.aggregation)?.to_vec())?;
    }
    let x = features.matrix()?;
    let answers: Vec<&Answer> = records.iter().map(Record::answer).collect::<Result<_>>()?;
    let (mut accuracy_by_style, mut auc_by_style, mut by_style) =
        (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let mut band_labels = Vec::new();
    for style in &spec.styles {
        let rows: Vec<usize> = (0..records.len())
            .filter(|&i| answers[i].style == style.name())
            .collect();
        let n = rows.len();
        let n_correct = rows.iter().filter(|&&i| answers[i].is_correct()).count();
        let flagged = rows.iter().filter(|&&i| answers[i].flagged).count();
        let labels = Labels::encode(
            &rows
                .iter()
                .map(|&i| records[i].label.as_str())
                .collect::<Vec<_>>(),
        );
        let obstacle = knn_obstacle(&labels, &spec.knn);
        let knn = match &obstacle {
            Some(_) => None,
            None => {
                let xs = x.select(ndarray::Axis(0), &rows);
                Some(KnnScore::from(&knn_cross_validate(
                    xs.view(),
                    &labels,
                    &spec.knn,
                )?))
            }
        };
        let accuracy = if n == 0 {
            0.0
        } else {
            n_correct as f64 / n as f64
        };
        accuracy_by_style.insert(style.name().to_string(), accuracy);
        auc_by_style.insert(style.name().to_string(), knn.clone());
        by_style.insert(
            style.name().to_string(),
            StyleScore {
                n,
                n_correct,
                accuracy,
                flagged,
                knn,
                knn_skipped: obstacle,
            },
        );
        for label in ["correct", "wrong"] {
            band_labels.push(format!("{}: {label}", style.name()));
        }
    }
    // Bands per style and correctness, each over its records' token-averaged profiles.
    let keyed: Vec<Record> = records
        .iter()
        .zip(&answers)
        .map(|(r, a)| Record {
            label: format!("{}: {}", a.style, r.label),
            ..r.clone()
        })
        .collect();
    let present: Vec<String> = band_labels
        .into_iter()
        .filter(|b| keyed.iter().any(|r| &r.label == b))
        .collect();
    let mean_profiles = bands_by_label(&keyed, &matrices, &present)?;
    let n_questions = records.len() / spec.styles.len().max(1);
    let result = MmluResult {
        experiment: "mmlu".into(),
        model: cfg.model.name.clone(),
        method: spec.method.name().into(),
        n_questions,
        tokens: spec.tokens,
        aggregation: spec.aggregation,
        accuracy_by_style,
        auc_by_style,
        by_style,
        letter_ids: answers
            .first()
            .map(|a| a.letter_ids.clone())
            .unwrap_or_default(),
        mean_profiles,
        prediction_depth: depths_by_label(&keyed, &present),
    };
    Ok((result, features))
}

impl MmluResult {
    /// Our accuracy and AUC beside the paper's Table 4, for one or more models.
    pub fn comparison(results: &[&MmluResult]) -> Table {
        let mut t = Table::new(
            "MMLU correctness (Table 4): LLM accuracy and kNN ROC-AUC correct vs wrong (%), ours beside the paper's",
            &["model", "prompt", "LLM acc.", "kNN AUC", "dummy AUC", "source"],
        );
        for r in results {
            for (style, s) in &r.by_style {
                let (auc, dummy) = match &s.knn {
                    Some(k) => (
                        format!("{} ± {}", pct(k.auc_mean), pct(k.auc_std)),
                        pct(k.baseline_auc_mean),
                    ),
                    None => ("—".into(), "—".into()),
                };
                t.row(vec![
                    r.model.clone(),
                    style.clone(),
                    pct(s.accuracy),
                    auc,
                    dummy,
                    format!(
                        "ours: {} questions, {} answers ({} correct), {}",
                        r.n_questions, s.n, s.n_correct, r.method
                    ),
                ]);
            }
        }
        for (m, style, acc, auc, sd) in TABLE4_MMLU {
            t.row(vec![
                m.into(),
                style.into(),
                format!("{acc:.2}"),
                format!("{auc:.2} ± {sd:.2}"),
                "—".into(),
                "paper".into(),
            ]);
        }
        t.note("chance accuracy is 25 %; the paper's models are instruction-tuned Llama and Gemma of 1-9B parameters");
        for r in results {
            for (style, s) in &r.by_style {
                if let Some(why) = &s.knn_skipped {
                    t.note(format!("{} {style}: no kNN ({why})", r.model));
                }
            }
        }
        t
    }

    /// Per style: answers, correct, flagged, and the kNN details.
    pub fn tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            format!("{}: answers per prompt style ({})", self.model, self.method),
            &[
                "style",
                "answers",
                "correct",
                "flagged",
                "kNN AUC",
                "dummy AUC",
                "p-value",
            ],
        );
        for (style, s) in &self.by_style {
            let (auc, dummy, p) = match &s.knn {
                Some(k) => (
                    format!("{} ± {}", pct(k.auc_mean), pct(k.auc_std)),
                    format!("{} ± {}", pct(k.baseline_auc_mean), pct(k.baseline_auc_std)),
                    k.p_value.map(|p| format!("{p:.2e}")).unwrap_or("—".into()),
                ),
                None => (
                    s.knn_skipped.clone().unwrap_or_default(),
                    "—".into(),
                    "—".into(),
                ),
            };
            t.row(vec![
                style.clone(),
                s.n.to_string(),
                s.n_correct.to_string(),
                s.flagged.to_string(),
                auc,
                dummy,
                p,
            ]);
        }
        let ids: Vec<String> = self
            .letter_ids
            .iter()
            .map(|(l, ids)| format!("{l}: {ids:?}"))
            .collect();
        t.note(format!("letter token ids compared: {}", ids.join(", ")));
        vec![t]
    }

    /// Mean profiles of correct and wrong answers per style.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        if self.mean_profiles.is_empty() {
            return Ok(Vec::new());
        }
        let mut charts = vec![profile_bands(
            &self.mean_profiles,
            "Shannon entropy (nats), mean over generated tokens",
        )?];
        if let Some(d) = &self.prediction_depth {
            charts.push(prediction_depth_curves(d)?);
        }
        Ok(charts)
    }
}
