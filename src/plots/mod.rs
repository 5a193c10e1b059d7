//! Charts of profiles and results (Plotly), which display themselves in notebooks and save as
//! standalone, offline HTML.
//!
//! plotly.js (npm `plotly.js-dist-min`, pinned, vendored under `vendor/`) is embedded in the first
//! chart a process displays and in every saved HTML file, so nothing is fetched from a CDN. Every
//! chart also carries a static SVG sketch of its data: it is what shows where scripts do not run
//! (GitHub's notebook view, untrusted notebooks), and `save_svg` writes it for papers.

use std::sync::atomic::{AtomicUsize, Ordering};

use plotly::Plot;

use crate::error::{Error, Result};

pub mod charts;
mod lens_training;
pub use lens_training::{lens_comparison_chart, training_curves_chart};
mod report;
mod svg;
mod traces;

pub use charts::{
    cosine_similarity, delta_bars, delta_mean_bars, depth_normalized, depth_profile_bands,
    entropy_heatmap, interval_lines, kl_by_block, lens_fit_chart, matrix_std, mean_profile_bands,
    point_axis, prediction_depth_curves, profile_bands, profile_lines, profile_table,
    projection_scatter, renyi_lines, renyi_similarity, similarity_panels, skip_curves,
    target_rank_heatmap, target_trace, xy_lines, xy_lines_log_y, xy_scatter, Band, HeatMetric,
    IntervalLine,
};
pub use report::{profiles_report_html, ReportItem};
pub(crate) use svg::Sketch;

/// plotly.js from `plotly.js-dist-min`, the version plotly.rs 0.13.5 targets.
pub const PLOTLY_JS_VERSION: &str = "3.0.1";
pub(crate) const PLOTLY_JS: &str = include_str!("../../vendor/plotly.js-dist-min/plotly.min.js");

/// Marks, for the whole process, that plotly.js went out with a notebook display. evcxr links this
/// crate into every cell's library, so a `static` would reset at each cell; the environment is
/// shared by all of them.
const PLOTLY_SENT_ENV: &str = "ENTROPY_LENS_PLOTLY_JS_SENT";
/// Marks plotly.js in notebook outputs (see [`Chart::notebook_html`]).
pub const PLOTLY_JS_BEGIN: &str = "<!-- entropy-lens:plotly.js -->";
pub const PLOTLY_JS_END: &str = "<!-- /entropy-lens:plotly.js -->";
static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

/// A chart: the Plotly figure plus a static sketch of the same data.
#[derive(Clone)]
pub struct Chart {
    plot: Plot,
    title: String,
    height: usize,
    sketch: Sketch,
}

impl std::fmt::Debug for Chart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chart").field("title", &self.title).finish()
    }
}

/// `<script>` holding plotly.js.
pub fn plotly_js_script() -> String {
    format!("<script type=\"text/javascript\">{PLOTLY_JS}</script>")
}

impl Chart {
    pub(crate) fn new(plot: Plot, title: impl Into<String>, height: usize, sketch: Sketch) -> Self {
        Self {
            plot,
            title: title.into(),
            height,
            sketch,
        }
    }

    /// The Plotly figure (to restyle or export with plotly.rs directly).
    pub fn plot(&self) -> &Plot {
        &self.plot
    }

    pub fn title(&self) -> &str {
        &self.title
    }

    /// The figure as Plotly JSON (`{"data": [...], "layout": {...}}`).
    pub fn to_json(&self) -> String {
        self.plot.to_json()
    }

    /// Static SVG sketch of the chart's data.
    pub fn to_svg(&self) -> String {
        self.sketch.render(&self.title, 760, self.height)
    }

    /// A `<div>` with the static sketch, replaced by the interactive chart once plotly.js is
    /// loaded (waits for it if it arrives later on the page). Does not include plotly.js.
    pub fn to_html_fragment(&self) -> String {
        html_fragment(&self.plot.to_json(), &self.to_svg(), self.height)
    }

    /// The chart's height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// A complete offline HTML page (plotly.js embedded).
    pub fn to_standalone_html(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>{}</head>\n<body>{}</body></html>\n",
            escape(&self.title),
            plotly_js_script(),
            self.to_html_fragment()
        )
    }

    /// Writes [`Chart::to_standalone_html`] to `path`.
    pub fn save_html(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let p = path.as_ref();
        std::fs::write(p, self.to_standalone_html()).map_err(|e| Error::io(p, e))
    }

    /// Writes the static SVG sketch to `path`.
    pub fn save_svg(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let p = path.as_ref();
        std::fs::write(p, self.to_svg()).map_err(|e| Error::io(p, e))
    }

    /// HTML for a notebook output: plotly.js the first time in this process, then the chart.
    /// plotly.js sits between [`PLOTLY_JS_BEGIN`] and [`PLOTLY_JS_END`] so that a committed
    /// notebook can drop it (`scripts/strip-plotly.py`) while its HTML report keeps it.
    pub fn notebook_html(&self) -> String {
        notebook_html(&self.plot.to_json(), &self.to_svg(), self.height)
    }

    /// Renders in a Rust (evcxr) notebook: interactive in classic Notebook and JupyterLab, kept
    /// by nbconvert's HTML export, with the static sketch where scripts do not run.
    pub fn evcxr_display(&self) {
        crate::display::evcxr_html(&self.notebook_html());
    }
}

/// A `<div>` showing `svg` (a static sketch) until plotly.js draws the figure `fig_json`
/// (`{"data": [...], "layout": {...}}`) in its place; waits for plotly.js if it arrives later on
/// the page. Shared by [`Chart`] and the Python figures (which may have been restyled since).
pub fn html_fragment(fig_json: &str, svg: &str, height: usize) -> String {
    // Unique across evcxr cells too (each cell has its own copy of NEXT_ID).
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let id = format!(
        "entropy-lens-{}-{nanos}-{}",
        std::process::id(),
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    );
    // Keep "</" out of the script body whatever the labels contain.
    let fig = fig_json.replace("</", "<\\/");
    format!(
        "<div id=\"{id}\" class=\"entropy-lens-chart\" style=\"width:100%;max-width:980px;height:{height}px\">{svg}</div>\n\
         <script type=\"text/javascript\">(function(){{\
         var fig={fig};\
         function draw(){{var d=document.getElementById(\"{id}\");if(!d)return;d.innerHTML=\"\";\
         Plotly.newPlot(d,fig.data,fig.layout,{{responsive:true,displaylogo:false}});}}\
         if(window.Plotly){{draw();}}else{{var n=0,t=setInterval(function(){{\
         if(window.Plotly){{clearInterval(t);draw();}}else if(++n>400){{clearInterval(t);}}}},25);}}\
         }})();</script>"
    )
}

/// [`html_fragment`] for a notebook output, preceded by plotly.js the first time in this process
/// (between [`PLOTLY_JS_BEGIN`] and [`PLOTLY_JS_END`]; see [`reset_plotly_js`]).
pub fn notebook_html(fig_json: &str, svg: &str, height: usize) -> String {
    let js = if std::env::var_os(PLOTLY_SENT_ENV).is_some() {
        String::new()
    } else {
        std::env::set_var(PLOTLY_SENT_ENV, "1");
        format!("{PLOTLY_JS_BEGIN}{}{PLOTLY_JS_END}", plotly_js_script())
    };
    format!("{js}{}", html_fragment(fig_json, svg, height))
}

/// Text for HTML element content.
pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Makes the next displayed chart embed plotly.js again (e.g. after clearing a notebook's outputs).
pub fn reset_plotly_js() {
    std::env::remove_var(PLOTLY_SENT_ENV);
}
