//! The experiment framework end to end, through the CLI: every experiment on both offline models at
//! smoke scale, SIGKILL at a random point then resume (byte-identical result), shards then merge
//! (byte-identical), refusals (other arguments, overlapping or incomplete shards), and the prompt
//! builders on the real TinyStories data.

mod common;

use common::{fails, ok};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::Rng;
use serde_json::Value;

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn json(p: &Path) -> Value {
    serde_json::from_slice(&read(p)).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Checks every file of a finished experiment folder and returns result.json.
fn check_outputs(dir: &Path, n_items: usize) -> Value {
    for f in [
        "config.json",
        "records.jsonl",
        "profiles.npy",
        "index.json",
        "result.json",
        "report.html",
        "run.log",
    ] {
        assert!(dir.join(f).is_file(), "{} has no {f}", dir.display());
    }
    let records = std::fs::read_to_string(dir.join("records.jsonl")).unwrap();
    assert_eq!(records.lines().count(), n_items);
    let first: Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    for key in ["id", "index", "label", "profile"] {
        assert!(first.get(key).is_some(), "record has no {key}");
    }
    let profile = &first["profile"];
    for key in ["prompt", "generated_ids", "generated_text", "positions"] {
        assert!(profile.get(key).is_some(), "profile has no {key}");
    }
    let prov = &profile["provenance"];
    for key in [
        "model",
        "model_sha256",
        "dtype",
        "device",
        "skipped_blocks",
        "alphas",
        "top_p",
        "chat_template",
        "seed",
        "temperature",
        "crate_version",
    ] {
        assert!(prov.get(key).is_some(), "provenance has no {key}");
    }
    assert_eq!(prov["model_sha256"].as_str().unwrap().len(), 64);
    let index = json(&dir.join("index.json"));
    assert_eq!(index["ids"].as_array().unwrap().len(), n_items);
    assert_eq!(index["labels"].as_array().unwrap().len(), n_items);
    let x = entropy_lens::data::read_features(&dir.join("profiles.npy")).unwrap();
    assert_eq!(x.nrows(), n_items);
    let shape: usize = index["layout"]["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .product();
    assert_eq!(x.ncols(), shape);
    assert_eq!(index["n_features"].as_u64().unwrap() as usize, shape);
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_eq!(report.matches("plotly.js v").count(), 1, "plotly.js once");
    assert!(report.contains("entropy-lens-chart"));
    let result = json(&dir.join("result.json"));
    let text = std::fs::read_to_string(dir.join("result.json")).unwrap();
    for banned in ["timestamp", "seconds", "elapsed"] {
        assert!(!text.contains(banned), "result.json has a {banned}");
    }
    result
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn every_experiment_runs_at_smoke_scale_on_both_offline_models() {
    let tmp = tempfile::tempdir().unwrap();
    for model in [common::smollm2(), common::gemma3()] {
        let name = model.file_stem().unwrap().to_string_lossy().into_owned();
        let l = if name.starts_with("gemma") { 18 } else { 30 };

        let dir = tmp.path().join(format!("validate-{name}"));
        ok(&[
            "experiment",
            "validate",
            "--model",
            s(&model),
            "--scale",
            "smoke",
            "--out",
            s(&dir),
        ]);
        let r = check_outputs(&dir, 12);
        for key in [
            "c1_spearman",
            "c1_per_prompt_mean",
            "c1_per_prompt_std",
            "c2_by_block",
            "c2_mean",
            "n_prompts",
            "n_positions",
        ] {
            assert!(r.get(key).is_some(), "validate result has no {key}");
        }
        let rho = num(&r, "c1_spearman");
        assert!(rho > 0.3 && rho <= 1.0, "{name}: C1 ρ = {rho}");
        assert_eq!(r["n_prompts"], 12);
        assert_eq!(r["n_positions"], 12 * 8);
        assert_eq!(r["c2_by_block"].as_array().unwrap().len(), l - 1);
        let c2 = num(&r, "c2_mean");
        assert!(c2 > 0.2 && c2 <= 1.0, "{name}: C2 = {c2}");

        let dir = tmp.path().join(format!("tasks-{name}"));
        ok(&[
            "experiment",
            "tasks",
            "--model",
            s(&model),
            "--out",
            s(&dir),
        ]);
        let r = check_outputs(&dir, 36);
        for key in [
            "auc_mean",
            "auc_std",
            "baseline_auc_mean",
            "p_value",
            "n_samples",
            "n_classes",
        ] {
            assert!(r.get(key).is_some(), "tasks result has no {key}");
        }
        assert_eq!(r["n_samples"], 36);
        assert_eq!(r["n_classes"], 3);
        for subset in ["first", "middle", "last", "first_middle_last", "all"] {
            let a = num(&r["layer_subsets"][subset], "auc_mean");
            assert!((0.0..=1.0).contains(&a), "{subset}: {a}");
        }
        assert_eq!(r["layer_subsets"]["all"]["k"], 11);
        let x = entropy_lens::data::read_features(&dir.join("profiles.npy")).unwrap();
        assert_eq!(x.ncols(), 8 * l, "8 tokens × {l} blocks, concatenated");

        let dir = tmp.path().join(format!("formats-{name}"));
        ok(&[
            "experiment",
            "formats",
            "--model",
            s(&model),
            "--out",
            s(&dir),
        ]);
        let r = check_outputs(&dir, 36);
        assert_eq!(r["n_samples"], 36);
        for a in ["0.5", "1", "5"] {
            let p = &r["per_alpha"][a];
            for key in ["auc_mean", "auc_std", "baseline_auc_mean"] {
                assert!(p.get(key).is_some(), "formats α = {a} has no {key}");
            }
        }
        let index = json(&dir.join("index.json"));
        assert_eq!(
            index["layout"]["axes"],
            serde_json::json!(["alpha", "window", "layer"])
        );
        assert_eq!(index["layout"]["shape"], serde_json::json!([3, 8, l]));
    }
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Runs `args` + `--out whole` uninterrupted, then `args` + `--out killed` killed twice with
/// SIGKILL at random points (plus a torn last line), resumed, and compares the folders.
fn kill_resume_compare(args: &[&str], tmp: &Path, total: usize) -> PathBuf {
    let with_out = |dir: &Path| -> Vec<String> {
        args.iter()
            .map(|x| x.to_string())
            .chain(["--out".to_string(), s(dir).to_string()])
            .collect()
    };
    let whole = tmp.join("whole");
    ok(&with_out(&whole)
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert_eq!(lines(&whole.join("records.jsonl")), total);

    let killed = tmp.join("killed");
    let mut rng = rand::rng();
    // Kill windows adapt to the machine's speed: a kill before the first record (model still
    // loading) widens them, a run that finished before its kill narrows them.
    let (mut min_ms, mut max_ms) = (300u64, 4000u64);
    let (mut kills, mut part_way) = (0, 0);
    for attempt in 0..20 {
        let delay = rng.random_range(min_ms..max_ms);
        let mut child = Command::new(common::cli())
            .args(with_out(&killed))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        // SIGKILL: no destructor, no flush, as a power loss would leave it.
        child.kill().unwrap();
        child.wait().unwrap();
        let done = lines(&killed.join("records.jsonl"));
        println!("attempt {attempt}: SIGKILL after {delay} ms, {done}/{total} records");
        if done == total {
            // Finished before the kill: start over, kill sooner.
            std::fs::remove_dir_all(&killed).unwrap();
            (kills, part_way) = (0, 0);
            max_ms = (max_ms * 2 / 3).max(min_ms + 200);
            continue;
        }
        kills += 1;
        if done == 0 {
            min_ms = min_ms.max(delay);
            max_ms = max_ms.max(min_ms + 2000);
        } else {
            part_way += 1;
        }
        if kills >= 2 && part_way >= 1 {
            break;
        }
    }
    assert!(
        kills >= 2 && part_way >= 1,
        "could not kill the run part-way"
    );
    // A torn last line, as a kill inside `write` would leave, is cut off and redone.
    let records = killed.join("records.jsonl");
    let mut bytes = read(&records);
    bytes.extend_from_slice(b"{\"index\":7,\"id\":\"topic002-scien");
    std::fs::write(&records, bytes).unwrap();
    ok(&with_out(&killed)
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert_eq!(
        read(&whole.join("result.json")),
        read(&killed.join("result.json")),
        "result.json differs after kill + resume"
    );
    assert_eq!(read(&whole.join("records.jsonl")), read(&records));
    assert_eq!(
        read(&whole.join("profiles.npy")),
        read(&killed.join("profiles.npy"))
    );
    let log = std::fs::read_to_string(killed.join("run.log")).unwrap();
    assert!(log.contains("torn"), "{log}");
    killed
}

#[test]
fn a_killed_run_resumes_to_a_byte_identical_result() {
    // In batches of 5 prompts: the torn line (item 7) sits inside a batch, which is rerun whole.
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    let killed = kill_resume_compare(
        &[
            "experiment",
            "validate",
            "--model",
            s(&model),
            "--n",
            "8",
            "--tokens",
            "6",
            "--batch",
            "5",
        ],
        tmp.path(),
        24,
    );
    // Other arguments into the same folder: refused, naming what differs.
    let err = fails(&[
        "experiment",
        "validate",
        "--model",
        s(&model),
        "--n",
        "8",
        "--tokens",
        "7",
        "--out",
        s(&killed),
    ]);
    assert!(
        err.contains("different configuration") && err.contains("tokens"),
        "{err}"
    );
    // The same arguments at another batch size: refused, since the records would differ by rounding.
    let err = fails(&[
        "experiment",
        "validate",
        "--model",
        s(&model),
        "--n",
        "8",
        "--tokens",
        "6",
        "--out",
        s(&killed),
    ]);
    assert!(err.contains("--batch 5"), "{err}");
    let err = fails(&[
        "experiment",
        "tasks",
        "--model",
        s(&model),
        "--out",
        s(&killed),
    ]);
    assert!(err.contains("different configuration"), "{err}");
}

#[test]
fn a_killed_sampled_authors_run_resumes_to_a_byte_identical_result() {
    // The authors' protocol samples at temperature 1 (seed + item index) and averages over tokens.
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    let killed = kill_resume_compare(
        &[
            "experiment",
            "tasks",
            "--model",
            s(&model),
            "--protocol",
            "authors",
            "--n",
            "4",
            "--tokens",
            "3",
            "--k",
            "3",
            "--folds",
            "2",
        ],
        tmp.path(),
        12,
    );
    let cfg = json(&killed.join("config.json"));
    assert_eq!(cfg["config"]["generation"]["temperature"], 1.0);
    assert_eq!(cfg["config"]["spec"]["aggregation"], "mean");
    let index = json(&killed.join("index.json"));
    assert_eq!(index["layout"]["axes"], serde_json::json!(["layer"]));
    let records = std::fs::read_to_string(killed.join("records.jsonl")).unwrap();
    let first: Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert!(first["profile"]["prompt"]
        .as_str()
        .unwrap()
        .ends_with("How can the story be continued?\n\n"));
    assert_eq!(first["profile"]["provenance"]["temperature"], 1.0);
    assert_eq!(first["profile"]["provenance"]["seed"], 42);
}

#[test]
fn shards_merge_to_the_unsharded_result_and_bad_merges_fail() {
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    let base = |out: &Path, shard: Option<&str>| {
        let mut a: Vec<String> = [
            "experiment",
            "formats",
            "--model",
            s(&model),
            "--n",
            "4",
            "--tokens",
            "8",
            "--k",
            "3",
            "--folds",
            "2",
            // Shards hold whole batches: 12 items in batches of 4 give each of 3 shards one.
            "--batch",
            "4",
            "--out",
            s(out),
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        if let Some(sh) = shard {
            a.push("--shard".into());
            a.push(sh.into());
        }
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let whole = tmp.path().join("whole");
    base(&whole, None);
    let shards: Vec<PathBuf> = (1..=3).map(|i| tmp.path().join(format!("s{i}"))).collect();
    for (i, d) in shards.iter().enumerate() {
        let out = base(d, Some(&format!("{}/3", i + 1)));
        assert!(out.contains("merge"), "{out}");
        assert_eq!(lines(&d.join("records.jsonl")), 4);
        assert!(!d.join("result.json").exists());
        let err = fails(&["finish", s(d)]);
        assert!(err.contains("shard"), "{err}");
    }
    let merged = tmp.path().join("merged");
    ok(&[
        "merge",
        s(&shards[0]),
        s(&shards[1]),
        s(&shards[2]),
        "--out",
        s(&merged),
    ]);
    for f in ["result.json", "records.jsonl", "profiles.npy", "index.json"] {
        assert_eq!(read(&whole.join(f)), read(&merged.join(f)), "{f} differs");
    }
    check_outputs(&merged, 12);

    let err = fails(&[
        "merge",
        s(&shards[0]),
        s(&shards[1]),
        "--out",
        s(&tmp.path().join("m2")),
    ]);
    assert!(
        err.contains("4 of 12 items are missing") && err.contains("shard 3/3"),
        "{err}"
    );
    let err = fails(&[
        "merge",
        s(&shards[0]),
        s(&shards[1]),
        s(&shards[2]),
        s(&whole),
        "--out",
        s(&tmp.path().join("m3")),
    ]);
    assert!(err.contains("overlap"), "{err}");
    // A shard of another configuration.
    let other = tmp.path().join("other");
    ok(&[
        "experiment",
        "formats",
        "--model",
        s(&model),
        "--n",
        "4",
        "--tokens",
        "8",
        "--k",
        "3",
        "--folds",
        "2",
        "--seed",
        "7",
        "--shard",
        "3/3",
        "--out",
        s(&other),
    ]);
    let err = fails(&[
        "merge",
        s(&shards[0]),
        s(&shards[1]),
        s(&other),
        "--out",
        s(&tmp.path().join("m4")),
    ]);
    assert!(
        err.contains("different configurations") && err.contains("seed"),
        "{err}"
    );
    // A shard whose item count was edited: an error, not a panic.
    let edited = tmp.path().join("edited");
    std::fs::create_dir_all(&edited).unwrap();
    for f in ["config.json", "records.jsonl"] {
        std::fs::copy(shards[2].join(f), edited.join(f)).unwrap();
    }
    let cfg = std::fs::read_to_string(edited.join("config.json")).unwrap();
    std::fs::write(
        edited.join("config.json"),
        cfg.replace("\"n_items\": 12", "\"n_items\": 13"),
    )
    .unwrap();
    let err = fails(&[
        "merge",
        s(&shards[0]),
        s(&shards[1]),
        s(&edited),
        "--out",
        s(&tmp.path().join("m5")),
    ]);
    assert!(err.contains("different prompt lists"), "{err}");
    // A shard folder resumed as another shard is refused.
    let err = fails(&[
        "experiment",
        "formats",
        "--model",
        s(&model),
        "--n",
        "4",
        "--tokens",
        "8",
        "--k",
        "3",
        "--folds",
        "2",
        "--shard",
        "2/3",
        "--out",
        s(&shards[0]),
    ]);
    assert!(err.contains("shard 1/3"), "{err}");
    for bad in ["0/3", "4/3", "two"] {
        let err = fails(&[
            "experiment",
            "validate",
            "--model",
            s(&model),
            "--shard",
            bad,
        ]);
        assert!(err.contains("i/n"), "{err}");
    }
}

#[test]
fn prompt_builders_on_the_real_tinystories_data() {
    use entropy_lens::data::tinystories::{load_stories, task_prompts, TaskType};
    let path = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("data/tinystories/valid.jsonl");
    let stories = load_stories(&path).unwrap();
    assert_eq!(stories.len(), 1000);
    let p = task_prompts(&stories, 100, 42).unwrap();
    assert_eq!(p.len(), 300);
    assert_eq!(
        p[0].prompt,
        format!("How can the story be continued?\n\n{}", stories[0])
    );
    assert!(p[0].prompt.starts_with(
        "How can the story be continued?\n\nSpot. Spot saw the shiny car and said, \"Wow, Kitty,"
    ));
    assert_eq!(p[4].task, TaskType::Syntactic);
    assert_eq!(
        p[4].prompt,
        format!("{}\n\nHow many words are in the story?", stories[1])
    );
    for task in TaskType::ALL {
        assert_eq!(p.iter().filter(|x| x.task == task).count(), 100);
    }
}

#[test]
fn bad_experiment_arguments_are_clear_errors() {
    let model = common::smollm2();
    let m = s(&model);
    for (args, want) in [
        (
            vec!["experiment", "mmmlu", "--model", m],
            "validate, tasks, formats, mmlu, skip, family or vit",
        ),
        (
            vec!["experiment", "mmlu", "--model", m, "--method", "guess"],
            "letters or generate",
        ),
        (
            vec!["experiment", "skip", "--model", m, "--protocol", "authors"],
            "no authors' protocol",
        ),
        (
            vec!["experiment", "skip", "--model", m, "--tokens", "4"],
            "drop --tokens",
        ),
        (
            vec!["experiment", "tasks", "--model", m, "--style", "humble"],
            "--style does not apply to the tasks experiment",
        ),
        (
            vec![
                "experiment",
                "mmlu",
                "--model",
                m,
                "--data",
                "/nonexistent/mmlu.jsonl",
            ],
            "not found",
        ),
        (
            vec!["experiment", "tasks", "--model", m, "--scale", "huge"],
            "smoke or paper",
        ),
        (
            vec!["experiment", "tasks", "--model", m, "--protocol", "mine"],
            "paper or authors",
        ),
        (
            vec!["experiment", "tasks", "--model", m, "--n", "0"],
            "at least one",
        ),
        (
            vec!["experiment", "tasks", "--model", m, "--n", "61"],
            "only 60",
        ),
        (
            vec!["experiment", "formats", "--model", m, "--n", "151"],
            "list has 150",
        ),
        (
            vec!["experiment", "formats", "--model", m, "--tokens", "4"],
            "windows",
        ),
        (
            vec!["experiment", "formats", "--model", m, "--alpha", "-1"],
            "≥ 0",
        ),
        (
            vec!["experiment", "validate", "--model", m, "--top-p", "1.5"],
            "(0, 1]",
        ),
        (
            vec!["experiment", "tasks", "--model", m, "--k", "40"],
            "lower --k",
        ),
        (
            vec!["experiment", "validate", "--model", "/nonexistent.gguf"],
            "not found",
        ),
        (
            vec![
                "experiment",
                "tasks",
                "--model",
                m,
                "--data",
                "/nonexistent.jsonl",
            ],
            "nonexistent",
        ),
        (
            vec!["finish", "/nonexistent-dir"],
            "not an experiment folder",
        ),
    ] {
        let err = fails(&args);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mmlu")
        .join(name)
}

fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("records.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn letter_probs(v: &Value) -> [f64; 4] {
    ["A", "B", "C", "D"].map(|l| num(v, l))
}

#[test]
fn mmlu_letter_probabilities_match_transformers_on_both_offline_models() {
    // tests/fixtures/mmlu/make_letter_probs.py: PyTorch + transformers on the same GGUF files, the
    // prompts written from Table 8 independently of the crate.
    let reference = json(&fixture("letter_probs.json"));
    let questions = fixture("letter_probs_questions.jsonl");
    let tmp = tempfile::tempdir().unwrap();
    for model in [common::smollm2(), common::gemma3()] {
        let name = model.file_stem().unwrap().to_string_lossy().into_owned();
        let gold = &reference["models"][&name];
        let dir = tmp.path().join(&name);
        ok(&[
            "experiment",
            "mmlu",
            "--model",
            s(&model),
            "--data",
            s(&questions),
            "--tokens",
            "2",
            "--k",
            "1",
            "--folds",
            "2",
            "--out",
            s(&dir),
        ]);
        let result = check_outputs(&dir, 12);
        assert_eq!(result["method"], "letters");
        assert_eq!(result["n_questions"], 4);
        assert_eq!(
            result["letter_ids"], gold["letter_ids"],
            "{name}: letter ids"
        );
        let recs = records(&dir);
        let mut correct: std::collections::BTreeMap<String, usize> = Default::default();
        for g in gold["prompts"].as_array().unwrap() {
            let r = recs
                .iter()
                .find(|r| r["prompt"] == g["prompt"])
                .unwrap_or_else(|| panic!("{name}: no record has the prompt {}", g["prompt"]));
            assert_eq!(r["style"], g["style"]);
            assert_eq!(r["correct"], g["correct"]);
            assert_eq!(
                r["id"],
                format!(
                    "{}-{}",
                    g["question"].as_str().unwrap(),
                    g["style"].as_str().unwrap()
                )
            );
            let (ours, theirs) = (
                letter_probs(&r["letter_probs"]),
                letter_probs(&g["letter_probs"]),
            );
            for (a, b) in ours.iter().zip(&theirs) {
                assert!(
                    (a - b).abs() < 1e-4 + 1e-3 * b,
                    "{name} {}: {ours:?} vs {theirs:?}",
                    r["id"]
                );
            }
            // The choice agrees unless the reference's top two are within the tolerance.
            let mut sorted = theirs;
            sorted.sort_by(|a, b| b.total_cmp(a));
            if sorted[0] - sorted[1] > 1e-3 {
                assert_eq!(r["chosen"], g["chosen"], "{name} {}", r["id"]);
            }
            assert_eq!(
                r["label"],
                if r["chosen"] == r["correct"] {
                    "correct"
                } else {
                    "wrong"
                }
            );
            *correct
                .entry(g["style"].as_str().unwrap().to_string())
                .or_default() += usize::from(r["chosen"] == r["correct"]);
        }
        for (style, n) in correct {
            assert_eq!(
                num(&result["accuracy_by_style"], &style),
                n as f64 / 4.0,
                "{name} {style}"
            );
            // 4 answers in 2 folds: the kNN runs only if both outcomes occur at least twice.
            let s = &result["by_style"][&style];
            assert_eq!(
                s["knn_skipped"].is_string(),
                !(2..=2).contains(&n),
                "{name} {style}: {s}"
            );
        }
    }
}

#[test]
fn mmlu_generate_method_reads_the_first_option_letter_and_flags_the_rest() {
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gen");
    ok(&[
        "experiment",
        "mmlu",
        "--model",
        s(&model),
        "--data",
        s(&fixture("letter_probs_questions.jsonl")),
        "--protocol",
        "authors",
        "--k",
        "1",
        "--folds",
        "2",
        "--out",
        s(&dir),
    ]);
    let result = json(&dir.join("result.json"));
    assert_eq!(result["method"], "generate");
    assert_eq!(result["tokens"], 8);
    let mut flagged = 0;
    for r in records(&dir) {
        let text = r["generated"].as_str().unwrap();
        assert_eq!(text, r["profile"]["generated_text"].as_str().unwrap());
        assert_eq!(r["profile"]["generated_ids"].as_array().unwrap().len(), 8);
        let first = text.char_indices().find(|&(i, c)| {
            let before = text[..i].chars().last();
            let after = text[i + c.len_utf8()..].chars().next();
            "ABCD".contains(c)
                && !before.is_some_and(char::is_alphanumeric)
                && !after.is_some_and(char::is_alphanumeric)
        });
        match first {
            Some((_, c)) => assert_eq!(r["chosen"], c.to_string(), "{text:?}"),
            None => {
                assert!(r["chosen"].is_null() && r["flagged"] == true, "{r}");
                assert_eq!(r["label"], "wrong");
                flagged += 1;
            }
        }
    }
    let total: u64 = ["base", "instruct", "humble"]
        .iter()
        .map(|s| result["by_style"][s]["flagged"].as_u64().unwrap())
        .sum();
    assert_eq!(total, flagged);
}

#[test]
fn skip_ranks_and_skips_blocks_as_transformers_does() {
    let reference = json(&fixture("letter_probs.json"));
    let tmp = tempfile::tempdir().unwrap();
    // The reference's question alone (its Base prompt).
    let one = tmp.path().join("one.jsonl");
    let first = std::fs::read_to_string(fixture("letter_probs_questions.jsonl")).unwrap();
    std::fs::write(&one, first.lines().next().unwrap()).unwrap();
    for model in [common::smollm2(), common::gemma3()] {
        let name = model.file_stem().unwrap().to_string_lossy().into_owned();
        let gold = &reference["models"][&name]["skip"];
        let l = if name.starts_with("gemma") { 18 } else { 30 };
        let dir = tmp.path().join(&name);
        ok(&[
            "experiment",
            "skip",
            "--model",
            s(&model),
            "--data",
            s(&one),
            "--out",
            s(&dir),
        ]);
        let result = check_outputs(&dir, 1);
        let rounded: Vec<usize> = [0.1, 0.2, 0.3, 0.4, 0.5]
            .iter()
            .map(|f: &f64| ((f * l as f64).round() as usize).max(1))
            .collect();
        assert_eq!(result["blocks_skipped"], serde_json::json!(rounded));
        for c in ["expansion", "pruning", "random"] {
            assert_eq!(result["curves"][c].as_array().unwrap().len(), 5);
        }
        let r = &records(&dir)[0];
        assert_eq!(r["prompt"], gold["prompt"]);
        // Layer 0..L entropies at the answer position.
        let p = &r["profile"]["positions"][0];
        let mut h = vec![num(&p["embed"], "shannon")];
        h.extend(common::f64s(&p["shannon"]));
        let want = common::f64s(&gold["entropy"]);
        assert_eq!(h.len(), l + 1);
        for (b, (a, w)) in h.iter().zip(&want).enumerate() {
            assert!((a - w).abs() < 2e-3, "{name} layer {b}: {a} vs {w}");
        }
        let trials = r["trials"].as_array().unwrap();
        assert_eq!(trials.len(), 15);
        for (k, strategy) in ["expansion", "pruning"].iter().enumerate() {
            let t = &trials[k];
            assert_eq!(t["strategy"], *strategy);
            assert_eq!(t["fraction"], 0.1);
            assert_eq!(t["skipped"], gold[strategy]["blocks"], "{name} {strategy}");
            let (ours, theirs) = (
                letter_probs(&t["letter_probs"]),
                letter_probs(&gold[strategy]["letter_probs"]),
            );
            for (a, b) in ours.iter().zip(&theirs) {
                assert!(
                    (a - b).abs() < 1e-4 + 2e-3 * b,
                    "{name} {strategy}: {ours:?} vs {theirs:?}"
                );
            }
        }
        for t in trials {
            let n = t["skipped"].as_array().unwrap().len();
            let f = t["fraction"].as_f64().unwrap();
            assert_eq!(n, ((f * l as f64).round() as usize).max(1));
            assert!(t["skipped"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| (1..=l as u64).contains(&b.as_u64().unwrap())));
        }
        assert_eq!(json(&dir.join("index.json"))["layout"]["first_layer"], 0);
    }
}

#[test]
fn mmlu_and_skip_batched_answer_as_one_at_a_time() {
    // Questions of different lengths in one left-padded batch: the same answers, trials and
    // skipped blocks as each question alone, letter probabilities within rounding.
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    for (experiment, extra, n_items) in [
        (
            "mmlu",
            &["--n", "2", "--tokens", "2", "--k", "1", "--folds", "2"][..],
            6,
        ),
        ("skip", &["--n", "3"][..], 3),
    ] {
        let run = |batch: &str| {
            let dir = tmp.path().join(format!("{experiment}-{batch}"));
            let mut args = vec!["experiment", experiment, "--model", s(&model)];
            args.extend(extra);
            args.extend(["--batch", batch, "--out", s(&dir)]);
            ok(&args);
            check_outputs(&dir, n_items);
            records(&dir)
        };
        let (alone, batched) = (run("1"), run(&n_items.to_string()));
        let lengths: std::collections::BTreeSet<usize> = alone
            .iter()
            .map(|r| r["profile"]["prompt_ids"].as_array().unwrap().len())
            .collect();
        assert!(
            lengths.len() > 1,
            "{experiment}: prompts of one length {lengths:?}"
        );
        for (a, b) in alone.iter().zip(&batched) {
            let id = &a["id"];
            assert_eq!(a["id"], b["id"]);
            assert_eq!(a["chosen"], b["chosen"], "{experiment} {id}");
            assert_eq!(
                a["profile"]["generated_ids"], b["profile"]["generated_ids"],
                "{experiment} {id}"
            );
            let close = |x: &Value, y: &Value, what: &str| {
                for (p, q) in letter_probs(x).iter().zip(letter_probs(y)) {
                    assert!((p - q).abs() < 1e-5, "{experiment} {id} {what}: {p} vs {q}");
                }
            };
            close(&a["letter_probs"], &b["letter_probs"], "unskipped");
            let trials = |r: &Value| r["trials"].as_array().cloned().unwrap_or_default();
            let (ta, tb) = (trials(a), trials(b));
            assert_eq!(ta.len(), tb.len());
            assert_eq!(ta.len(), if experiment == "skip" { 15 } else { 0 });
            for (x, y) in ta.iter().zip(&tb) {
                assert_eq!(x["skipped"], y["skipped"], "{experiment} {id}");
                assert_eq!(x["chosen"], y["chosen"], "{experiment} {id}");
                close(&x["letter_probs"], &y["letter_probs"], "trial");
            }
        }
    }
}

#[test]
fn a_killed_mmlu_run_resumes_to_a_byte_identical_result() {
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    kill_resume_compare(
        &[
            "experiment",
            "mmlu",
            "--model",
            s(&model),
            "--n",
            "6",
            "--tokens",
            "3",
            "--k",
            "1",
            "--folds",
            "2",
        ],
        tmp.path(),
        18,
    );
}

/// Runs `args` whole and as three shards, merges them, and compares every file.
fn shards_merge_to_the_whole(args: &[&str], tmp: &Path, total: usize) {
    let run = |out: &Path, shard: Option<&str>| {
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["--out", s(out)]);
        if let Some(sh) = shard {
            a.extend(["--shard", sh]);
        }
        ok(&a)
    };
    let whole = tmp.join("whole");
    run(&whole, None);
    let shards: Vec<PathBuf> = (1..=3).map(|i| tmp.join(format!("s{i}"))).collect();
    for (i, d) in shards.iter().enumerate() {
        run(d, Some(&format!("{}/3", i + 1)));
        assert!(!d.join("result.json").exists());
    }
    let merged = tmp.join("merged");
    ok(&[
        "merge",
        s(&shards[0]),
        s(&shards[1]),
        s(&shards[2]),
        "--out",
        s(&merged),
    ]);
    for f in ["result.json", "records.jsonl", "profiles.npy", "index.json"] {
        assert_eq!(read(&whole.join(f)), read(&merged.join(f)), "{f} differs");
    }
    check_outputs(&merged, total);
}

#[test]
fn skip_and_mmlu_shards_merge_to_the_unsharded_result() {
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    let skip = tmp.path().join("skip");
    std::fs::create_dir_all(&skip).unwrap();
    shards_merge_to_the_whole(
        &["experiment", "skip", "--model", s(&model), "--n", "3"],
        &skip,
        3,
    );
    let mmlu = tmp.path().join("mmlu");
    std::fs::create_dir_all(&mmlu).unwrap();
    shards_merge_to_the_whole(
        &[
            "experiment",
            "mmlu",
            "--model",
            s(&model),
            "--n",
            "4",
            "--tokens",
            "2",
            "--k",
            "1",
            "--folds",
            "2",
        ],
        &mmlu,
        12,
    );
}

#[test]
fn family_profiles_interpolate_onto_one_depth_axis_and_classify_families() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("family");
    ok(&[
        "experiment",
        "family",
        "--n",
        "4",
        "--tokens",
        "3",
        "--out",
        s(&dir),
    ]);
    let result = check_outputs(&dir, 8);
    let models = result["models"].as_array().unwrap();
    assert_eq!(models.len(), 2);
    assert_eq!(models[0]["family"], "llama");
    assert_eq!(models[0]["n_layers"], 30);
    assert_eq!(models[1]["family"], "gemma");
    assert_eq!(models[1]["n_layers"], 18);
    assert!((0.0..=1.0).contains(&num(&result, "f1_family_mean")));
    // Both offline models are below 1B: one size bin, no size F1, and the result says why.
    assert!(result["f1_size_mean"].is_null());
    assert!(result["notes"].to_string().contains("only one size bin"));
    let index = json(&dir.join("index.json"));
    assert_eq!(
        index["layout"]["axes"],
        serde_json::json!(["relative_depth"])
    );
    assert_eq!(index["layout"]["shape"], serde_json::json!([32]));
    // Each row: the token-averaged profile, linearly interpolated onto 32 points of [0, 1].
    let x = entropy_lens::data::read_features(&dir.join("profiles.npy")).unwrap();
    for (i, r) in records(&dir).iter().enumerate() {
        let bos = if i < 4 { 1 } else { 2 };
        assert_eq!(
            r["profile"]["prompt_ids"],
            serde_json::json!([bos]),
            "BOS alone"
        );
        assert_eq!(r["label"], if i < 4 { "llama" } else { "gemma" });
        assert_eq!(r["profile"]["provenance"]["temperature"], 0.7);
        let pos = r["profile"]["positions"].as_array().unwrap();
        assert_eq!(pos.len(), 3);
        let l = pos[0]["shannon"].as_array().unwrap().len();
        let mean: Vec<f64> = (0..l)
            .map(|j| {
                pos.iter()
                    .map(|p| common::f64s(&p["shannon"])[j])
                    .sum::<f64>()
                    / 3.0
            })
            .collect();
        for k in 0..32 {
            let t = k as f64 / 31.0 * (l - 1) as f64;
            let j = (t.floor() as usize).min(l - 2);
            let want = mean[j] + (mean[j + 1] - mean[j]) * (t - j as f64);
            assert!((x[[i, k]] - want).abs() < 1e-9, "row {i} point {k}");
        }
    }
}

#[test]
fn family_under_the_authors_protocol_starts_from_two_bos_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("authors");
    let smol = common::smollm2();
    ok(&[
        "experiment",
        "family",
        "--models",
        s(&smol),
        "--protocol",
        "authors",
        "--n",
        "2",
        "--tokens",
        "2",
        "--out",
        s(&dir),
    ]);
    let result = json(&dir.join("result.json"));
    assert!(result["f1_family_mean"].is_null());
    assert!(result["notes"].to_string().contains("only one family"));
    for r in records(&dir) {
        assert_eq!(r["profile"]["prompt_ids"], serde_json::json!([1, 1]));
    }
    let err = fails(&["experiment", "family", "--model", s(&smol)]);
    assert!(err.contains("--models"), "{err}");
    let err = fails(&[
        "experiment",
        "family",
        "--models",
        &format!("{},{}", s(&smol), s(&smol)),
    ]);
    assert!(err.contains("twice"), "{err}");
}

#[test]
fn a_killed_family_run_resumes_and_its_shards_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let killed = tmp.path().join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    kill_resume_compare(
        &["experiment", "family", "--n", "4", "--tokens", "3"],
        &killed,
        8,
    );
    let sharded = tmp.path().join("sharded");
    std::fs::create_dir_all(&sharded).unwrap();
    shards_merge_to_the_whole(
        &["experiment", "family", "--n", "2", "--tokens", "2"],
        &sharded,
        4,
    );
}

fn vision_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vision")
}

#[test]
fn vit_profiles_images_onto_one_depth_axis_and_resumes_byte_identically() {
    let tmp = tempfile::tempdir().unwrap();
    // Smoke scale: the two tiny fixtures on 24 synthetic images, in batches of 5.
    let whole = tmp.path().join("whole");
    let args = ["experiment", "vit", "--scale", "smoke", "--batch", "5"];
    let mut a = args.to_vec();
    a.extend(["--out", s(&whole)]);
    ok(&a);
    let result = check_outputs(&whole, 48);
    assert_eq!(result["experiment"], "vit");
    let models = result["models"].as_array().unwrap();
    assert_eq!(models.len(), 2);
    assert_eq!(
        (models[0]["family"].as_str(), models[0]["n_layers"].as_u64()),
        (Some("vit"), Some(4))
    );
    assert_eq!(
        (models[1]["family"].as_str(), models[1]["n_layers"].as_u64()),
        (Some("deit"), Some(3))
    );
    for b in result["depth_profiles"].as_array().unwrap() {
        assert_eq!(b["mean"].as_array().unwrap().len(), 32);
        assert_eq!(b["n"], 24);
    }
    assert!((0.0..=1.0).contains(&num(&result, "f1_model_mean")));
    // The mean profile on the model's own blocks is the mean of the records' profiles.
    let recs = records(&whole);
    let vit_first: Vec<f64> = recs
        .iter()
        .filter(|r| r["profile"]["model"] == "vit")
        .map(|r| r["profile"]["positions"][0]["shannon"][0].as_f64().unwrap())
        .collect();
    let mean = vit_first.iter().sum::<f64>() / vit_first.len() as f64;
    assert!((mean - num(&models[0], "first_block_entropy")).abs() < 1e-12);
    // A run stopped in the middle of a batch resumes to the same bytes.
    let resumed = tmp.path().join("resumed");
    std::fs::create_dir(&resumed).unwrap();
    for f in ["config.json", "run.log"] {
        std::fs::copy(whole.join(f), resumed.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(whole.join("records.jsonl")).unwrap();
    let partial: String = text.lines().take(13).map(|l| format!("{l}\n")).collect();
    std::fs::write(resumed.join("records.jsonl"), partial).unwrap();
    let mut a = args.to_vec();
    a.extend(["--out", s(&resumed)]);
    ok(&a);
    for f in ["result.json", "records.jsonl", "profiles.npy", "index.json"] {
        assert_eq!(read(&whole.join(f)), read(&resumed.join(f)), "{f} differs");
    }
    // Shards merge to the whole.
    shards_merge_to_the_whole(
        &["experiment", "vit", "--scale", "smoke", "--batch", "5"],
        &tmp.path().join("shards"),
        48,
    );
}

#[test]
fn vit_reads_class_folders_and_list_files_and_refuses_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let images = vision_fixtures().join("images");
    // ImageNet's layout: DIR/<class>/<image>.
    let set = tmp.path().join("set");
    for (class, files) in [
        ("birds", ["noise.png", "shapes.png"]),
        ("cars", ["grey.png", "large.png"]),
        ("dogs", ["gradient_rgba.png", "noise.png"]),
    ] {
        std::fs::create_dir_all(set.join(class)).unwrap();
        for f in files {
            std::fs::copy(images.join(f), set.join(class).join(f)).unwrap();
        }
    }
    let out = tmp.path().join("folders");
    ok(&[
        "experiment",
        "vit",
        "--data",
        s(&set),
        "--classes",
        "2",
        "--n",
        "1",
        "--k",
        "1",
        "--out",
        s(&out),
    ]);
    let recs = records(&out);
    let ids: Vec<&str> = recs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "vit/birds/noise.png",
            "vit/cars/grey.png",
            "deit/birds/noise.png",
            "deit/cars/grey.png"
        ]
    );
    // The same images through a list file give the same profiles.
    let list = set.join("list.txt");
    std::fs::write(
        &list,
        "# path label\nbirds/noise.png\tbirds\ncars/grey.png cars\n",
    )
    .unwrap();
    let out2 = tmp.path().join("list");
    ok(&[
        "experiment",
        "vit",
        "--data",
        s(&list),
        "--k",
        "1",
        "--out",
        s(&out2),
    ]);
    let recs2 = records(&out2);
    assert_eq!(recs.len(), recs2.len());
    for (a, b) in recs.iter().zip(&recs2) {
        assert_eq!(a["id"], b["id"]);
        assert_eq!(a["profile"]["positions"], b["profile"]["positions"]);
    }
    // Refusals: a truncated image, a folder of images without class folders, paper scale
    // without images, a single --model.
    let bad = tmp.path().join("bad");
    std::fs::create_dir_all(bad.join("x")).unwrap();
    std::fs::write(
        bad.join("x/broken.png"),
        &read(&images.join("large.png"))[..500],
    )
    .unwrap();
    let e = fails(&[
        "experiment",
        "vit",
        "--data",
        s(&bad),
        "--out",
        s(&tmp.path().join("o1")),
    ]);
    assert!(
        e.contains("cannot read image") && e.contains("broken.png"),
        "{e}"
    );
    let e = fails(&[
        "experiment",
        "vit",
        "--data",
        s(&images),
        "--out",
        s(&tmp.path().join("o2")),
    ]);
    assert!(e.contains("no class folders"), "{e}");
    let e = fails(&[
        "experiment",
        "vit",
        "--scale",
        "paper",
        "--out",
        s(&tmp.path().join("o3")),
    ]);
    assert!(e.contains("ImageNet"), "{e}");
    let vit = vision_fixtures().join("vit");
    let e = fails(&[
        "experiment",
        "vit",
        "--model",
        s(&vit),
        "--out",
        s(&tmp.path().join("o4")),
    ]);
    assert!(e.contains("--models"), "{e}");
    let e = fails(&[
        "experiment",
        "vit",
        "--classes",
        "3",
        "--out",
        s(&tmp.path().join("o5")),
    ]);
    assert!(e.contains("--classes picks classes from --data"), "{e}");
    for (args, want) in [
        (vec!["--k", "0"], "at least 1"),
        (
            vec!["--n", "4", "--k", "5"],
            "k = 5 neighbours need at least 10 profiles",
        ),
        (vec!["--folds", "5"], "drop --folds"),
        (vec!["--models", "a,"], "empty name"),
    ] {
        let out = tmp.path().join("o8");
        let mut a = vec!["experiment", "vit", "--out", s(&out)];
        a.extend(args);
        let e = fails(&a);
        assert!(e.contains(want), "{want}: {e}");
    }
    let e = fails(&[
        "experiment",
        "vit",
        "--models",
        &format!("{},{}", s(&vit), s(&images)),
        "--out",
        s(&tmp.path().join("o6")),
    ]);
    assert!(e.contains("without config.json"), "{e}");
    let gpt2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/families/gpt2");
    let e = fails(&[
        "experiment",
        "vit",
        "--models",
        &format!("{},{}", s(&vit), s(&gpt2)),
        "--out",
        s(&tmp.path().join("o6b")),
    ]);
    assert!(e.contains("as an image classifier"), "{e}");
    let listed = tmp.path().join("missing.txt");
    std::fs::write(&listed, "birds/none.png\tbirds\n").unwrap();
    let e = fails(&[
        "experiment",
        "vit",
        "--data",
        s(&listed),
        "--out",
        s(&tmp.path().join("o7")),
    ]);
    assert!(
        e.contains("none.png") && !e.contains("none.png\tbirds") && e.contains("line 1"),
        "{e}"
    );
    // facebook/deit-*-patch16-224 are stored as ViT (`model_type` vit): the name says DeiT.
    let deit_as_vit = tmp.path().join("deit-small-as-vit");
    std::fs::create_dir(&deit_as_vit).unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
    ] {
        std::fs::copy(vit.join(f), deit_as_vit.join(f)).unwrap();
    }
    let out3 = tmp.path().join("families");
    ok(&[
        "experiment",
        "vit",
        "--models",
        &format!("{},{}", s(&vit), s(&deit_as_vit)),
        "--n",
        "12",
        "--out",
        s(&out3),
    ]);
    let result = json(&out3.join("result.json"));
    let families: Vec<&str> = result["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["family"].as_str().unwrap())
        .collect();
    assert_eq!(families, ["vit", "deit"]);
    assert_eq!(result["images_per_model"], 12);
    // Same weights, same profiles: the two "families" cannot be told apart.
    let first = |i: usize| num(&result["models"][i], "first_block_entropy");
    assert_eq!(first(0), first(1));
}

/// A random (non-zero) tuned lens for the offline SmolLM2, saved in the package's format.
fn random_smollm2_lens(dir: &Path) -> PathBuf {
    use entropy_lens::candle_core::{Device, Tensor};
    use entropy_lens::lens::TunedLens;
    let mut lens = TunedLens::zeros("SmolLM2-135M-Instruct.Q4_1", 576, 30).unwrap();
    for t in &mut lens.translators {
        t.weight = Tensor::randn(0f32, 0.02, (576, 576), &Device::Cpu).unwrap();
        t.bias = Some(Tensor::randn(0f32, 0.05, 576, &Device::Cpu).unwrap());
    }
    let out = dir.join("lens");
    lens.save(&out).unwrap();
    out
}

/// `--lens tuned:DIR` on an experiment: it runs, resumes after SIGKILL to the same bytes, records
/// the lens (by its parameters' sha256) in the configuration, so that a resume with another lens
/// is refused; several-model experiments refuse a tuned lens.
#[test]
fn a_killed_tuned_lens_run_resumes_to_a_byte_identical_result() {
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    let lens = random_smollm2_lens(tmp.path());
    let lens_arg = format!("tuned:{}", s(&lens));
    let base = [
        "experiment",
        "validate",
        "--model",
        s(&model),
        "--n",
        "8",
        "--tokens",
        "6",
        "--batch",
        "5",
    ];
    let mut args: Vec<&str> = base.to_vec();
    args.extend(["--lens", &lens_arg]);
    let runs = tmp.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let killed = kill_resume_compare(&args, &runs, 24);
    let cfg = json(&killed.join("config.json"));
    let sha = cfg["config"]["lens"]["sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64);
    assert!(cfg["config"]["lens"].get("source").is_none(), "{cfg}");
    assert_eq!(
        cfg["run"]["lens"].as_str().unwrap(),
        lens.display().to_string()
    );
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(killed.join("records.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["profile"]["provenance"]["lens"]["sha256"], sha);
    // The logit lens into the same folder: refused, naming the lens.
    let mut logit: Vec<&str> = base.to_vec();
    logit.extend(["--out", s(&killed)]);
    let err = fails(&logit);
    assert!(
        err.contains("different configuration") && err.contains("lens"),
        "{err}"
    );
    // The same experiment with the logit lens measures other entropies.
    let plain = tmp.path().join("plain");
    logit.truncate(base.len());
    logit.extend(["--out", s(&plain)]);
    ok(&logit);
    let h = |dir: &Path| -> Value {
        let line = std::fs::read_to_string(dir.join("records.jsonl")).unwrap();
        serde_json::from_str::<Value>(line.lines().next().unwrap()).unwrap()["profile"]["positions"]
            [0]["shannon"][3]
            .clone()
    };
    assert_ne!(h(&killed), h(&plain));
    // Several models, one lens: refused before anything runs.
    let err = fails(&["experiment", "family", "--lens", &lens_arg]);
    assert!(err.contains("trained for one model"), "{err}");
}

/// `tasks` and `formats` with a tuned lens, at a small size.
#[test]
fn tasks_and_formats_run_with_a_tuned_lens() {
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    let lens = random_smollm2_lens(tmp.path());
    let lens_arg = format!("tuned:{}", s(&lens));
    for (kind, n) in [("tasks", 6usize), ("formats", 6)] {
        let out = tmp.path().join(kind);
        ok(&[
            "experiment",
            kind,
            "--model",
            s(&model),
            "--n",
            &n.to_string(),
            "--tokens",
            "8",
            "--folds",
            "3",
            "--k",
            "3",
            "--lens",
            &lens_arg,
            "--out",
            s(&out),
        ]);
        let cfg = json(&out.join("config.json"));
        assert!(cfg["config"]["lens"]["sha256"].is_string(), "{kind}: {cfg}");
        assert!(out.join("result.json").is_file());
    }
}

/// `--kl` on an experiment: every profiled token records KL(final ‖ block), and result.json holds
/// the lens's fit on those tokens, equal to the per-prompt means computed here from the records;
/// the configuration records it (a resume without it is refused); experiments that do not
/// profile generations refuse it.
#[test]
fn kl_runs_record_the_lens_fit_on_their_own_tokens() {
    let model = common::smollm2();
    let tmp = tempfile::tempdir().unwrap();
    let lens = random_smollm2_lens(tmp.path());
    let lens_arg = format!("tuned:{}", s(&lens));
    for (name, extra) in [("logit", vec![]), ("tuned", vec!["--lens", &lens_arg])] {
        let dir = tmp.path().join(name);
        let mut args = vec![
            "experiment",
            "validate",
            "--model",
            s(&model),
            "--n",
            "5",
            "--tokens",
            "4",
            "--kl",
            "--out",
            s(&dir),
        ];
        args.extend(extra.iter().copied());
        ok(&args);
        let fit = &json(&dir.join("result.json"))["lens_fit"];
        let recs = records(&dir);
        assert_eq!(fit["n_prompts"], recs.len());
        // Per prompt: token means of KL and entropy per block, then the mean over prompts.
        let l = 30;
        let (mut kl, mut gap) = (vec![0.0; l], vec![0.0; l]);
        let mut tokens = 0;
        for r in &recs {
            let pos = r["profile"]["positions"].as_array().unwrap();
            tokens += pos.len();
            let m = pos.len() as f64;
            let at = |p: &Value, key: &str, j: usize| p[key][j].as_f64().unwrap();
            let fin: f64 = pos.iter().map(|p| at(p, "shannon", l - 1)).sum::<f64>() / m;
            for j in 0..l {
                let k: f64 = pos.iter().map(|p| at(p, "kl_to_final", j)).sum::<f64>() / m;
                let h: f64 = pos.iter().map(|p| at(p, "shannon", j)).sum::<f64>() / m;
                kl[j] += k / recs.len() as f64;
                gap[j] += (h - fin - k) / recs.len() as f64;
            }
        }
        assert_eq!(fit["n_tokens"], tokens);
        for j in 0..l {
            let got = |key: &str| fit[key][j].as_f64().unwrap();
            assert!((got("mean_kl") - kl[j]).abs() < 1e-9, "{name} block {j}");
            assert!(
                (got("calibration_gap") - gap[j]).abs() < 1e-9,
                "{name} block {j}"
            );
            assert!(fit["kl_ci95"][j].as_f64().unwrap() >= 0.0);
        }
        // The last block reads the model's own distribution; early blocks are far from it.
        assert!(kl[l - 1].abs() < 1e-6, "{name}: {kl:?}");
        assert!(kl[0] > 1.0, "{name}: {kl:?}");
        let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(
            report.contains("Lens fit on the run"),
            "{name}: no lens-fit chart"
        );
        // The same folder without --kl: another configuration, refused.
        let plain: Vec<&str> = args.iter().copied().filter(|a| *a != "--kl").collect();
        let err = fails(&plain);
        assert!(err.contains("different configuration"), "{err}");
    }
    let err = fails(&["experiment", "mmlu", "--model", s(&model), "--kl"]);
    assert!(
        err.contains("--kl does not apply to the mmlu experiment"),
        "{err}"
    );
}
