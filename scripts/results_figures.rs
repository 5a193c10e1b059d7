//! The figures of docs/results.md: every chart of every run in `docs/results/` as a static SVG
//! (the same sketch the notebooks show where scripts do not run), and the tuned lenses' held-out KL
//! by layer (`docs/results/lenses/*/train_report.json`), into `docs/results/figures/`.
//!
//! `cargo run --release --example results_figures`

use entropy_lens::experiments::Outcome;

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
