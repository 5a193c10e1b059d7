//! A tuned lens's training report as a table and a chart (held-out KL by layer, logit lens beside
//! tuned lens). Here rather than in `lens/`, which the charts themselves read from.

use super::Chart;
use crate::analysis::Table;
use crate::error::Result;
use crate::lens::trainer::TrainReport;

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
