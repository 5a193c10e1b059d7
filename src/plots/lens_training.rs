//! A tuned lens's training report as a table and a chart (held-out KL by layer, logit lens beside
//! tuned lens). Here rather than in `lens/`, which the charts themselves read from.

use super::{Chart, IntervalLine};
use crate::analysis::Table;
use crate::error::Result;
use crate::lens::trainer::{TrainReport, TrainState};

impl TrainReport {
    /// The per-layer table as text.
    pub fn table(&self) -> Table {
        // Reports written before the per-window KL was kept have no intervals.
        let with_ci = self.kl_tuned_ci95.len() == self.kl_tuned.len()
            && self.kl_logit_ci95.len() == self.kl_logit.len();
        let ci_label = format!("{}: 95 % CI over windows", self.lens_label());
        let mut columns = vec!["layer", "logit lens", self.lens_label(), "ratio"];
        if with_ci {
            columns.push(&ci_label);
        }
        let mut t = Table::new(
            format!(
                "Mean KL(final ‖ lens) on {} held-out tokens, nats ({}, {} training tokens)",
                self.holdout_tokens, self.model, self.tokens_trained
            ),
            &columns,
        );
        for (l, (a, b)) in self.kl_logit.iter().zip(&self.kl_tuned).enumerate() {
            let mut row = vec![
                l.to_string(),
                format!("{a:.4}"),
                format!("{b:.4}"),
                format!("{:.3}", b / a.max(1e-12)),
            ];
            if with_ci {
                let [lo, hi] = self.kl_tuned_ci95[l];
                row.push(format!("{lo:.4} – {hi:.4}"));
            }
            t.row(row);
        }
        t
    }

    /// Mean KL(final ‖ lens) by layer, logit lens beside tuned lens (the tuned-lens paper's
    /// per-layer comparison), on a log axis: the embedding layer's KL is often a hundred times the
    /// last translator's. Layer 0 is the embedding output; the last block is exact for both
    /// lenses and has no translator.
    pub fn chart(&self) -> Result<Chart> {
        let xs: Vec<f64> = (0..self.kl_logit.len()).map(|l| l as f64).collect();
        let title = format!(
            "KL(final ‖ lens) on {} held-out tokens, {} ({} training tokens)",
            self.holdout_tokens, self.model, self.tokens_trained
        );
        let series = vec![
            ("logit lens".into(), xs.clone(), self.kl_logit.clone()),
            (self.lens_label().into(), xs, self.kl_tuned.clone()),
        ];
        let x_label = "layer (0 = embeddings)";
        // A KL of exactly 0 (a lens that is exact somewhere) has no place on a log axis.
        if series.iter().all(|(_, _, ys)| ys.iter().all(|&y| y > 0.0)) {
            super::xy_lines_log_y(&title, x_label, "mean KL (nats, log scale)", series)
        } else {
            super::xy_lines(&title, x_label, "mean KL (nats)", series)
        }
    }
}

/// Held-out mean KL(final ‖ lens) by layer for several lenses read on the same held-out windows,
/// each with its 95 % bootstrap interval over windows (e.g. one model's lenses at several budgets).
/// The logit lens, often ten times further, is named in the title, not drawn (it would flatten the
/// lines being compared); layer 0 (the embedding output) is left out.
///
/// # Errors
/// No reports, reports of different depths or held-out sets, or a report without intervals (written
/// before they were kept).
pub fn lens_comparison_chart(title: &str, reports: &[(&str, &TrainReport)]) -> Result<Chart> {
    let Some((_, first)) = reports.first() else {
        return Err(crate::Error::Data("no lens reports to chart".into()));
    };
    let line = |name: &str, mean: &[f64], ci: &[[f64; 2]]| -> Result<IntervalLine> {
        if ci.len() != mean.len() || mean.len() < 2 {
            return Err(crate::Error::Data(format!(
                "{name}: {} layers and {} intervals (a report written before intervals were kept?)",
                mean.len(),
                ci.len()
            )));
        }
        Ok(IntervalLine {
            name: name.to_string(),
            label: format!(
                "{name} (mean {:.2})",
                mean[1..].iter().sum::<f64>() / (mean.len() - 1) as f64
            ),
            xs: (1..mean.len()).map(|l| l as f64).collect(),
            mean: mean[1..].to_vec(),
            lo: ci[1..].iter().map(|c| c[0]).collect(),
            hi: ci[1..].iter().map(|c| c[1]).collect(),
        })
    };
    let logit_mean = first.kl_logit[1..].iter().sum::<f64>()
        / first.kl_logit.len().saturating_sub(1).max(1) as f64;
    let mut lines = Vec::new();
    for (name, r) in reports {
        let same = r.kl_logit.len() == first.kl_logit.len()
            && r.kl_logit
                .iter()
                .zip(&first.kl_logit)
                .all(|(p, q)| (p - q).abs() <= 1e-12 * p.abs().max(q.abs()));
        if !same {
            return Err(crate::Error::Data(format!(
                "{name} was evaluated on other held-out windows than {} (its logit-lens KL differs)",
                reports[0].0
            )));
        }
        lines.push(line(name, &r.kl_tuned, &r.kl_tuned_ci95)?);
    }
    super::interval_lines(
        &format!("{title} (logit lens: mean {logit_mean:.2})"),
        "block (residual after it)",
        "held-out mean KL(final ‖ lens), nats (± 95 % bootstrap CI)",
        &lines,
    )
}

/// The training losses of KL-trained lenses step by step (`train_state.json`'s `losses`), each
/// step's mean over the translators of blocks 1 … L − 1 (the embedding output's is left out, as in
/// [`lens_comparison_chart`]): where a run's curve flattens.
pub fn training_curves_chart(title: &str, states: &[(&str, &TrainState)]) -> Result<Chart> {
    let series = states
        .iter()
        .map(|(name, s)| {
            let ys: Vec<f64> = s
                .losses
                .iter()
                .map(|l| l.iter().skip(1).sum::<f64>() / (l.len().max(2) - 1) as f64)
                .collect();
            let xs = (1..=ys.len()).map(|i| i as f64).collect();
            (name.to_string(), xs, ys)
        })
        .collect();
    super::xy_lines(
        title,
        "step",
        "training KL(final ‖ lens) of the step's batch, nats (mean over blocks 1 … L − 1)",
        series,
    )
}
