//! The figures of docs/results.md: every chart of every run in `docs/results/` as a static SVG
//! (the same sketch the notebooks show where scripts do not run), into `docs/results/figures/`.
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
    Ok(())
}
