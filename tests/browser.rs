//! The published HTML report renders its Plotly charts in a real browser with no network:
//! headless Chromium (Debian's `chromium`) in its own network namespace, DNS pointed nowhere.
//!
//! Needs Chromium, so it is ignored by a plain `cargo test`; `scripts/test.sh` installs Chromium and
//! runs it. `REPORTS_DIR` selects the folder of reports (default `reports/`); every `*.html` in it is
//! checked.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// One headless Chromium run; a run past it is killed with all its helper processes.
const BROWSER_LIMIT: Duration = Duration::from_secs(90);

/// Runs Chromium headless with `args`, offline, within [`BROWSER_LIMIT`]; once more if the first run
/// hangs or fails (a fresh profile folder each time). Fails naming `report` and `step`.
fn offline_chromium(
    profile: &Path,
    args: &[String],
    report: &Path,
    step: &str,
) -> std::process::Output {
    let mut last = String::new();
    for attempt in 1..=2 {
        let dir = profile.with_extension(format!("try{attempt}"));
        // A run that ends is judged by what it produced (the checks below); one that hangs is
        // killed and tried once more.
        match chromium_once(&dir, args) {
            Ok(out) => return out,
            Err(e) => last = e.to_string(),
        }
        eprintln!("{} ({step}), attempt {attempt}: {last}", report.display());
    }
    panic!(
        "headless Chromium failed twice on {} ({step}): {last}",
        report.display()
    );
}

fn chromium_once(
    profile: &Path,
    args: &[String],
) -> Result<std::process::Output, common::process::RunError> {
    let mut cmd_args: Vec<String> = vec![
        "--headless".into(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-quic".into(),
        // Belt and braces: no name resolves and every request goes to a closed local port.
        "--host-resolver-rules=MAP * ~NOTFOUND".into(),
        "--proxy-server=127.0.0.1:9".into(),
        format!("--user-data-dir={}", profile.display()),
        "--virtual-time-budget=30000".into(),
        "--run-all-compositor-stages-before-draw".into(),
    ];
    cmd_args.extend_from_slice(args);
    // A network namespace of its own when we may create one (root, or user namespaces).
    let isolated = Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let mut cmd = if isolated {
        let mut c = Command::new("unshare");
        c.arg("-n").arg(common::chromium());
        c
    } else {
        Command::new(common::chromium())
    };
    common::output_within(cmd.args(&cmd_args), BROWSER_LIMIT)
}

#[test]
#[ignore = "needs Debian's chromium; run by scripts/test.sh"]
fn reports_render_plotly_charts_offline() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"));
    let dir = std::env::var("REPORTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("reports"));
    // The Rust notebooks' reports, then the Python notebooks' (python/).
    let html_in = |d: &Path| -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(d)
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "html"))
            .collect();
        found.sort();
        found
    };
    let mut reports = html_in(&dir);
    assert!(!reports.is_empty(), "no reports in {}", dir.display());
    let python = html_in(&dir.join("python"));
    assert!(
        python.len() >= 2,
        "expected the Python notebooks' reports in {}",
        dir.join("python").display()
    );
    reports.extend(python);
    for html in reports {
        check_report(&html);
    }
}

fn check_report(html: &Path) {
    let html = html
        .canonicalize()
        .unwrap_or_else(|_| panic!("{} is missing", html.display()));
    // The Rust quickstart draws eight charts or more; every other report (the Python ones too) two.
    let quickstart = html.file_name().is_some_and(|n| n == "01_quickstart.html")
        && !html.parent().is_some_and(|p| p.ends_with("python"));
    let url = format!("file://{}", html.display());
    let tmp = tempfile::tempdir().unwrap();

    let dom = offline_chromium(
        &tmp.path().join("p1"),
        &["--dump-dom".into(), url.clone()],
        &html,
        "loading the page and dumping its DOM",
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    let charts = dom.matches("class=\"entropy-lens-chart").count();
    let plotted = dom.matches("js-plotly-plot").count();
    let main_svg = dom.matches("main-svg").count();
    println!(
        "{}: {charts} chart divs, {plotted} drawn by plotly.js, {main_svg} plotly SVG layers",
        html.display()
    );
    let want = if quickstart { 8 } else { 2 };
    assert!(
        charts >= want,
        "expected at least {want} charts, found {charts}"
    );
    assert!(
        plotted >= charts,
        "plotly.js drew {plotted} of {charts} charts offline"
    );
    assert!(
        main_svg >= 2 * charts,
        "too few plotly SVG layers: {main_svg}"
    );
    if quickstart {
        assert!(
            dom.contains("class=\"heatmaplayer") || dom.contains("heatmaplayer"),
            "no heatmap layer drawn"
        );
    }

    let shot = tmp.path().join("shot.png");
    offline_chromium(
        &tmp.path().join("p2"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2400".into(),
            url,
        ],
        &html,
        "taking a screenshot",
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("screenshot written"),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let channels = info.color_type.samples();
    let mut colours = std::collections::HashSet::new();
    let mut non_white = 0usize;
    for px in bytes.chunks(channels) {
        colours.insert(px[..3.min(px.len())].to_vec());
        if px.iter().take(3).any(|&c| c < 235) {
            non_white += 1;
        }
    }
    let total = bytes.len() / channels;
    println!(
        "screenshot {}×{}: {} colours, {:.1}% non-white",
        info.width,
        info.height,
        colours.len(),
        100.0 * non_white as f64 / total as f64
    );
    assert!(
        colours.len() > 50,
        "the page looks blank ({} colours)",
        colours.len()
    );
    assert!(non_white * 50 > total, "the page looks blank");
}
