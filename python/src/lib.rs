//! `entropy_lens._native`: the Rust library as a Python extension module. The Python package
//! `entropy_lens` wraps it (numpy arrays, pandas tables, Plotly figures); every statistic is the
//! library's.

mod analysis;
mod errors;
mod logger;
mod profiler;
mod runs;
mod watched;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logger::install();
    m.add(
        "__version__",
        entropy_lens::profile::provenance::CRATE_VERSION,
    )?;
    m.add_class::<profiler::PyProfiler>()?;
    m.add_class::<profiler::PyProfile>()?;
    m.add_function(wrap_pyfunction!(runs::main, m)?)?;
    m.add_function(wrap_pyfunction!(runs::run_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(runs::train_lens, m)?)?;
    m.add_function(wrap_pyfunction!(runs::load_outcome, m)?)?;
    m.add_function(wrap_pyfunction!(runs::compare_runs, m)?)?;
    m.add_function(wrap_pyfunction!(runs::experiments_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(runs::outcome_charts, m)?)?;
    m.add_function(wrap_pyfunction!(runs::outcome_tables, m)?)?;
    m.add_function(wrap_pyfunction!(runs::notebook_html, m)?)?;
    m.add_function(wrap_pyfunction!(runs::reset_plotly_js, m)?)?;
    m.add_function(wrap_pyfunction!(runs::fetch_models, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::knn_auc, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::c1, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::c2, m)?)?;
    Ok(())
}
