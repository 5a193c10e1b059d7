//! Two runs of one experiment that differ only in how they read the model (the lens, whether KL
//! was measured), compared pair by pair: every cross-validated score on the same folds, and, where
//! both folders still hold their records, C1's per-prompt correlations on the same prompts.
//!
//! Scores of the same folds are paired, but the folds' training sets overlap, so their differences
//! are correlated and the plain paired t-test is too confident: both it and the corrected
//! resampled t-test (Nadeau & Bengio 2003; [`corrected_paired_t_test`]) are given.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::store::OutputDir;
use crate::analysis::metrics::{corrected_paired_t_test, kendall_tau_b, paired_t_test, spearman};
use crate::analysis::Table;
use crate::error::{Error, Result};
use crate::profile::delta;

/// One score compared across the two runs, fold by fold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FoldComparison {
    /// Where the score is in `result.json` (`knn`, `layer_subsets.first`, `per_alpha.1`, …).
    pub path: String,
    pub folds: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    /// Mean of (b − a) over folds.
    pub mean_difference: f64,
    /// Plain paired t-test over folds (`None` when every fold moved by the same amount).
    pub t: Option<f64>,
    pub p_value: Option<f64>,
    /// The corrected resampled t-test (n_test / n_train = 1 / (folds − 1)).
    pub corrected_t: Option<f64>,
    pub corrected_p_value: Option<f64>,
}

/// A per-prompt statistic compared across the two runs, prompt by prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptComparison {
    /// `c1_spearman` or `c1_kendall_tau_b`.
    pub statistic: String,
    /// Prompts where it is defined in both runs.
    pub prompts: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    pub mean_difference: f64,
    /// Paired t-test over prompts (prompts are independent draws, unlike folds).
    pub t: Option<f64>,
    pub p_value: Option<f64>,
}

/// `entropy-lens compare-runs A B`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    pub experiment: String,
    pub model: String,
    pub a: String,
    pub b: String,
    /// How each run read the model (`logit`, or `tuned` and the lens's sha256 prefix).
    pub lens_a: String,
    pub lens_b: String,
    pub scores: Vec<FoldComparison>,
    /// C1 per prompt (`validate` runs whose records are both present).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_prompt: Vec<PromptComparison>,
}

/// One held-out mean KL with its 95 % bootstrap interval over windows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowMean {
    pub mean: f64,
    pub ci95: [f64; 2],
}

/// Two lenses of one model evaluated on the same held-out windows (`train_report.json` of each
/// `train-lens` folder), window by window: layer by layer and over blocks 1 … L − 1 (the residuals
/// a table reads; the embedding output left out), each lens's KL and the paired difference b − a,
/// with 95 % percentile-bootstrap intervals over windows (the same resamples for a, b and their
/// difference).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LensComparison {
    pub model: String,
    pub a: String,
    pub b: String,
    pub windows: usize,
    pub tokens_a: usize,
    pub tokens_b: usize,
    /// Mean over blocks 1 … L − 1.
    pub logit_blocks: WindowMean,
    pub a_blocks: WindowMean,
    pub b_blocks: WindowMean,
    pub difference_blocks: WindowMean,
    /// Per layer 0 … L − 1: b − a.
    pub difference_by_layer: Vec<WindowMean>,
}

/// Compares two lens folders' held-out evaluations (see [`LensComparison`]).
///
/// # Errors
/// A folder without `train_report.json`, reports without per-window KL (written before it was
/// kept), or reports of other models or held-out windows.
pub fn compare_lenses(a: &Path, b: &Path) -> Result<LensComparison> {
    use crate::lens::heldout::{bootstrap_ci95, layer_means};
    use crate::lens::trainer::TrainReport;
    let read = |dir: &Path| -> Result<TrainReport> {
        let path = dir.join("train_report.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let r: TrainReport = serde_json::from_str(&text)
            .map_err(|e| Error::Data(format!("{}: {e}", path.display())))?;
        if r.kl_tuned_by_window.is_empty() || r.kl_logit_by_window.is_empty() {
            return Err(Error::invalid(format!(
                "{} keeps no per-window KL (written before 2026-12-07): train the lens again to compare it",
                path.display()
            )));
        }
        Ok(r)
    };
    let (ra, rb) = (read(a)?, read(b)?);
    // The same windows read through the same logit lens: equal up to the order of parallel sums.
    let close = |x: &[Vec<f64>], y: &[Vec<f64>]| {
        x.len() == y.len()
            && x.iter().zip(y).all(|(u, v)| {
                u.len() == v.len()
                    && u.iter()
                        .zip(v)
                        .all(|(p, q)| (p - q).abs() <= 1e-12 * p.abs().max(q.abs()))
            })
    };
    if ra.model != rb.model || !close(&ra.kl_logit_by_window, &rb.kl_logit_by_window) {
        return Err(Error::invalid(format!(
            "{} and {} were not evaluated on the same held-out windows of one model (models {} and {}, or another text, --seq-len or --holdout-tokens)",
            a.display(),
            b.display(),
            ra.model,
            rb.model
        )));
    }
    let windows = ra.kl_tuned_by_window.len();
    let (la, lb, lo) = (
        layer_means(&ra.kl_tuned_by_window, 1),
        layer_means(&rb.kl_tuned_by_window, 1),
        layer_means(&ra.kl_logit_by_window, 1),
    );
    // One row per window: logit, a, b, b − a over blocks, then b − a per layer.
    let rows: Vec<Vec<f64>> = (0..windows)
        .map(|w| {
            let per_layer = rb.kl_tuned_by_window[w]
                .iter()
                .zip(&ra.kl_tuned_by_window[w])
                .map(|(y, x)| y - x);
            [lo[w], la[w], lb[w], lb[w] - la[w]]
                .into_iter()
                .chain(per_layer)
                .collect()
        })
        .collect();
    let ci = bootstrap_ci95(&rows);
    if ci.len() != rows.first().map_or(0, Vec::len) {
        return Err(Error::invalid(format!(
            "{windows} held-out window(s): an interval needs at least two"
        )));
    }
    let n = windows as f64;
    let at = |j: usize| WindowMean {
        mean: rows.iter().map(|r| r[j]).sum::<f64>() / n,
        ci95: ci[j],
    };
    Ok(LensComparison {
        model: ra.model.clone(),
        a: a.display().to_string(),
        b: b.display().to_string(),
        windows,
        tokens_a: ra.tokens_trained,
        tokens_b: rb.tokens_trained,
        logit_blocks: at(0),
        a_blocks: at(1),
        b_blocks: at(2),
        difference_blocks: at(3),
        difference_by_layer: (4..rows[0].len()).map(at).collect(),
    })
}

impl LensComparison {
    /// The comparison as a table: layer by layer, then over the blocks.
    pub fn table(&self) -> Table {
        let ci = |m: &WindowMean| format!("{:+.3} [{:+.3}, {:+.3}]", m.mean, m.ci95[0], m.ci95[1]);
        let mut t = Table::new(
            format!(
                "{}: held-out KL of {} (b) − {} (a), {} windows, nats (95 % bootstrap CI)",
                self.model, self.b, self.a, self.windows
            ),
            &["layer", "b − a"],
        );
        for (l, m) in self.difference_by_layer.iter().enumerate() {
            t.row(vec![l.to_string(), ci(m)]);
        }
        t.row(vec!["blocks 1 … L − 1".into(), ci(&self.difference_blocks)]);
        t.note(format!(
            "mean over blocks 1 … L − 1: logit lens {:.3} [{:.3}, {:.3}], a {:.3} [{:.3}, {:.3}], b {:.3} [{:.3}, {:.3}]",
            self.logit_blocks.mean,
            self.logit_blocks.ci95[0],
            self.logit_blocks.ci95[1],
            self.a_blocks.mean,
            self.a_blocks.ci95[0],
            self.a_blocks.ci95[1],
            self.b_blocks.mean,
            self.b_blocks.ci95[0],
            self.b_blocks.ci95[1]
        ));
        t
    }
}

/// Compares the finished runs in folders `a` and `b`.
///
/// # Errors
/// A folder that is not a finished run, runs of different experiments, models or items, or runs
/// whose configurations differ in anything but the lens and KL measurement.
pub fn compare_runs(a: &Path, b: &Path) -> Result<RunComparison> {
    let (da, db) = (OutputDir::open(a)?, OutputDir::open(b)?);
    let (ca, cb) = (&da.stored.config, &db.stored.config);
    let allowed = |line: &String| line.starts_with("lens") || line.starts_with("stats.kl_to_final");
    let blocking: Vec<String> = ca
        .differences(cb)
        .into_iter()
        .filter(|d| !allowed(d) && !d.starts_with("crate_version"))
        .collect();
    if !blocking.is_empty() || da.stored.items_sha256 != db.stored.items_sha256 {
        return Err(Error::invalid(format!(
            "{} and {} are not the same experiment read two ways (they differ in {}); compare-runs pairs runs that differ only in --lens and --kl",
            a.display(),
            b.display(),
            if blocking.is_empty() {
                "their items".to_string()
            } else {
                let more = blocking.len().saturating_sub(3);
                let first = blocking.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
                if more > 0 {
                    format!("{first}; and {more} more")
                } else {
                    first
                }
            }
        )));
    }
    let result = |dir: &Path| -> Result<Value> {
        let path = dir.join("result.json");
        let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::invalid(format!(
                "{} has no result.json: finish the run first (entropy-lens finish {})",
                dir.display(),
                dir.display()
            )),
            _ => Error::io(&path, e),
        })?;
        serde_json::from_str(&text).map_err(|e| Error::Data(format!("{}: {e}", path.display())))
    };
    let (ra, rb) = (result(a)?, result(b)?);
    let mut scores = Vec::new();
    fold_scores("", &ra, &rb, &mut scores)?;
    let per_prompt = if ca.kind_name() == "validate" {
        per_prompt_c1(&da, &db)?
    } else {
        Vec::new()
    };
    let lens = |c: &super::settings::ExperimentConfig| match &c.lens {
        None => "logit".to_string(),
        Some(l) => format!("{} {}", l.kind, l.sha256.get(..8).unwrap_or(&l.sha256)),
    };
    Ok(RunComparison {
        experiment: ca.kind_name().to_string(),
        model: ca.model.name.clone(),
        a: a.display().to_string(),
        b: b.display().to_string(),
        lens_a: lens(ca),
        lens_b: lens(cb),
        scores,
        per_prompt,
    })
}

/// Every object holding `auc_folds` in both results, at the same path, in document order.
fn fold_scores(path: &str, a: &Value, b: &Value, out: &mut Vec<FoldComparison>) -> Result<()> {
    let (Value::Object(x), Value::Object(y)) = (a, b) else {
        return Ok(());
    };
    let folds = |v: &Value| -> Option<Vec<f64>> {
        v.get("auc_folds")?
            .as_array()?
            .iter()
            .map(Value::as_f64)
            .collect()
    };
    if let (Some(fa), Some(fb)) = (folds(a), folds(b)) {
        if fa.len() != fb.len() || fa.len() < 2 {
            return Err(Error::Data(format!(
                "{}: {} folds against {}",
                if path.is_empty() { "result" } else { path },
                fa.len(),
                fb.len()
            )));
        }
        let k = fa.len();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let plain = paired_t_test(&fb, &fa)?;
        let corrected = corrected_paired_t_test(&fb, &fa, 1.0 / (k - 1) as f64)?;
        out.push(FoldComparison {
            path: if path.is_empty() {
                "result".into()
            } else {
                path.to_string()
            },
            folds: k,
            mean_a: mean(&fa),
            mean_b: mean(&fb),
            mean_difference: mean(&fb) - mean(&fa),
            t: plain.map(|x| x.0),
            p_value: plain.map(|x| x.1),
            corrected_t: corrected.map(|x| x.0),
            corrected_p_value: corrected.map(|x| x.1),
        });
    }
    for (key, va) in x {
        if let Some(vb) = y.get(key) {
            let inner = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            fold_scores(&inner, va, vb, out)?;
        }
    }
    Ok(())
}

/// C1's per-prompt ρ and τ-b, paired by prompt, when both folders hold their records.
fn per_prompt_c1(a: &OutputDir, b: &OutputDir) -> Result<Vec<PromptComparison>> {
    let (ra, rb) = match (a.read_records(), b.read_records()) {
        (Ok(x), Ok(y)) if !x.is_empty() && x.len() == y.len() => (x, y),
        _ => return Ok(Vec::new()),
    };
    type Stat = fn(&[f64], &[f64]) -> Result<Option<(f64, f64)>>;
    let stats: [(&str, Stat); 2] = [
        ("c1_spearman", spearman),
        ("c1_kendall_tau_b", kendall_tau_b),
    ];
    let mut out = Vec::new();
    for (name, stat) in stats {
        let (mut xa, mut xb) = (Vec::new(), Vec::new());
        for (p, q) in ra.iter().zip(&rb) {
            if p.id != q.id {
                return Err(Error::Data(format!(
                    "records differ in order: {} against {}",
                    p.id, q.id
                )));
            }
            let pairs = |r: &super::store::Record| -> Result<Option<f64>> {
                let dh: Vec<f64> = delta(r.profile.shannon_matrix()?.view())
                    .iter()
                    .copied()
                    .collect();
                let dc: Vec<f64> = delta(r.profile.top_p_matrix()?.view())
                    .iter()
                    .copied()
                    .collect();
                if dh.len() < 3 {
                    return Ok(None);
                }
                Ok(stat(&dh, &dc)?.map(|x| x.0))
            };
            if let (Some(x), Some(y)) = (pairs(p)?, pairs(q)?) {
                xa.push(x);
                xb.push(y);
            }
        }
        if xa.len() < 2 {
            continue;
        }
        let n = xa.len() as f64;
        let (ma, mb) = (xa.iter().sum::<f64>() / n, xb.iter().sum::<f64>() / n);
        let test = paired_t_test(&xb, &xa)?;
        out.push(PromptComparison {
            statistic: name.into(),
            prompts: xa.len(),
            mean_a: ma,
            mean_b: mb,
            mean_difference: mb - ma,
            t: test.map(|x| x.0),
            p_value: test.map(|x| x.1),
        });
    }
    Ok(out)
}

impl RunComparison {
    /// The comparison as tables: the fold scores, then the per-prompt statistics.
    pub fn tables(&self) -> Vec<Table> {
        let p = |x: Option<f64>| x.map_or("n/a".into(), |p| format!("{p:.3}"));
        let mut folds = Table::new(
            format!(
                "{} on {}: {} (a) against {} (b), fold by fold",
                self.experiment, self.model, self.lens_a, self.lens_b
            ),
            &[
                "score",
                "folds",
                "a (mean AUC)",
                "b (mean AUC)",
                "b − a",
                "p, paired t",
                "p, corrected",
            ],
        );
        for s in &self.scores {
            folds.row(vec![
                s.path.clone(),
                s.folds.to_string(),
                format!("{:.4}", s.mean_a),
                format!("{:.4}", s.mean_b),
                format!("{:+.4}", s.mean_difference),
                p(s.p_value),
                p(s.corrected_p_value),
            ]);
        }
        let mut tables = vec![folds];
        if !self.per_prompt.is_empty() {
            let mut t = Table::new(
                "C1 per prompt, prompt by prompt",
                &[
                    "statistic",
                    "prompts",
                    "a (mean)",
                    "b (mean)",
                    "b − a",
                    "p, paired t",
                ],
            );
            for s in &self.per_prompt {
                t.row(vec![
                    s.statistic.clone(),
                    s.prompts.to_string(),
                    format!("{:.4}", s.mean_a),
                    format!("{:.4}", s.mean_b),
                    format!("{:+.4}", s.mean_difference),
                    p(s.p_value),
                ]);
            }
            tables.push(t);
        }
        tables
    }
}
