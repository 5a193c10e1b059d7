//! `report.html`: an experiment's configuration, its numbers beside the paper's, its tables and
//! charts, in one offline page (plotly.js embedded once).

use super::outcome::Outcome;
use super::store::StoredConfig;
use crate::analysis::Table;
use crate::error::Result;
use crate::plots::plotly_js_script;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The configuration as a two-column table.
pub fn config_table(stored: &StoredConfig) -> Result<Table> {
    let c = &stored.config;
    let mut t = Table::new("Configuration", &["setting", "value"]);
    let mut rows: Vec<(String, String)> = vec![
        ("experiment".into(), c.kind_name().into()),
        ("protocol".into(), c.protocol.name().into()),
        ("scale".into(), c.scale.name().into()),
        (
            "model".into(),
            format!(
                "{} ({}, {} blocks)",
                c.model.name, c.model.architecture, c.model.n_layers
            ),
        ),
        ("model sha256".into(), c.model.sha256.clone()),
        ("weights".into(), c.model.dtype.clone()),
        ("device".into(), stored.run.device.clone()),
        (
            "data".into(),
            format!(
                "{} ({} records, sha256 {})",
                stored.run.data, c.data.records, c.data.sha256
            ),
        ),
        ("items".into(), stored.n_items.to_string()),
        ("seed".into(), c.seed.to_string()),
        (
            "generation".into(),
            format!(
                "{}, EOS {}, chat template {}",
                if c.generation.temperature > 0.0 {
                    format!("sampled at T = {}", c.generation.temperature)
                } else {
                    "greedy".into()
                },
                if c.generation.ignore_eos {
                    "ignored"
                } else {
                    "stops"
                },
                if c.generation.chat { "on" } else { "off" }
            ),
        ),
        (
            "lens".into(),
            format!(
                "top-p {}, α = 0 threshold {:e}",
                c.stats.top_p, c.stats.support_threshold
            ),
        ),
        ("entropy-lens".into(), c.crate_version.clone()),
        ("config sha256".into(), stored.config_sha256.clone()),
    ];
    // The spec's own settings, by name.
    let mut own: Vec<(&String, &serde_json::Value)> = c.spec.fields().iter().collect();
    own.sort_by_key(|(k, _)| *k);
    rows.extend(own.into_iter().map(|(k, v)| (k.clone(), v.to_string())));
    for (k, v) in rows {
        t.row(vec![k, v]);
    }
    Ok(t)
}

/// The standalone report page.
pub fn report_html(stored: &StoredConfig, outcome: &Outcome) -> Result<String> {
    let c = &stored.config;
    let title = format!(
        "entropy-lens · {} · {} · {} scale",
        c.kind_name(),
        c.model.name,
        c.scale.name()
    );
    let mut body = format!(
        "<h1 style=\"font-family:sans-serif\">{}</h1>\n",
        escape(&title)
    );
    body.push_str(&outcome.tables_html());
    for chart in outcome.charts()? {
        body.push_str(&chart.to_html_fragment());
        body.push('\n');
    }
    body.push_str(&config_table(stored)?.to_html());
    Ok(format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>{}</head>\n<body style=\"max-width:1000px;margin:auto\">\n{body}\n</body></html>\n",
        escape(&title),
        plotly_js_script()
    ))
}
