//! One offline HTML page for a set of profiles (the explorer's "download report"): per profile its
//! settings, the heatmap, the ΔH bars and the chosen token's trace at one position; plotly.js
//! embedded once, like the notebooks' exported reports.

use super::charts::{delta_bars, entropy_heatmap, target_trace, HeatMetric};
use super::{escape, plotly_js_script};
use crate::analysis::Table;
use crate::error::Result;
use crate::model::TextTokenizer;
use crate::profile::EntropyProfile;

/// One profile of a report.
pub struct ReportItem<'a> {
    /// Shown as the section's heading (e.g. "A", "B with blocks 3, 4 skipped").
    pub label: String,
    pub profile: &'a EntropyProfile,
    /// Decodes the top-k ids in the heatmap's hover (ids otherwise).
    pub tokenizer: Option<&'a TextTokenizer>,
    pub metric: HeatMetric,
    /// Index into `profile.positions` of the ΔH bars and the token trace (None: the last).
    pub position: Option<usize>,
}

/// The standalone report page of `items`.
///
/// # Errors
/// When a chart cannot be made (a profile without positions, a metric it does not carry, a
/// position out of range).
pub fn profiles_report_html(title: &str, items: &[ReportItem<'_>]) -> Result<String> {
    let mut body = format!(
        "<h1 style=\"font-family:sans-serif\">{}</h1>\n",
        escape(title)
    );
    for item in items {
        let p = item.profile;
        body.push_str(&format!(
            "<h2 style=\"font-family:sans-serif\">{}</h2>\n",
            escape(&item.label)
        ));
        let mut t = Table::new("Settings", &["setting", "value"]);
        t.row(vec!["model".into(), p.model.clone()]);
        t.row(vec!["prompt".into(), p.prompt.clone()]);
        t.row(vec!["output".into(), p.generated_text.clone()]);
        if let Some(prov) = &p.provenance {
            t.row(vec![
                "lens".into(),
                prov.lens
                    .as_ref()
                    .map(|l| format!("{} ({})", l.kind, l.source))
                    .unwrap_or_else(|| "logit".into()),
            ]);
            t.row(vec![
                "skipped blocks".into(),
                if prov.skipped_blocks.is_empty() {
                    "none".into()
                } else {
                    prov.skipped_blocks
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            ]);
            t.row(vec![
                "generation".into(),
                format!(
                    "{}, seed {}, chat template {}",
                    if prov.temperature > 0.0 {
                        format!("sampled at T = {}", prov.temperature)
                    } else {
                        "greedy".into()
                    },
                    prov.seed,
                    if prov.chat_template { "on" } else { "off" }
                ),
            ]);
            t.row(vec![
                "weights".into(),
                format!(
                    "{} on {}, sha256 {}",
                    prov.dtype, prov.device, prov.model_sha256
                ),
            ]);
            t.row(vec!["entropy-lens".into(), prov.crate_version.clone()]);
        }
        body.push_str(&t.to_html());
        body.push_str(&entropy_heatmap(p, item.tokenizer, item.metric)?.to_html_fragment());
        let at = item
            .position
            .unwrap_or_else(|| p.positions.len().saturating_sub(1));
        body.push_str(&delta_bars(p, at)?.to_html_fragment());
        if p.positions.get(at).is_some_and(|x| x.target.is_some()) {
            body.push_str(&target_trace(p, at)?.to_html_fragment());
        }
        body.push('\n');
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>{}</head>\n<body style=\"max-width:1000px;margin:auto\">\n{body}\n</body></html>\n",
        escape(title),
        plotly_js_script()
    ))
}
