//! The committed notebooks and their HTML reports: executed without errors, Plotly charts present,
//! no plotly.js inside the notebooks (their reports embed it exactly once each), and an
//! experiment's progress shown on one line (updated in place, folded to its last state in the
//! saved notebook).
//!
//! `NOTEBOOKS_DIR` / `REPORTS_DIR` point the checks at freshly executed copies (`scripts/test.sh`
//! does so after executing the notebooks headless); by default the committed `notebooks/` and
//! `reports/` are checked.

use std::path::PathBuf;

use serde_json::Value;

const NOTEBOOKS: [&str; 9] = [
    "01_quickstart",
    "02_validation_c1_c2",
    "03_model_families",
    "04_task_types",
    "05_output_formats_renyi",
    "06_mmlu_correctness",
    "07_layer_skipping",
    "08_vision_transformers",
    "09_tuned_lens",
];

/// The Python notebooks (ordinary python3 kernel, the wheel), under `python/` in both folders.
const PYTHON_NOTEBOOKS: [&str; 2] = ["python/01_quickstart", "python/02_task_types"];

fn dir(var: &str, default: &str) -> PathBuf {
    std::env::var(var).map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
            .join(default)
    })
}

/// Names to check: all of them, or those listed in `NOTEBOOKS` (comma-separated).
fn names() -> Vec<String> {
    match std::env::var("NOTEBOOKS") {
        Ok(list) => list.split(',').map(|s| s.trim().to_string()).collect(),
        Err(_) => NOTEBOOKS
            .iter()
            .chain(PYTHON_NOTEBOOKS.iter())
            .map(|s| s.to_string())
            .collect(),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

#[test]
fn notebooks_are_executed_without_errors_and_carry_charts_but_no_plotly_js() {
    let nb_dir = dir("NOTEBOOKS_DIR", "notebooks");
    for name in names() {
        let path = nb_dir.join(format!("{name}.ipynb"));
        let raw =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            !raw.contains("plotly.js v3"),
            "{name}: plotly.js is embedded in the notebook"
        );
        assert!(
            raw.len() < 3 << 20,
            "{name}: {} bytes, expected a lean notebook",
            raw.len()
        );
        let nb: Value = serde_json::from_str(&raw).unwrap();
        let kernel = if name.starts_with("python/") {
            "python3"
        } else {
            "rust"
        };
        assert_eq!(nb["metadata"]["kernelspec"]["name"], kernel, "{name}");
        let (mut code_cells, mut charts, mut tables) = (0, 0, 0);
        for cell in nb["cells"].as_array().unwrap() {
            if cell["cell_type"] != "code" {
                continue;
            }
            code_cells += 1;
            assert!(
                cell["execution_count"].is_number(),
                "{name}: a code cell was not executed: {}",
                text(&cell["source"])
            );
            for out in cell["outputs"].as_array().unwrap() {
                assert_ne!(
                    out["output_type"],
                    "error",
                    "{name}: a cell failed: {}",
                    text(&cell["source"])
                );
                let stream = text(&out["text"]);
                assert!(
                    !stream.contains("panicked"),
                    "{name}: a cell panicked: {stream}"
                );
                // Progress updates in place: the saved output keeps its last state only.
                assert!(
                    !stream.contains('\r'),
                    "{name}: progress carriage returns left unfolded: {stream:?}"
                );
                let statuses = stream.lines().filter(|l| l.contains("items/s")).count();
                assert!(
                    statuses <= 1,
                    "{name}: {statuses} progress lines in one cell output, expected one:\n{stream}"
                );
                let html = text(&out["data"]["text/html"]);
                charts += html.matches("class=\"entropy-lens-chart\"").count();
                tables += html.matches("class=\"entropy-lens-table\"").count();
                if html.contains("entropy-lens-chart") {
                    assert!(
                        html.contains("<svg"),
                        "{name}: a chart without its SVG sketch"
                    );
                }
            }
        }
        assert!(code_cells >= 5, "{name}: {code_cells} code cells");
        assert!(charts >= 2, "{name}: {charts} Plotly charts");
        println!("{name}: {code_cells} code cells, {charts} charts, {tables} tables");
    }
}

#[test]
fn reports_embed_plotly_js_once() {
    let reports = dir("REPORTS_DIR", "reports");
    for name in names() {
        let path = reports.join(format!("{name}.html"));
        let html =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            html.matches("plotly.js v3").count(),
            1,
            "{name}: plotly.js must be embedded exactly once"
        );
        assert!(html.matches("class=\"entropy-lens-chart\"").count() >= 2);
        // plotly.js mentions its CDN internally (topojson); no script may load from it.
        assert!(
            !html.contains("src=\"https://cdn.plot.ly"),
            "{name}: plotly.js from a CDN"
        );
    }
}
