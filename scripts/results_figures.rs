//! The figures of docs/results.md: every chart of every run in `docs/results/` as a static SVG
//! (the same sketch the notebooks show where scripts do not run), the runs re-read through the
//! study's lens (`docs/results/reread/`), the convergence study's held-out KL and training curves
//! (`docs/results/lens-convergence/`), and the tuned lenses' held-out KL by layer
//! (`docs/results/lenses/*/train_report.json`), into `docs/results/figures/`.
//!
//! `cargo run --release --example results_figures`

use std::path::Path;

use entropy_lens::experiments::Outcome;
use entropy_lens::lens::trainer::{TrainReport, TrainState};
use entropy_lens::plots::{lens_comparison_chart, training_curves_chart};

const MODELS: [&str; 2] = ["SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"];

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> entropy_lens::Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| entropy_lens::Error::io(path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| entropy_lens::Error::Data(format!("{}: {e}", path.display())))
}

/// Per model: the shortcut lenses by budget, the KL-trained lenses by budget (held-out KL by
/// block with bootstrap intervals), and the KL-trained lenses' step-by-step training losses.
fn convergence_figures(dir: &Path, figures: &Path) -> entropy_lens::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| dir.join(n).join("train_report.json").is_file())
        .collect();
    names.sort_by_key(|n| {
        // Budgets in increasing order: the tokens (shortcut-N, kl-SxB) as a number.
        let budget: usize = n
            .split('-')
            .nth(1)
            .map(|b| {
                b.split('x')
                    .filter_map(|x| x.parse::<usize>().ok())
                    .product()
            })
            .unwrap_or(0);
        (
            n.split('-').next().unwrap_or("").to_string(),
            budget,
            n.clone(),
        )
    });
    for model in MODELS {
        for method in ["shortcut", "kl"] {
            let mine: Vec<&String> = names
                .iter()
                // The in-domain lenses (shortcut-formats-N) have other held-out windows.
                .filter(|n| n.starts_with(&format!("{method}-")) && n.ends_with(model))
                .filter(|n| !n.starts_with("shortcut-formats-"))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let reports = mine
                .iter()
                .map(|n| read_json::<TrainReport>(&dir.join(n).join("train_report.json")))
                .collect::<entropy_lens::Result<Vec<_>>>()?;
            let labels: Vec<String> = mine
                .iter()
                .map(|n| n.trim_end_matches(model).trim_end_matches('-').to_string())
                .collect();
            let pairs: Vec<(&str, &TrainReport)> =
                labels.iter().map(String::as_str).zip(&reports).collect();
            let chart = lens_comparison_chart(
                &format!("Held-out KL by block, {method} lenses by budget, {model}"),
                &pairs,
            )?;
            let path = figures.join(format!("convergence-{method}-{model}.svg"));
            chart.save_svg(&path)?;
            println!("{}  {}", path.display(), chart.title());
            if method == "kl" {
                let states = mine
                    .iter()
                    .map(|n| read_json::<TrainState>(&dir.join(n).join("train_state.json")))
                    .collect::<entropy_lens::Result<Vec<_>>>()?;
                let pairs: Vec<(&str, &TrainState)> =
                    labels.iter().map(String::as_str).zip(&states).collect();
                let chart = training_curves_chart(
                    &format!("KL training from the shortcut lens, step by step, {model}"),
                    &pairs,
                )?;
                let path = figures.join(format!("convergence-steps-{model}.svg"));
                chart.save_svg(&path)?;
                println!("{}  {}", path.display(), chart.title());
            }
        }
    }
    Ok(())
}

fn main() -> entropy_lens::Result<()> {
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"),
    )
    .join("docs/results");
    let figures = root.join("figures");
    std::fs::create_dir_all(&figures).map_err(|e| entropy_lens::Error::io(&figures, e))?;
    let mut runs: Vec<_> = std::fs::read_dir(&root)
        .map_err(|e| entropy_lens::Error::io(&root, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("result.json").is_file())
        .collect();
    runs.sort();
    for run in runs {
        let name = run
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let outcome = Outcome::load(&run)?;
        for (i, chart) in outcome.charts()?.iter().enumerate() {
            let path = figures.join(format!("{name}-{}.svg", i + 1));
            chart.save_svg(&path)?;
            println!("{}  {}", path.display(), chart.title());
        }
    }
    // The runs re-read through the study's lens (docs/results/reread/<run>/); not the logit lens's
    // formats runs at 25 topics per format, which the page reads for their lens fit only.
    let reread = root.join("reread");
    if let Ok(dirs) = std::fs::read_dir(&reread) {
        let mut runs: Vec<_> = dirs
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("result.json").is_file())
            .filter(|p| !p.to_string_lossy().contains("-n25-"))
            .collect();
        runs.sort();
        for run in runs {
            let name = run
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            for (i, chart) in Outcome::load(&run)?.charts()?.iter().enumerate() {
                let path = figures.join(format!("reread-{name}-{}.svg", i + 1));
                chart.save_svg(&path)?;
                println!("{}  {}", path.display(), chart.title());
            }
        }
    }
    convergence_figures(&root.join("lens-convergence"), &figures)?;
    // The tuned lenses' held-out evaluations (docs/results/lenses/<model>/train_report.json).
    let lenses = root.join("lenses");
    if let Ok(dirs) = std::fs::read_dir(&lenses) {
        let mut reports: Vec<_> = dirs
            .filter_map(|e| e.ok().map(|e| e.path().join("train_report.json")))
            .filter(|p| p.is_file())
            .collect();
        reports.sort();
        for path in reports {
            let text =
                std::fs::read_to_string(&path).map_err(|e| entropy_lens::Error::io(&path, e))?;
            let report: entropy_lens::lens::trainer::TrainReport = serde_json::from_str(&text)
                .map_err(|e| entropy_lens::Error::Data(format!("{}: {e}", path.display())))?;
            let name = path
                .parent()
                .and_then(|p| p.file_name())
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let out = figures.join(format!("lens-{name}.svg"));
            let chart = report.chart()?;
            chart.save_svg(&out)?;
            println!("{}  {}", out.display(), chart.title());
        }
    }
    Ok(())
}
