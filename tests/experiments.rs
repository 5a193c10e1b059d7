//! The experiment framework end to end, through the CLI: every experiment on both offline models at
//! smoke scale, SIGKILL at a random point then resume (byte-identical result), shards then merge
//! (byte-identical), refusals (other arguments, overlapping or incomplete shards), and the prompt
//! builders on the real TinyStories data.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rand::Rng;
use serde_json::Value;

fn el(args: &[&str]) -> Output {
    Command::new(common::cli())
        .args(args)
        .output()
        .expect("running entropy-lens")
}

fn ok(args: &[&str]) -> String {
    let out = el(args);
    assert!(
        out.status.success(),
        "entropy-lens {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails(args: &[&str]) -> String {
    let out = el(args);
    assert_eq!(out.status.code(), Some(1), "expected exit 1 for {args:?}");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

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
        .join("../shared/data/tinystories/valid.jsonl");
    if !path.exists() {
        eprintln!("skipped: {} not found", path.display());
        return;
    }
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
            vec!["experiment", "mmlu", "--model", m],
            "validate, tasks or formats",
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
