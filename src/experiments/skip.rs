//! `skip` — which matters more for the answer, the blocks that expand the candidate set or those
//! that prune it? (Section 5.4, Figure 6.)
//!
//! For each MMLU question (one prompt style, Base by default) the model's answer is the option
//! letter of highest next-token probability after the prompt. The question's own unskipped
//! profile at that position, with layer 0 (the embedding output) so that block 1 has a ΔH too,
//! ranks the blocks by ΔH_b = H_b − H_{b−1}: largest increases (expansion), largest decreases
//! (pruning). For each fraction f of the depth (10 %, …, 50 %), the top ⌊f·L⌉ blocks (at least
//! one) are skipped — their write to the residual stream is zeroed — and the question asked again;
//! a seeded random choice of as many blocks is the baseline. Accuracy curves per strategy, with
//! the unskipped accuracy as the reference.

use std::collections::BTreeMap;

use ndarray::Array1;
use serde::{Deserialize, Serialize};

use super::choice::{most_probable, Answer, LetterTokens, SkipTrial};
use super::experiment::{Batch, Cx, Experiment};
use super::inputs::{correct_letter, Questions};
use super::outputs::{pct, FeatureLayout, Features};
use super::plan::{Plan, PlanOption};
use super::settings::{ExperimentConfig, Protocol, Scale};
use super::store::{Record, WorkItem};
use crate::analysis::Table;
use crate::data::mmlu_questions::PromptStyle;
use crate::error::{Error, Result};
use crate::plots::{delta_mean_bars, skip_curves, Chart};
use crate::profile::{blocks_to_skip, Aggregation, EntropyProfile, SkipStrategy};
use crate::runner::{ProfileRequest, Profiler};

/// The three ways of choosing blocks, in the order of the result's curves.
pub const STRATEGIES: [&str; 3] = ["expansion", "pruning", "random"];

/// The experiment (registered as `skip`).
pub struct Skip;

/// What `skip` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkipSpec {
    pub questions: usize,
    pub style: PromptStyle,
    /// Shares of the depth skipped.
    pub fractions: Vec<f64>,
}

impl SkipSpec {
    /// Blocks skipped at `fraction` of a depth of `l`: rounded, at least one, at most l.
    pub fn blocks_at(fraction: f64, l: usize) -> usize {
        ((fraction * l as f64).round() as usize).clamp(1, l.max(1))
    }
}

impl Experiment for Skip {
    const NAME: &'static str = "skip";
    const PAPER: &'static str = "Figure 6";
    const SUMMARY: &'static str =
        "MMLU accuracy with the blocks of largest entropy increase or decrease skipped";
    const OPTIONS: &'static [PlanOption] = &[
        PlanOption::Data,
        PlanOption::Chat,
        PlanOption::Tokens,
        PlanOption::Style,
    ];
    type Spec = SkipSpec;
    type Result = SkipResult;
    type Input = Questions;
    type Instrument = Profiler;

    fn spec(plan: &Plan) -> Result<SkipSpec> {
        if plan.protocol == Protocol::Authors {
            return Err(Error::invalid(
                "skip has no authors' protocol: the authors released no code for layer skipping; use --protocol paper",
            ));
        }
        let questions = match plan.scale {
            Scale::Smoke => 20,
            Scale::Paper => 500,
        };
        let spec = SkipSpec {
            questions: plan.n.unwrap_or(questions),
            style: plan.style.unwrap_or(PromptStyle::Base),
            fractions: vec![0.1, 0.2, 0.3, 0.4, 0.5],
        };
        if spec.questions == 0 {
            return Err(Error::invalid("skip needs at least one question (--n)"));
        }
        if plan.tokens.is_some_and(|t| t != 0) {
            return Err(Error::invalid(
                "skip reads the answer after the prompt and generates nothing; drop --tokens",
            ));
        }
        Ok(spec)
    }

    /// None: the answer is read after the prompt.
    fn tokens(_: &SkipSpec) -> usize {
        0
    }

    /// One item per question, in the spec's style.
    fn items(cfg: &ExperimentConfig, spec: &SkipSpec, questions: &Questions) -> Result<Vec<WorkItem>> {
        questions.items(spec.questions, cfg.seed, &[spec.style])
    }

    fn prepare(cx: &Cx<'_, Self>, profiler: &mut Profiler) -> Result<()> {
        let letters = LetterTokens::new(&profiler.tokenizer)?;
        cx.log(&format!("option letters compared as token ids {:?}", letters.ids))
    }

    /// The batch's questions unskipped as one left-padded batch (profile with layer 0, answer),
    /// then each question's trials alone: a trial's skipped blocks are its own (chosen from its
    /// question's ΔH), and the model skips blocks for a whole batch.
    fn measure(cx: &Cx<'_, Self>, profiler: &mut Profiler, batch: &Batch<'_>) -> Result<Vec<Record>> {
        let letters = LetterTokens::new(&profiler.tokenizer)?;
        // Block 1 is ranked by its ΔH against the embedding output.
        let reqs: Vec<ProfileRequest> = batch
            .items()
            .iter()
            .map(|i| cx.request(i).include_embed(true))
            .collect();
        profiler.model.set_skipped_blocks(&[])?;
        let scored = profiler.run_batch_scored(&reqs, None)?;
        let measured = batch.items().iter().zip(reqs.iter().zip(scored));
        batch
            .keep_todo(measured, |item, (req, (profile, logits))| {
                (item.clone(), req.clone(), profile, logits)
            })
            .into_iter()
            .map(|(item, req, profile, logits)| {
                let record = unskipped(cx.spec, profiler, &letters, &item, &req, profile, &logits)?;
                with_trials(cx.spec, cx.cfg.seed, profiler, &letters, &item, &req, record)
            })
            .collect()
    }

    fn finish(
        cfg: &ExperimentConfig,
        spec: &SkipSpec,
        records: &[Record],
    ) -> Result<(SkipResult, Features)> {
        finish(cfg, spec, records)
    }

    fn comparison(results: &[&SkipResult]) -> Vec<Table> {
        vec![SkipResult::comparison(results)]
    }

    fn tables(result: &SkipResult) -> Vec<Table> {
        result.tables()
    }

    fn charts(result: &SkipResult) -> Result<Vec<Chart>> {
        result.charts()
    }
}

/// ΔH_b for b = 1..=L at the measured position: H_b − H_{b−1}, H_0 from the embedding output.
pub fn block_deltas(record: &Record) -> Result<Array1<f64>> {
    let p = record
        .profile
        .positions
        .first()
        .ok_or_else(|| Error::Data(format!("record {} has no measured position", record.id)))?;
    let h0 = p.embed.as_ref().map(|e| e.shannon).ok_or_else(|| {
        Error::Data(format!(
            "record {} has no layer 0 (embedding output); skip measures it to rank block 1",
            record.id
        ))
    })?;
    let h: Vec<f64> = std::iter::once(h0)
        .chain(p.shannon.iter().copied())
        .collect();
    Ok(h.windows(2).map(|w| w[1] - w[0]).collect())
}

fn strategy(name: &str, seed: u64) -> SkipStrategy {
    match name {
        "expansion" => SkipStrategy::Expansion,
        "pruning" => SkipStrategy::Pruning,
        _ => SkipStrategy::Random { seed },
    }
}

/// The record of one question unskipped: its profile (with layer 0) and its answer.
fn unskipped(
    spec: &SkipSpec,
    profiler: &Profiler,
    letters: &LetterTokens,
    item: &WorkItem,
    req: &ProfileRequest,
    profile: EntropyProfile,
    logits: &[f32],
) -> Result<Record> {
    let letter_probs = letters.probs(logits)?;
    let answer = Answer {
        style: spec.style.name().into(),
        prompt: profiler.model_text(req)?,
        flagged: false,
        chosen: most_probable(&letter_probs),
        letter_probs,
        correct: correct_letter(item)?,
        generated: None,
        letter_ids: letters.ids.clone(),
        trials: Vec::new(),
    };
    Ok(Record::answered(item, profile, answer))
}

/// Adds the question's trials to its record: the answer once per fraction and strategy with the
/// chosen blocks skipped.
fn with_trials(
    spec: &SkipSpec,
    seed: u64,
    profiler: &mut Profiler,
    letters: &LetterTokens,
    item: &WorkItem,
    req: &ProfileRequest,
    mut record: Record,
) -> Result<Record> {
    let dh = block_deltas(&record)?;
    let l = dh.len();
    let blind = ProfileRequest {
        include_embed: false,
        ..req.clone()
    };
    let mut trials = Vec::new();
    for (fi, &f) in spec.fractions.iter().enumerate() {
        let n = SkipSpec::blocks_at(f, l);
        for name in STRATEGIES {
            // Per item and fraction, so a question's random blocks do not depend on the others.
            let s = seed
                .wrapping_mul(1_000_003)
                .wrapping_add((item.index as u64) << 8 | fi as u64);
            let skipped = blocks_to_skip(dh.view(), 1, strategy(name, s), n);
            profiler.model.set_skipped_blocks(&skipped)?;
            // Only the answer: the final block's logits, without the lens at every block.
            let logits = profiler.next_token_logits(&blind);
            profiler.model.set_skipped_blocks(&[])?;
            let letter_probs = letters.probs(&logits?)?;
            trials.push(SkipTrial {
                strategy: name.into(),
                fraction: f,
                skipped,
                chosen: most_probable(&letter_probs),
                letter_probs,
            });
        }
    }
    if let Some(a) = record.answer.as_mut() {
        a.trials = trials;
    }
    Ok(record)
}

/// Accuracy per fraction for each strategy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkipCurves {
    pub expansion: Vec<f64>,
    pub pruning: Vec<f64>,
    pub random: Vec<f64>,
}

/// `result.json` of `skip`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkipResult {
    pub experiment: String,
    pub model: String,
    pub style: String,
    pub n_questions: usize,
    pub n_layers: usize,
    pub fractions: Vec<f64>,
    /// Blocks skipped at each fraction.
    pub blocks_skipped: Vec<usize>,
    pub unskipped_accuracy: f64,
    pub curves: SkipCurves,
    /// Mean ΔH of each block 1..=L over the questions (block 1 against layer 0).
    pub mean_delta: Vec<f64>,
    /// How often each block 1..=L is among the skipped at the smallest fraction, per strategy.
    pub top_block_counts: BTreeMap<String, Vec<usize>>,
}

/// Computes the result from the records (sorted by item).
pub fn finish(
    cfg: &ExperimentConfig,
    spec: &SkipSpec,
    records: &[Record],
) -> Result<(SkipResult, Features)> {
    let l = cfg.model.n_layers;
    if records.is_empty() {
        return Err(Error::Data("no records to analyse".into()));
    }
    let mut layout = FeatureLayout::tokens_by_layers(1, l + 1, "shannon", Aggregation::Mean);
    layout.first_layer = 0;
    let mut features = Features::new(layout);
    let mut sum_dh = Array1::<f64>::zeros(l);
    let mut correct = vec![vec![0usize; spec.fractions.len()]; STRATEGIES.len()];
    let mut counts: Vec<Vec<usize>> = vec![vec![0; l]; STRATEGIES.len()];
    let mut unskipped = 0;
    for r in records {
        let dh = block_deltas(r)?;
        if dh.len() != l || r.profile.positions.len() != 1 {
            return Err(Error::Data(format!(
                "record {} has {} positions × {} blocks, expected 1 × {l}",
                r.id,
                r.profile.positions.len(),
                dh.len()
            )));
        }
        sum_dh += &dh;
        let p = &r.profile.positions[0];
        let h0 = p.embed.as_ref().map(|e| e.shannon).unwrap_or(f64::NAN);
        features.push(
            r,
            std::iter::once(h0)
                .chain(p.shannon.iter().copied())
                .collect(),
        )?;
        let a = r.answer()?;
        unskipped += usize::from(a.is_correct());
        if a.trials.len() != spec.fractions.len() * STRATEGIES.len() {
            return Err(Error::Data(format!(
                "record {} has {} skip trials, expected {}",
                r.id,
                a.trials.len(),
                spec.fractions.len() * STRATEGIES.len()
            )));
        }
        for (t_i, t) in a.trials.iter().enumerate() {
            let (fi, si) = (t_i / STRATEGIES.len(), t_i % STRATEGIES.len());
            if t.chosen.as_deref() == Some(a.correct.as_str()) {
                correct[si][fi] += 1;
            }
            if fi == 0 {
                for &b in &t.skipped {
                    if let Some(c) = counts[si].get_mut(b.wrapping_sub(1)) {
                        *c += 1;
                    }
                }
            }
        }
    }
    let n = records.len() as f64;
    let acc = |si: usize| correct[si].iter().map(|&c| c as f64 / n).collect();
    let result = SkipResult {
        experiment: "skip".into(),
        model: cfg.model.name.clone(),
        style: spec.style.name().into(),
        n_questions: records.len(),
        n_layers: l,
        fractions: spec.fractions.clone(),
        blocks_skipped: spec
            .fractions
            .iter()
            .map(|&f| SkipSpec::blocks_at(f, l))
            .collect(),
        unskipped_accuracy: unskipped as f64 / n,
        curves: SkipCurves {
            expansion: acc(0),
            pruning: acc(1),
            random: acc(2),
        },
        mean_delta: (sum_dh / n).to_vec(),
        top_block_counts: STRATEGIES
            .iter()
            .zip(counts)
            .map(|(s, c)| (s.to_string(), c))
            .collect(),
    };
    Ok((result, features))
}

impl SkipResult {
    fn curve(&self, name: &str) -> &[f64] {
        match name {
            "expansion" => &self.curves.expansion,
            "pruning" => &self.curves.pruning,
            _ => &self.curves.random,
        }
    }

    /// Our accuracy curves beside the paper's finding (Figure 6 has no table of numbers).
    pub fn comparison(results: &[&SkipResult]) -> Table {
        let mut t = Table::new(
            "Skipping blocks (Figure 6): MMLU accuracy (%) with the top blocks by ΔH skipped",
            &[
                "model",
                "skipped",
                "expansion (max ΔH)",
                "pruning (min ΔH)",
                "random",
            ],
        );
        for r in results {
            t.row(vec![
                r.model.clone(),
                "none".into(),
                pct(r.unskipped_accuracy),
                pct(r.unskipped_accuracy),
                pct(r.unskipped_accuracy),
            ]);
            for (i, f) in r.fractions.iter().enumerate() {
                let mut row = vec![
                    r.model.clone(),
                    format!(
                        "{:.0} % ({} of {} blocks)",
                        f * 100.0,
                        r.blocks_skipped[i],
                        r.n_layers
                    ),
                ];
                row.extend(STRATEGIES.iter().map(|s| pct(r.curve(s)[i])));
                t.row(row);
            }
        }
        t.note(
            "paper (Figure 6, six Llama-3.2 and Gemma-2 models): skipping expansion blocks hurts more than skipping pruning blocks, except Gemma-2-2B-it; for every Llama, skipping the single block of largest expansion drops accuracy to chance (25 %)",
        );
        t
    }

    /// Which blocks each strategy skips most often at the smallest fraction.
    pub fn tables(&self) -> Vec<Table> {
        let k = self.blocks_skipped.first().copied().unwrap_or(1);
        let mut t = Table::new(
            format!(
                "{}: blocks skipped at {:.0} % ({k} per question), most frequent first",
                self.model,
                self.fractions.first().copied().unwrap_or(0.0) * 100.0
            ),
            &["strategy", "blocks (questions)"],
        );
        for s in STRATEGIES {
            let mut c: Vec<(usize, usize)> = self.top_block_counts[s]
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(b, &n)| (b + 1, n))
                .collect();
            c.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let text: Vec<String> = c
                .iter()
                .take(6)
                .map(|(b, n)| format!("block {b} ({n})"))
                .collect();
            t.row(vec![s.into(), text.join(", ")]);
        }
        vec![t]
    }

    /// Figure 6 (accuracy against the share of blocks skipped; 0 = unskipped) and the mean ΔH
    /// per block the rankings come from.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        let mut x = vec![0.0];
        x.extend(&self.fractions);
        let curves: Vec<(String, Vec<f64>)> = STRATEGIES
            .iter()
            .map(|s| {
                let mut y = vec![self.unskipped_accuracy];
                y.extend(self.curve(s));
                (s.to_string(), y)
            })
            .collect();
        Ok(vec![
            skip_curves(&x, &curves)?,
            delta_mean_bars(&self.mean_delta, "mean ΔH per block over the questions")?,
        ])
    }
}
