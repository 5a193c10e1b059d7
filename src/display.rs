//! Notebook display: evcxr shows the last expression of a cell by calling its `evcxr_display`
//! method, which prints a MIME bundle between `EVCXR_BEGIN_CONTENT` / `EVCXR_END_CONTENT` markers.
//! Everything here emits `text/html`, which classic Notebook, JupyterLab and nbconvert's HTML
//! export all render (plotly's own `application/vnd.plotly.v1+json` is dropped by nbconvert).

/// Prints `html` as a `text/html` display for evcxr.
pub fn evcxr_html(html: &str) {
    println!("EVCXR_BEGIN_CONTENT text/html\n{html}\nEVCXR_END_CONTENT");
}

/// Implements `evcxr_display` for types with a `to_html(&self) -> String` method.
macro_rules! html_display {
    ($($t:ty),* $(,)?) => {
        $(
            impl $t {
                /// Renders in a Rust (evcxr) notebook as an HTML table.
                pub fn evcxr_display(&self) {
                    $crate::display::evcxr_html(&self.to_html());
                }
            }
        )*
    };
}

html_display!(
    crate::analysis::Table,
    crate::analysis::KnnCvResult,
    crate::analysis::SplitF1Result,
    crate::analysis::C1Result,
    crate::analysis::C2Result,
);
