//! `validate` — the paper's check that entropy changes read as expansion and pruning
//! (Section 3.2, Table 1 and Figure 1):
//!
//! * **C1**: Spearman's ρ between ΔH_i = H_i − H_{i−1} and the change of the top-p (p = 0.6)
//!   candidate count from block i − 1 to block i, pooled over every measured position, block and
//!   prompt (one ρ per model, Table 1), and per prompt (mean ± sd over prompts);
//! * **C2**: the share of top-p candidates consecutive blocks have in common, per block, averaged
//!   over positions, with the three denominators the paper leaves open.
//!
//! Blocks are numbered 1..L (the residual after block i); pairs run over blocks 2..L. Positions are
//! the generated tokens' (the last prompt position and every generated token but the last).

use serde::{Deserialize, Serialize};

use super::experiment::Experiment;
use super::inputs::Topics;
use super::outputs::{check_depths, generation_label, FeatureLayout, Features};
use super::plan::{Plan, PlanOption};
use super::settings::{ExperimentConfig, Protocol, Scale, StatSettings};
use super::store::{Record, WorkItem};
use crate::analysis::metrics::{kendall_tau_b, mean_std, spearman};
use crate::analysis::validation::{C1Ties, C2Accumulator};
use crate::analysis::Table;
use crate::error::{Error, Result};
use crate::lens::StatSpec;
use crate::plots::{lens_fit_chart, prediction_depth_curves, xy_lines, xy_scatter, Chart};
use crate::profile::{aggregate, delta, Aggregation, DepthSummary, LensFit};
use crate::runner::Profiler;

/// Table 1: Spearman ρ between ΔH and the change of the top-p (p = 0.6) candidate count.
pub const TABLE1_C1: [(&str, f64); 4] = [
    ("Llama-3.2-1B", 0.8250),
    ("Llama-3.2-3B", 0.7365),
    ("Gemma-2-2B", 0.8804),
    ("Gemma-2-9B", 0.8540),
];

/// The experiment (registered as `validate`).
pub struct Validate;

/// What `validate` runs: the topic-format prompts of `topics` topics (three formats each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidateSpec {
    pub topics: usize,
    /// Tokens generated per prompt (one measured position each).
    pub tokens: usize,
}

impl Experiment for Validate {
    const NAME: &'static str = "validate";
    const PAPER: &'static str = "Table 1, Figure 1";
    const SUMMARY: &'static str =
        "C1 (ΔH against Δ top-p count) and C2 (top-p overlap of adjacent blocks)";
    const OPTIONS: &'static [PlanOption] = &[
        PlanOption::Data,
        PlanOption::Chat,
        PlanOption::Sampling,
        PlanOption::Tokens,
        PlanOption::Kl,
    ];
    type Spec = ValidateSpec;
    type Result = ValidateResult;
    type Input = Topics;
    type Instrument = Profiler;

    fn spec(plan: &Plan) -> Result<ValidateSpec> {
        if plan.protocol == Protocol::Authors {
            return Err(Error::invalid(
                "validate has no authors' protocol: the authors released no code for C1 and C2; use --protocol paper",
            ));
        }
        let (topics, tokens) = match plan.scale {
            Scale::Smoke => (4, 8),
            Scale::Paper => (150, 32),
        };
        let spec = ValidateSpec {
            topics: plan.n.unwrap_or(topics),
            tokens: plan.tokens.unwrap_or(tokens),
        };
        if spec.topics == 0 || spec.tokens == 0 {
            return Err(Error::invalid(
                "validate needs at least one topic (--n) and one generated token (--tokens)",
            ));
        }
        Ok(spec)
    }

    fn tokens(spec: &ValidateSpec) -> usize {
        spec.tokens
    }

    /// The topic-format prompts, topic-major.
    fn items(_: &ExperimentConfig, spec: &ValidateSpec, topics: &Topics) -> Result<Vec<WorkItem>> {
        topics.format_items(spec.topics)
    }

    /// Shannon entropy, top-p counts and the overlap of adjacent blocks' top-p sets.
    fn stat_spec(stats: &StatSettings, _: &ValidateSpec) -> Result<StatSpec> {
        let mut spec = stats.stat_spec(&[])?;
        spec.top_p_overlap = true;
        Ok(spec)
    }

    fn finish(
        cfg: &ExperimentConfig,
        spec: &ValidateSpec,
        records: &[Record],
    ) -> Result<(ValidateResult, Features)> {
        finish(cfg, spec, records)
    }

    fn comparison(results: &[&ValidateResult]) -> Vec<Table> {
        vec![ValidateResult::comparison(results)]
    }

    fn tables(result: &ValidateResult) -> Vec<Table> {
        result.tables()
    }

    fn charts(result: &ValidateResult) -> Result<Vec<Chart>> {
        result.charts()
    }
}

/// C2 at one block (compared with the block before it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct C2Block {
    /// Block i (1-based), compared with block i − 1.
    pub block: usize,
    /// |S_i ∩ S_{i−1}| / |S_i|: the share of block i's candidates already in block i − 1's set.
    pub current: f64,
    /// |S_i ∩ S_{i−1}| / |S_{i−1}|.
    pub previous: f64,
    /// |S_i ∩ S_{i−1}| / |S_i ∪ S_{i−1}|.
    pub jaccard: f64,
}

/// `result.json` of `validate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidateResult {
    pub experiment: String,
    pub model: String,
    /// How the tokens were generated: `greedy` or `sampled at T = …`, with or without the chat
    /// template (a run's other settings are in its config.json).
    #[serde(default)]
    pub generation: String,
    pub n_layers: usize,
    pub n_prompts: usize,
    /// Measured positions over all prompts.
    pub n_positions: usize,
    pub top_p: f64,
    /// Pooled Spearman ρ (Table 1); null when a variable is constant.
    pub c1_spearman: Option<f64>,
    pub c1_p_value: Option<f64>,
    /// (ΔH, Δcount) pairs pooled: positions × (L − 1).
    pub c1_n_pairs: usize,
    /// Per-prompt ρ: mean and population standard deviation over the prompts where it is defined.
    pub c1_per_prompt_mean: Option<f64>,
    pub c1_per_prompt_std: Option<f64>,
    pub c1_per_prompt_defined: usize,
    /// C1 with ties handled: Kendall's τ-b, ρ over the pairs whose count changed (absent from
    /// results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c1_ties: Option<C1Ties>,
    /// C2 per block 2..L (Figure 1).
    pub c2_by_block: Vec<C2Block>,
    /// Mean over blocks of `current` (the paper's reading), `previous` and `jaccard`.
    pub c2_mean: f64,
    pub c2_mean_previous: f64,
    pub c2_mean_jaccard: f64,
    /// Mean Shannon entropy and top-p count per block over every position.
    pub mean_entropy_by_block: Vec<f64>,
    pub mean_top_p_count_by_block: Vec<f64>,
    /// Up to 2,000 evenly spaced (ΔH, Δcount) pairs for the scatter.
    pub c1_sample: Vec<[f64; 2]>,
    /// Prediction depth of the measured tokens (one summary, `all`) (absent for records written before depths
    /// existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction_depth: Option<Vec<DepthSummary>>,
    /// The lens's fit on the measured tokens (mean KL to the final distribution and calibration
    /// gap per block), when the run measured KL (`--kl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lens_fit: Option<LensFit>,
}

const SCATTER_POINTS: usize = 2000;

/// Computes the result from the records (sorted by item).
pub fn finish(
    cfg: &ExperimentConfig,
    spec: &ValidateSpec,
    records: &[Record],
) -> Result<(ValidateResult, Features)> {
    let l = check_depths(cfg, spec.tokens, records)?;
    if l < 2 {
        return Err(Error::Data("C1 and C2 need at least two blocks".into()));
    }
    let (mut dh_all, mut dc_all) = (Vec::new(), Vec::new());
    let mut per_prompt = Vec::new();
    let mut per_prompt_tau = Vec::new();
    let mut c2 = C2Accumulator::default();
    let (mut h_sum, mut c_sum) = (vec![0.0; l], vec![0.0; l]);
    let mut n_positions = 0usize;
    let mut features = Features::new(FeatureLayout::tokens_by_layers(
        spec.tokens,
        l,
        "shannon",
        Aggregation::Concat,
    ));
    for r in records {
        let h = r.profile.shannon_matrix()?;
        let c = r.profile.top_p_matrix()?;
        let dh: Vec<f64> = delta(h.view()).iter().cloned().collect();
        let dc: Vec<f64> = delta(c.view()).iter().cloned().collect();
        // Fewer than three pairs (a tiny run): ρ is undefined for this prompt, like a constant input.
        if dh.len() >= 3 {
            if let Some((rho, _)) = spearman(&dh, &dc)? {
                per_prompt.push(rho);
            }
            if let Some((tau, _)) = kendall_tau_b(&dh, &dc)? {
                per_prompt_tau.push(tau);
            }
        }
        dh_all.extend(dh);
        dc_all.extend(dc);
        for pos in &r.profile.positions {
            let shared = pos.top_p_shared.as_ref().ok_or_else(|| {
                Error::Data(format!(
                    "record {} carries no top-p overlaps; it was not measured by `validate`",
                    r.id
                ))
            })?;
            c2.add(&pos.top_p_count, shared)?;
            for j in 0..l {
                h_sum[j] += pos.shannon[j];
                c_sum[j] += pos.top_p_count[j] as f64;
            }
            n_positions += 1;
        }
        features.push(r, aggregate(h.view(), Aggregation::Concat)?.to_vec())?;
    }
    if dh_all.len() < 3 {
        return Err(Error::invalid(format!(
            "C1 needs at least 3 (ΔH, Δcount) pairs, the run has {}; generate more tokens or use more topics",
            dh_all.len()
        )));
    }
    let pooled = spearman(&dh_all, &dc_all)?;
    let c2 = c2.finish(&cfg.model.name)?;
    let stride = dh_all.len().div_ceil(SCATTER_POINTS).max(1);
    let c1_sample = dh_all
        .iter()
        .zip(&dc_all)
        .step_by(stride)
        .map(|(&a, &b)| [a, b])
        .collect();
    let (pp_mean, pp_std) = mean_std(&per_prompt);
    let defined = !per_prompt.is_empty();
    let n = n_positions.max(1) as f64;
    let result = ValidateResult {
        experiment: "validate".into(),
        model: cfg.model.name.clone(),
        generation: generation_label(cfg),
        n_layers: l,
        n_prompts: records.len(),
        n_positions,
        top_p: cfg.stats.top_p,
        c1_spearman: pooled.map(|x| x.0),
        c1_p_value: pooled.map(|x| x.1),
        c1_n_pairs: dh_all.len(),
        c1_per_prompt_mean: defined.then_some(pp_mean),
        c1_per_prompt_std: defined.then_some(pp_std),
        c1_per_prompt_defined: per_prompt.len(),
        c1_ties: Some(C1Ties::of(&dh_all, &dc_all, &per_prompt_tau)?),
        c2_by_block: (0..l - 1)
            .map(|j| C2Block {
                block: j + 2,
                current: c2.overlap_per_layer[j],
                previous: c2.overlap_prev_per_layer[j],
                jaccard: c2.jaccard_per_layer[j],
            })
            .collect(),
        c2_mean: c2.mean,
        c2_mean_previous: c2.mean_prev,
        c2_mean_jaccard: c2.mean_jaccard,
        mean_entropy_by_block: h_sum.iter().map(|s| s / n).collect(),
        mean_top_p_count_by_block: c_sum.iter().map(|s| s / n).collect(),
        c1_sample,
        prediction_depth: DepthSummary::of("all", records.iter().map(|r| &r.profile))
            .map(|d| vec![d]),
        lens_fit: LensFit::of(records.iter().map(|r| &r.profile)),
    };
    Ok((result, features))
}

fn opt(x: Option<f64>, digits: usize) -> String {
    crate::analysis::table::fmt_opt(x, digits)
}

impl ValidateResult {
    /// Our C1 (and C2) beside the paper's Table 1, for one or more models.
    pub fn comparison(results: &[&ValidateResult]) -> Table {
        let mut t = Table::new(
            "C1 (Table 1): Spearman ρ between ΔH and Δ(top-p count); C2 (Figure 1): share of a block's top-p candidates already in the previous block's set",
            &["model", "ρ (pooled)", "ρ per prompt (mean ± sd)", "C2 mean", "source"],
        );
        for r in results {
            t.row(vec![
                r.model.clone(),
                opt(r.c1_spearman, 4),
                format!(
                    "{} ± {}",
                    opt(r.c1_per_prompt_mean, 3),
                    opt(r.c1_per_prompt_std, 3)
                ),
                format!("{:.3}", r.c2_mean),
                format!(
                    "ours: {} prompts, {} positions, {}",
                    r.n_prompts, r.n_positions, r.generation
                ),
            ]);
        }
        for (m, rho) in TABLE1_C1 {
            t.row(vec![
                m.into(),
                format!("{rho:.4}"),
                "—".into(),
                "high (figure only)".into(),
                "paper".into(),
            ]);
        }
        t
    }

    /// C1 and C2 summaries, and C2 per block.
    pub fn tables(&self) -> Vec<Table> {
        let mut c1 = Table::new(
            "C1: ΔH against the change of the top-p candidate count",
            &[
                "ρ pooled",
                "p-value",
                "pairs",
                "ρ per prompt",
                "prompts with ρ",
                "positions",
                "τ-b pooled",
                "τ-b per prompt",
                "ρ, count changed",
                "count unchanged",
            ],
        );
        let ties = self.c1_ties.as_ref();
        c1.row(vec![
            opt(self.c1_spearman, 4),
            self.c1_p_value
                .map(|p| format!("{p:.2e}"))
                .unwrap_or_else(|| "n/a".into()),
            self.c1_n_pairs.to_string(),
            format!(
                "{} ± {}",
                opt(self.c1_per_prompt_mean, 3),
                opt(self.c1_per_prompt_std, 3)
            ),
            format!("{}/{}", self.c1_per_prompt_defined, self.n_prompts),
            self.n_positions.to_string(),
            opt(ties.and_then(|t| t.kendall_tau_b), 4),
            format!(
                "{} ± {}",
                opt(ties.and_then(|t| t.per_prompt_tau_b_mean), 3),
                opt(ties.and_then(|t| t.per_prompt_tau_b_std), 3)
            ),
            opt(ties.and_then(|t| t.spearman_changed), 4),
            ties.map_or("n/a".into(), |t| {
                format!("{:.1} %", 100.0 * t.unchanged_count_share)
            }),
        ]);
        let mut c2 = Table::new(
            format!(
                "C2: top-p (p = {}) candidates shared by block i and block i − 1, mean over positions",
                self.top_p
            ),
            &["block i", "/ |S_i|", "/ |S_i−1|", "Jaccard", "mean H_i (nats)", "mean |S_i|"],
        );
        for b in &self.c2_by_block {
            c2.row(vec![
                b.block.to_string(),
                format!("{:.3}", b.current),
                format!("{:.3}", b.previous),
                format!("{:.3}", b.jaccard),
                format!("{:.3}", self.mean_entropy_by_block[b.block - 1]),
                format!("{:.1}", self.mean_top_p_count_by_block[b.block - 1]),
            ]);
        }
        c2.row(vec![
            "mean".into(),
            format!("{:.3}", self.c2_mean),
            format!("{:.3}", self.c2_mean_previous),
            format!("{:.3}", self.c2_mean_jaccard),
            String::new(),
            String::new(),
        ]);
        vec![c1, c2]
    }

    /// Figure 1 (C2 per block) and the C1 scatter.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        let blocks: Vec<f64> = self.c2_by_block.iter().map(|b| b.block as f64).collect();
        let series = |name: &str, f: fn(&C2Block) -> f64| {
            (
                name.to_string(),
                blocks.clone(),
                self.c2_by_block.iter().map(f).collect::<Vec<f64>>(),
            )
        };
        let c2 = xy_lines(
            &format!(
                "C2: top-p candidates shared with the previous block ({})",
                self.model
            ),
            "block i",
            "share",
            vec![
                series("|S_i ∩ S_i−1| / |S_i|", |b| b.current),
                series("|S_i ∩ S_i−1| / |S_i−1|", |b| b.previous),
                series("Jaccard", |b| b.jaccard),
            ],
        )?;
        let signed_log = |v: f64| v.signum() * (1.0 + v.abs()).log10();
        let c1 = xy_scatter(
            &format!(
                "C1: ΔH against the change of the top-p count (ρ = {})",
                opt(self.c1_spearman, 3)
            ),
            "ΔH (nats)",
            "Δ top-p count, signed log10(1 + |Δ|)",
            vec![(
                self.model.clone(),
                self.c1_sample.iter().map(|p| p[0]).collect(),
                self.c1_sample.iter().map(|p| signed_log(p[1])).collect(),
            )],
        )?;
        let mut charts = vec![c2, c1];
        if let Some(d) = &self.prediction_depth {
            charts.push(prediction_depth_curves(d)?);
        }
        if let Some(fit) = &self.lens_fit {
            charts.push(lens_fit_chart(fit)?);
        }
        Ok(charts)
    }
}
