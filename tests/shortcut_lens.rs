//! The linear-shortcut lens: its closed-form fit against NumPy's `lstsq` (an SVD solver, not the
//! normal equations; `tests/fixtures/shortcut/`), with and without a ridge, streamed in chunks;
//! a singular fit refused with a clear error; on the offline SmolLM2 at a CI-sized budget, held-out
//! KL to the final distribution below the logit lens's at every block; KL training warm-started
//! from it starting lower than from zero; and the CLI's flags.

mod common;

use std::path::PathBuf;

use candle_core::{Device, Tensor};
use entropy_lens::lens::shortcut::{train_shortcut, NormalEquations, ShortcutOptions};
use entropy_lens::lens::trainer::{read_text, train_lens, Init, Method, TrainOptions, TrainState};
use entropy_lens::lens::TunedLens;
use entropy_lens::model::{load, LoadOptions, ModelSource};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
}

fn matrix(v: &Value) -> Vec<Vec<f64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect()
}

fn reference() -> Value {
    let path = root().join("tests/fixtures/shortcut/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fixture's rows fed in three uneven chunks (the fit streams).
fn equations(reference: &Value) -> NormalEquations {
    let (x, y) = (matrix(&reference["x"]), matrix(&reference["y"]));
    let d = x[0].len();
    let mut eq = NormalEquations::new(d, d).unwrap();
    for (start, end) in [(0, 7), (7, 150), (150, x.len())] {
        let rows = |m: &[Vec<f64>]| {
            let flat: Vec<f64> = m[start..end].iter().flatten().copied().collect();
            Tensor::from_vec(flat, (end - start, d), &Device::Cpu).unwrap()
        };
        eq.add(&rows(&x), &rows(&y)).unwrap();
    }
    assert_eq!(eq.rows(), x.len());
    eq
}

fn assert_fit(eq: &NormalEquations, ridge: f64, expected: &Value) {
    let fit = eq.solve(ridge).unwrap();
    let m = matrix(&expected["m"]);
    let c: Vec<f64> = expected["c"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let mut worst = 0f64;
    for (i, row) in m.iter().enumerate() {
        for (j, want) in row.iter().enumerate() {
            worst = worst.max((fit.m[i * fit.d_out + j] - want).abs());
        }
    }
    for (got, want) in fit.c.iter().zip(&c) {
        // The intercept sits under an offset of ~40 per column: compare relative to it.
        worst = worst.max((got - want).abs() / want.abs().max(1.0) / 40.0);
    }
    assert!(worst < 1e-9, "ridge {ridge}: off NumPy's lstsq by {worst}");
}

#[test]
fn the_closed_form_fit_equals_numpy_lstsq() {
    let reference = reference();
    let eq = equations(&reference);
    assert_fit(&eq, 0.0, &reference["ols"]);
    let ridge = reference["ridge"]["ridge"].as_f64().unwrap();
    assert_fit(&eq, ridge, &reference["ridge"]);
}

#[test]
fn a_singular_fit_is_refused_and_a_ridge_rescues_it() {
    // Two identical columns: the covariance has rank 1.
    let x = Tensor::new(
        &[[1f64, 1.0], [2.0, 2.0], [4.0, 4.0], [3.0, 3.0]],
        &Device::Cpu,
    )
    .unwrap();
    let mut eq = NormalEquations::new(2, 2).unwrap();
    eq.add(&x, &x).unwrap();
    let err = eq.solve(0.0).unwrap_err().to_string();
    assert!(err.contains("singular") && err.contains("--ridge"), "{err}");
    let fit = eq.solve(1e-6).unwrap();
    // The fit then splits the weight between the twin columns and still reproduces y = x.
    let predicted = 2.0 * (fit.m[0] + fit.m[2]) + fit.c[0];
    assert!((predicted - 2.0).abs() < 1e-5, "{predicted}");
}

fn smollm2_text() -> String {
    let text = read_text(&root().join("data/tinystories/valid.jsonl")).unwrap();
    text.chars().take(40_000).collect()
}

/// 64 windows of 64 tokens fitted in closed form (seconds): the held-out KL falls below the logit
/// lens's at every block with a translator, by far more than KL training's CI budget manages.
#[test]
fn the_shortcut_lens_beats_the_logit_lens_at_every_block_of_smollm2() {
    let loaded = load(&ModelSource::Gguf(common::smollm2()), &LoadOptions::cpu()).unwrap();
    let (mut model, tokenizer) = (loaded.model, loaded.tokenizer);
    let opts = ShortcutOptions {
        tokens: 4096,
        seq_len: 64,
        holdout_tokens: 512,
        ..Default::default()
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("shortcut");
    let mut seen = Vec::new();
    let report = train_shortcut(
        &mut model,
        &tokenizer,
        &smollm2_text(),
        &opts,
        &out,
        &mut |p| seen.push(p.windows),
        None,
    )
    .unwrap();
    assert_eq!(seen.last(), Some(&64));
    println!("{}", report.table());
    assert_eq!(report.method, Some(Method::Shortcut));
    assert_eq!(report.kl_logit.len(), 30);
    for (i, (logit, shortcut)) in report.kl_logit.iter().zip(&report.kl_tuned).enumerate() {
        assert!(
            shortcut < logit,
            "layer {i}: shortcut {shortcut} ≥ logit {logit}"
        );
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(mean(&report.kl_tuned) < 0.25 * mean(&report.kl_logit));
    let lens = TunedLens::from_folder(&out).unwrap();
    assert_eq!(lens.translators.len(), 30);
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("train_report.json")).unwrap())
            .unwrap();
    assert_eq!(saved["method"], "shortcut");
}

/// KL training from the shortcut lens starts where the shortcut is (its first step's loss, on the
/// same batch, is below the zero start's at every layer) and says so in its report.
#[test]
fn kl_training_warm_started_from_the_shortcut_starts_lower() {
    let loaded = load(&ModelSource::Gguf(common::smollm2()), &LoadOptions::cpu()).unwrap();
    let (mut model, tokenizer) = (loaded.model, loaded.tokenizer);
    let text = smollm2_text();
    let tmp = tempfile::tempdir().unwrap();
    let first_losses = |init: Init, model: &mut entropy_lens::model::Model| {
        let name = match &init {
            Init::Lens(_) => "lens".to_string(),
            other => format!("{other:?}"),
        };
        let opts = TrainOptions {
            tokens: 512,
            step_tokens: 256,
            seq_len: 64,
            holdout_tokens: 128,
            init,
            ..Default::default()
        };
        let out = tmp.path().join(name);
        let report = train_lens(model, &tokenizer, &text, &opts, &out, &mut |_| {}).unwrap();
        let state: TrainState =
            serde_json::from_str(&std::fs::read_to_string(out.join("train_state.json")).unwrap())
                .unwrap();
        (report, state.losses[0].clone())
    };
    let (zero, zero_first) = first_losses(Init::Zero, &mut model);
    let (warm, warm_first) = first_losses(Init::Shortcut, &mut model);
    assert_eq!(zero.method, None);
    assert_eq!(warm.method, Some(Method::KlFromShortcut));
    // The same shortcut lens fitted apart on the windows the two steps visit, saved, then given as
    // `--init lens:DIR`: the first step starts from exactly that lens.
    let saved = tmp.path().join("saved-shortcut");
    let fit = ShortcutOptions {
        tokens: 512,
        seq_len: 64,
        holdout_tokens: 128,
        ..Default::default()
    };
    train_shortcut(
        &mut model,
        &tokenizer,
        &text,
        &fit,
        &saved,
        &mut |_| {},
        None,
    )
    .unwrap();
    let (from_saved, saved_first) = first_losses(Init::Lens(saved.clone()), &mut model);
    assert_eq!(from_saved.method, Some(Method::KlFromLens));
    // Equal up to the order of rayon's parallel sums (which moves last bits when other tests
    // compete for the threads).
    for (i, (s, w)) in saved_first.iter().zip(&warm_first).enumerate() {
        assert!(
            (s - w).abs() <= 1e-9 * w.abs(),
            "layer {i}: from the saved lens {s}, from the fit {w}"
        );
    }
    // A saved lens of another model is refused before any step.
    let other = tmp.path().join("other");
    TunedLens::zeros("other", 64, 3)
        .unwrap()
        .save(&other)
        .unwrap();
    let opts = TrainOptions {
        tokens: 512,
        step_tokens: 256,
        seq_len: 64,
        holdout_tokens: 128,
        init: Init::Lens(other),
        ..Default::default()
    };
    let err = train_lens(
        &mut model,
        &tokenizer,
        &text,
        &opts,
        &tmp.path().join("x"),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("was made for a model of 3 blocks"), "{err}");
    for (i, (z, w)) in zero_first.iter().zip(&warm_first).enumerate() {
        assert!(w < z, "layer {i}: warm start {w} ≥ zero start {z}");
    }
    for (i, (z, w)) in zero.kl_tuned.iter().zip(&warm.kl_tuned).enumerate() {
        assert!(
            w < z,
            "layer {i}: held out, warm {w} ≥ zero {z} after two steps"
        );
    }
}

#[test]
fn train_lens_refuses_flags_of_the_other_method() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("lens");
    let data = root().join("data/tinystories/valid.jsonl");
    let base = [
        "train-lens",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    for (extra, expected) in [
        (
            &["--method", "shortcut", "--lr-scale", "2"][..],
            "--lr-scale applies to --method kl",
        ),
        (
            &["--method", "shortcut", "--init", "shortcut"][..],
            "--init shortcut applies to --method kl",
        ),
        (&["--init", "lens:"][..], "unknown --init `lens:`"),
        (&["--init", "warm"][..], "or lens:DIR (a saved lens)"),
        (
            &["--ridge", "0.1"][..],
            "--ridge applies to --method shortcut",
        ),
        (
            &["--method", "shortcut", "--ridge=-1"][..],
            "--ridge must be a finite number ≥ 0",
        ),
        (
            &["--method", "shortcut", "--ridge=nan"][..],
            "--ridge must be a finite number ≥ 0",
        ),
        (
            &["--method", "shortcut", "--tokens", "1"][..],
            "need --tokens ≥ --seq-len",
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let err = common::fails(&args);
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    // An unknown method is a usage error (exit 2), listing the two there are.
    let args: Vec<&str> = base.iter().chain(&["--method", "lstsq"]).copied().collect();
    let output = common::run(&args);
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("[possible values: kl, shortcut]"), "{err}");
    assert!(!out.exists(), "a refused run wrote {}", out.display());
}

/// `--data` an experiment's folder: the lens is fitted on its records' prompt and generated ids as
/// the model read them (the committed tasks fixture: TinyStories prompts with their task
/// instructions), the first `--skip-records` left out; records of another model are refused.
#[test]
fn a_lens_fits_an_experiments_own_tokens() {
    use entropy_lens::lens::data::{read_record_sequences, TrainingData};
    let run = root().join("tests/fixtures/experiments/tasks");
    let all = read_record_sequences(&run, 0).unwrap();
    let some = read_record_sequences(&run.join("records.jsonl"), 4).unwrap();
    assert_eq!((all.sequences.len(), some.sequences.len()), (12, 8));
    assert_eq!(&all.sequences[4..], &some.sequences[..]);
    // Lines in the order batches finished: read back in item order.
    let shuffled = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(run.join("records.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().rev().collect();
    std::fs::write(shuffled.path().join("records.jsonl"), lines.join("\n")).unwrap();
    assert_eq!(
        read_record_sequences(shuffled.path(), 4).unwrap().sequences,
        some.sequences
    );
    // Each record's ids: its prompt (BOS first) then its generation, as records.jsonl holds them.
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(run.join("records.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let ids: Vec<u32> = ["prompt_ids", "generated_ids"]
        .iter()
        .flat_map(|k| first["profile"][k].as_array().unwrap().clone())
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(all.sequences[0], ids);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("lens");
    let (smol, gemma) = (common::smollm2(), common::gemma3());
    let args = [
        "train-lens",
        "--method",
        "shortcut",
        "--model",
        smol.to_str().unwrap(),
        "--data",
        run.to_str().unwrap(),
        "--tokens",
        "1024",
        "--seq-len",
        "128",
        "--holdout-tokens",
        "512",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    let report: Value = serde_json::from_str(&common::ok(&args)).unwrap();
    assert_eq!(report["tokens_trained"], 1024);
    assert_eq!(report["holdout_tokens"], 512);
    // KL training on the same data resumes only with the same data: the state names its digest.
    let kl_out = tmp.path().join("kl");
    let kl = [
        "train-lens",
        "--model",
        smol.to_str().unwrap(),
        "--data",
        run.to_str().unwrap(),
        "--tokens",
        "256",
        "--step-tokens",
        "128",
        "--seq-len",
        "128",
        "--holdout-tokens",
        "512",
        "--out",
        kl_out.to_str().unwrap(),
    ];
    common::ok(&kl);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(kl_out.join("train_state.json")).unwrap())
            .unwrap();
    assert_eq!(
        state["data_sha256"],
        TrainingData::Sequences(&all.sequences).sha256()
    );
    // Another model's records.
    let err = common::fails(&[
        "train-lens",
        "--method",
        "shortcut",
        "--model",
        gemma.to_str().unwrap(),
        "--data",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("was generated by another model"), "{err}");
}
