//! `docs/results.md` and `docs/results-tuned-lens.md` quote every committed run: each run's
//! headline numbers in `docs/results/<run>/result.json` appear, as `scripts/results-tables.py`
//! prints them, on the page of the script that makes the run (tuned-lens runs, `*-tuned-*`, and
//! each tuned lens' held-out KL in `docs/results/lenses/<model>/train_report.json` on the
//! tuned-lens page, as is the held-out KL of a lens trained again with another budget,
//! `docs/results/lens-budget/*/train_report.json`; every other run on the results page). A regenerated run whose numbers its page
//! does not carry, or a page edited by hand away from its data, fails here.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
}

fn json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v:.80}"))
}

/// A train report's KL by layer (`kl_logit` or `kl_tuned`), in nats.
fn kl_by_layer(report: &Value, key: &str) -> Vec<f64> {
    report[key]
        .as_array()
        .expect("KL by layer")
        .iter()
        .map(|v| v.as_f64().expect("KL"))
        .collect()
}

/// `xx.xx ± yy.yy`, percentages as the page prints a kNN score.
fn auc(score: &Value) -> String {
    format!(
        "{:.2} ± {:.2}",
        100.0 * num(score, "auc_mean"),
        100.0 * num(score, "auc_std")
    )
}

/// The strings of one run the page must carry.
fn quotes(run: &str, r: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match r["experiment"].as_str().unwrap_or_default() {
        "validate" => {
            out.push(format!("{:.4}", num(r, "c1_spearman")));
            out.push(format!(
                "{:.3} ± {:.3}",
                num(r, "c1_per_prompt_mean"),
                num(r, "c1_per_prompt_std")
            ));
            for key in ["c2_mean", "c2_mean_previous", "c2_mean_jaccard"] {
                out.push(format!("{:.3}", num(r, key)));
            }
        }
        "tasks" => {
            out.push(auc(r));
            out.push(format!("{:.2}", 100.0 * num(r, "f1_macro_mean")));
            let subsets = r["layer_subsets"].as_object().expect("layer_subsets");
            out.extend(subsets.values().map(auc));
        }
        "formats" => {
            let alphas = r["per_alpha"].as_object().expect("per_alpha");
            out.extend(alphas.values().map(auc));
            let sigmas: Vec<String> = r["similarity"]
                .as_array()
                .expect("similarity")
                .iter()
                .map(|s| format!("{:.3}", num(s, "sigma_subset")))
                .collect();
            out.push(sigmas.join(" / "));
        }
        "mmlu" => {
            for style in ["base", "humble", "instruct"] {
                let s = &r["by_style"][style];
                out.push(format!(
                    "{:.2} ({}/{})",
                    100.0 * num(s, "accuracy"),
                    s["n_correct"],
                    s["n"]
                ));
                out.push(auc(s));
            }
        }
        "skip" => {
            for curve in ["expansion", "pruning", "random"] {
                let points: Vec<String> = r["curves"][curve]
                    .as_array()
                    .expect("curves")
                    .iter()
                    .map(|v| format!("{:.1}", 100.0 * v.as_f64().expect("accuracy")))
                    .collect();
                out.push(points.join(" / "));
            }
        }
        "family" => out.push(format!(
            "{:.2} ± {:.2}",
            100.0 * num(r, "f1_family_mean"),
            100.0 * num(r, "f1_family_std")
        )),
        other => panic!("{run}: experiment {other:?} has no quotes defined here; add them"),
    }
    out
}

#[test]
fn the_results_pages_quote_every_committed_run() {
    let read = |page: &str| std::fs::read_to_string(root().join(page)).expect(page);
    let (paper, tuned) = (read("docs/results.md"), read("docs/results-tuned-lens.md"));
    let mut runs: Vec<PathBuf> = std::fs::read_dir(root().join("docs/results"))
        .expect("docs/results")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("result.json").is_file())
        .collect();
    runs.sort();
    assert!(runs.len() >= 20, "{} runs", runs.len());
    let mut missing = Vec::new();
    let mut checked = 0;
    for run in &runs {
        let name = run.file_name().unwrap().to_string_lossy().into_owned();
        let (page, page_name) = if name.contains("-tuned") {
            (&tuned, "docs/results-tuned-lens.md")
        } else {
            (&paper, "docs/results.md")
        };
        for quote in quotes(&name, &json(&run.join("result.json"))) {
            checked += 1;
            if !page.contains(&quote) {
                missing.push(format!("{page_name} {name}: {quote}"));
            }
        }
    }
    for model in ["SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"] {
        let report = json(
            &root()
                .join("docs/results/lenses")
                .join(model)
                .join("train_report.json"),
        );
        for key in ["kl_logit", "kl_tuned"] {
            let kl = kl_by_layer(&report, key);
            let mean = kl.iter().sum::<f64>() / kl.len() as f64;
            for quote in kl
                .iter()
                .map(|v| format!("| {v:.2} |"))
                .chain([format!("**{mean:.2}**")])
            {
                checked += 1;
                if !tuned.contains(&quote) {
                    missing.push(format!(
                        "docs/results-tuned-lens.md lens {model} {key}: {quote}"
                    ));
                }
            }
        }
    }
    // A lens trained again with another budget: its held-out KL, read on the same held-out tokens
    // as the page's lens (so the logit lens' KL must be the same numbers).
    let budgets = root().join("docs/results/lens-budget");
    if budgets.is_dir() {
        for entry in std::fs::read_dir(&budgets).expect("lens-budget") {
            let dir = entry.expect("lens-budget entry").path();
            let report = json(&dir.join("train_report.json"));
            let model = report["model"].as_str().expect("model");
            let base = json(
                &root()
                    .join("docs/results/lenses")
                    .join(model)
                    .join("train_report.json"),
            );
            assert_eq!(
                report["kl_logit"],
                base["kl_logit"],
                "{}: not the page's held-out tokens",
                dir.display()
            );
            // Each layer's row as `scripts/results-tables.py` prints it: logit, the page's lens,
            // this one, and both ratios.
            let (logit, page_lens, this) = (
                kl_by_layer(&report, "kl_logit"),
                kl_by_layer(&base, "kl_tuned"),
                kl_by_layer(&report, "kl_tuned"),
            );
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            let mut rows: Vec<String> = (0..logit.len())
                .map(|i| {
                    let (a, x, y) = (logit[i], page_lens[i], this[i]);
                    format!(
                        "| {i} | {a:.2} | {x:.2} | {y:.2} | {:.2} | {:.2} |",
                        x / a,
                        y / a
                    )
                })
                .collect();
            let (a, x, y) = (mean(&logit), mean(&page_lens), mean(&this));
            rows.push(format!(
                "| mean | **{a:.2}** | **{x:.2}** | **{y:.2}** | **{:.2}** | **{:.2}** |",
                x / a,
                y / a
            ));
            for row in rows {
                checked += 1;
                if !tuned.contains(&row) {
                    missing.push(format!(
                        "docs/results-tuned-lens.md lens budget {}: {row}",
                        dir.display()
                    ));
                }
            }
        }
    }
    // The lens methods (scripts/results-lens-methods.sh): each layer's row as
    // `scripts/results-tables.py` prints it — logit, the page's lens, the shortcut, KL from the
    // shortcut — on the page's held-out tokens.
    let methods = root().join("docs/results/lens-methods");
    for model in ["SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"] {
        let base = json(
            &root()
                .join("docs/results/lenses")
                .join(model)
                .join("train_report.json"),
        );
        let others: Vec<Value> = ["shortcut", "kl-from-shortcut"]
            .iter()
            .map(|m| json(&methods.join(m).join(model).join("train_report.json")))
            .collect();
        for other in &others {
            assert_eq!(
                other["kl_logit"], base["kl_logit"],
                "{model}: a lens method read on other held-out tokens than the page's lens"
            );
        }
        let logit = kl_by_layer(&base, "kl_logit");
        let cols: Vec<Vec<f64>> = std::iter::once(&base)
            .chain(&others)
            .map(|r| kl_by_layer(r, "kl_tuned"))
            .collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let mut rows: Vec<String> = (0..logit.len())
            .map(|i| {
                format!(
                    "| {i} | {:.2} | {:.2} | {:.2} | {:.2} |",
                    logit[i], cols[0][i], cols[1][i], cols[2][i]
                )
            })
            .collect();
        rows.push(format!(
            "| mean | **{:.2}** | **{:.2}** | **{:.2}** | **{:.2}** |",
            mean(&logit),
            mean(&cols[0]),
            mean(&cols[1]),
            mean(&cols[2])
        ));
        for row in rows {
            checked += 1;
            if !tuned.contains(&row) {
                missing.push(format!(
                    "docs/results-tuned-lens.md lens methods {model}: {row}"
                ));
            }
        }
    }
    assert!(checked >= 200, "{checked} quotes");
    assert!(
        missing.is_empty(),
        "the pages do not carry these numbers of docs/results (print the tables with \
         `python3 scripts/results-tables.py`):\n{}",
        missing.join("\n")
    );
}

/// The lens study (`scripts/results-lens-*.sh`): every row of the tables `scripts/results-tables.py`
/// prints from `docs/results/lens-convergence/` and `docs/results/reread/` is on the tuned-lens
/// page, and every committed `compare/*.json` is what `compare-runs` computes from the committed
/// reports and results now (so neither a table nor a comparison was edited by hand).
#[test]
fn the_lens_study_tables_are_the_committed_runs() {
    use entropy_lens::experiments::paired::{compare_lenses, compare_runs};
    let tuned = std::fs::read_to_string(root().join("docs/results-tuned-lens.md")).unwrap();
    let run = std::process::Command::new("python3")
        .arg("scripts/results-tables.py")
        .current_dir(root())
        .output()
        .expect("python3 runs");
    assert!(run.status.success(), "{run:?}");
    let printed = String::from_utf8(run.stdout).unwrap();
    let mut rows = 0;
    let mut sections = Vec::new();
    for section in printed.split("\n## ").filter(|s| {
        s.starts_with("lens convergence")
            || s.starts_with("lens in-domain")
            || s.starts_with("reread")
            || s.starts_with("components")
    }) {
        sections.push(section.lines().next().unwrap_or_default().to_string());
        for row in section
            .lines()
            .filter(|l| l.starts_with("| ") || l.starts_with("shortcut drops"))
        {
            rows += 1;
            assert!(
                tuned.contains(row),
                "docs/results-tuned-lens.md lacks this row of `python3 scripts/results-tables.py`:\n{row}"
            );
        }
    }
    // Both models' convergence tables and every re-read table: nothing silently skipped.
    for needed in [
        "lens convergence SmolLM2",
        "lens convergence gemma",
        "lens convergence by layer SmolLM2",
        "lens convergence by layer gemma",
        "reread validate",
        "reread C1 prompt by prompt",
        "reread lens fit SmolLM2",
        "reread lens fit gemma",
        "reread lens fit, blocks",
        "reread shape shortcut SmolLM2",
        "reread shape shortcut gemma",
        "reread shape spans shortcut SmolLM2",
        "reread shape spans shortcut gemma",
        "reread shape indomain SmolLM2",
        "reread shape indomain gemma",
        "reread shape spans indomain gemma",
        "reread shape formats shortcut SmolLM2",
        "reread shape formats shortcut gemma",
        "reread shape spans formats shortcut SmolLM2",
        "reread shape spans formats shortcut gemma",
        "lens in-domain SmolLM2",
        "lens in-domain gemma",
        "reread tasks",
        "reread formats",
        "reread prediction depth",
        "components SmolLM2",
        "components gemma",
    ] {
        assert!(
            sections.iter().any(|s| s.starts_with(needed)),
            "no `{needed}` table printed: {sections:?}"
        );
    }
    assert!(rows >= 150, "{rows} rows");
    // The comparisons, recomputed (their folder names are where they were made: compared without them).
    let strip = |mut v: Value| {
        v["a"] = Value::Null;
        v["b"] = Value::Null;
        v
    };
    let mut recomputed = 0;
    let conv = root().join("docs/results/lens-convergence");
    for entry in std::fs::read_dir(conv.join("compare")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let model = ["SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"]
            .into_iter()
            .find(|m| name.ends_with(m))
            .expect("a model's lens");
        // An in-domain lens has its own held-out windows, and its own reference.
        let reference = if name.starts_with("shortcut-formats-") {
            format!("shortcut-formats-30720-{model}")
        } else {
            format!("shortcut-65536-{model}")
        };
        let now = compare_lenses(&conv.join(reference), &conv.join(&name)).unwrap();
        assert_eq!(
            strip(serde_json::to_value(now).unwrap()),
            strip(json(&path)),
            "{name}"
        );
        recomputed += 1;
    }
    let reread = root().join("docs/results/reread");
    for entry in std::fs::read_dir(reread.join("compare")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let (experiment, model) = ["SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"]
            .into_iter()
            .find_map(|m| {
                name.strip_suffix(&format!("-{m}"))
                    .map(|e| (e.to_string(), m))
            })
            .expect("an experiment and a model");
        // validate-M.json: the shortcut lens's run; validate-indomain-M.json: the in-domain lens's.
        let (experiment, lens) = match experiment.strip_suffix("-indomain") {
            Some(e) => (e.to_string(), "indomain"),
            None => (experiment, "shortcut"),
        };
        // formats through the logit lens with --kl is not run yet: the twin is its committed run
        // without --kl (scripts/results-lens-compare.sh).
        let mut logit = reread.join(format!("{experiment}-logit-{model}"));
        if !logit.exists() && experiment == "formats-256" {
            logit = root().join(format!("docs/results/{experiment}-{model}"));
        }
        let now =
            compare_runs(&logit, &reread.join(format!("{experiment}-{lens}-{model}"))).unwrap();
        let mut want = strip(json(&path));
        // C1 prompt by prompt needs the records, which are not committed: taken as they are.
        let mut got = strip(serde_json::to_value(now).unwrap());
        if let Some(pp) = want.get("per_prompt").cloned() {
            got["per_prompt"] = pp;
        }
        want.as_object_mut().unwrap().remove("per_prompt");
        got.as_object_mut().unwrap().remove("per_prompt");
        assert_eq!(got, want, "{name}");
        recomputed += 1;
    }
    assert!(recomputed >= 10, "{recomputed} comparisons");
}
