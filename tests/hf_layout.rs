//! The Hugging Face path on real weights: each offline GGUF model is exported dequantized into
//! the Hub layout (config.json, sharded safetensors + index, tokenizer.json), loaded back through
//! the safetensors/tokenizer.json code, and must reproduce the GGUF f32 profiles within 1e-4.
//! The Hub-cache path (`HF_HOME`, `HF_HUB_OFFLINE`, `models--owner--name/snapshots/<commit>`) is
//! exercised through the CLI with a repo id.

mod common;

use common::OutputBounded;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use entropy_lens::lens::StatSpec;
use entropy_lens::model::export::export_gguf_to_hf;
use entropy_lens::model::{load, LoadOptions, ModelSource, WeightDType};
use entropy_lens::runner::{ProfileRequest, Profiler};
use serde_json::Value;

const PROMPTS: [&str; 3] = [
    "The Eiffel Tower is located in the city of",
    "Q: Was Claude Shannon born in an even or odd year? A:",
    "Digits 2024 and émojis 🙂 survive tokenization.",
];

fn export_once(
    cell: &'static OnceLock<(tempfile::TempDir, PathBuf)>,
    gguf: PathBuf,
    shards: usize,
) -> &'static Path {
    &cell
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("hf");
            export_gguf_to_hf(&gguf, &out, shards).unwrap();
            (dir, out)
        })
        .1
}

static SMOLLM2_HF: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
static GEMMA3_HF: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();

fn profiler(source: ModelSource) -> Profiler {
    let spec = StatSpec {
        alphas: vec![0.5, 2.0, f64::INFINITY],
        top_k: 5,
        ..Default::default()
    };
    Profiler::new(
        load(&source, &LoadOptions::cpu().with_dtype(WeightDType::F32)).unwrap(),
        spec,
    )
    .unwrap()
}

fn compare(gguf: PathBuf, hf: &Path, shards: usize) {
    let index: Value = serde_json::from_str(
        &std::fs::read_to_string(hf.join("model.safetensors.index.json")).unwrap(),
    )
    .unwrap();
    let mut files: Vec<&str> = index["weight_map"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap())
        .collect();
    files.sort();
    files.dedup();
    assert_eq!(files.len(), shards, "{files:?}");
    for f in files
        .iter()
        .chain(&["config.json", "tokenizer.json", "tokenizer_config.json"])
    {
        assert!(hf.join(f).is_file(), "{f} missing");
    }
    let mut a = profiler(ModelSource::Gguf(gguf));
    let mut b = profiler(ModelSource::parse(hf.to_str().unwrap()).unwrap());
    assert_eq!(a.model.info().n_layers, b.model.info().n_layers);
    let mut worst = 0f64;
    for prompt in PROMPTS {
        let req = ProfileRequest::new(prompt)
            .all_positions(true)
            .generate(6)
            .ignore_eos(true);
        assert_eq!(
            a.prompt_ids(&req).unwrap(),
            b.prompt_ids(&req).unwrap(),
            "tokens of {prompt:?}"
        );
        let pa = a.run(&req).unwrap();
        let pb = b.run(&req).unwrap();
        assert_eq!(
            pa.generated_ids, pb.generated_ids,
            "generation from {prompt:?}"
        );
        assert_eq!(pa.positions.len(), pb.positions.len());
        for (x, y) in pa.positions.iter().zip(&pb.positions) {
            for (h1, h2) in x.shannon.iter().zip(&y.shannon) {
                worst = worst.max((h1 - h2).abs());
            }
            for (k, v) in &x.renyi {
                for (h1, h2) in v.iter().zip(&y.renyi[k]) {
                    worst = worst.max((h1 - h2).abs());
                }
            }
            assert_eq!(
                x.top_k.iter().map(|t| t[0].0).collect::<Vec<_>>(),
                y.top_k.iter().map(|t| t[0].0).collect::<Vec<_>>()
            );
        }
    }
    println!(
        "{}: max |Δ| between GGUF and HF layout = {worst:.2e}",
        hf.display()
    );
    assert!(worst < 1e-4, "HF layout differs from GGUF by {worst}");
}

#[test]
fn smollm2_hf_layout_matches_gguf() {
    let hf = export_once(&SMOLLM2_HF, common::smollm2(), 3);
    compare(common::smollm2(), hf, 3);
    // The exported config is a real Llama config.json (Q/K un-permuted: RoPE by halves).
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(hf.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["model_type"], "llama");
    assert_eq!(cfg["num_hidden_layers"], 30);
    assert_eq!(cfg["tie_word_embeddings"], true);
}

#[test]
fn gemma3_hf_layout_matches_gguf() {
    let hf = export_once(&GEMMA3_HF, common::gemma3(), 2);
    compare(common::gemma3(), hf, 2);
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(hf.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["model_type"], "gemma3_text");
    assert_eq!(cfg["layer_types"][5], "full_attention");
    assert_eq!(cfg["layer_types"][4], "sliding_attention");
}

/// Lays the exported files out exactly as `huggingface_hub` does in its cache.
fn hub_cache(home: &Path, repo: &str, files_from: &Path) {
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let root = home
        .join("hub")
        .join(format!("models--{}", repo.replace('/', "--")));
    let snap = root.join("snapshots").join(commit);
    std::fs::create_dir_all(root.join("blobs")).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(root.join("refs")).unwrap();
    std::fs::write(root.join("refs/main"), commit).unwrap();
    for entry in std::fs::read_dir(files_from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let blob = root.join("blobs").join(format!("blob-{name}"));
        std::fs::hard_link(entry.path(), &blob)
            .or_else(|_| std::fs::copy(entry.path(), &blob).map(|_| ()))
            .unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/blob-{name}"), snap.join(&name)).unwrap();
    }
}

#[test]
fn hub_repo_id_resolves_through_the_hf_cache_offline() {
    let hf = export_once(&SMOLLM2_HF, common::smollm2(), 3);
    let home = tempfile::tempdir().unwrap();
    hub_cache(home.path(), "local-test/SmolLM2-export", hf);
    let run = |model: &str| {
        Command::new(common::cli())
            .args([
                "profile", "--model", model, "--prompt", PROMPTS[0], "--dtype", "f32", "--json",
            ])
            .env("HF_HOME", home.path())
            .env("HF_HUB_OFFLINE", "1")
            .output_bounded()
            .unwrap()
    };
    let gguf = common::smollm2();
    let a = run(gguf.to_str().unwrap());
    let b = run("local-test/SmolLM2-export");
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let a: Value = serde_json::from_slice(&a.stdout).unwrap();
    let b: Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(b["model"], "local-test/SmolLM2-export");
    assert_eq!(a["prompt_ids"], b["prompt_ids"]);
    let ha = common::f64s(&a["positions"][0]["shannon"]);
    let hb = common::f64s(&b["positions"][0]["shannon"]);
    let worst = ha
        .iter()
        .zip(&hb)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-4, "{worst}");

    // Offline and not cached: a clear error naming the cache and the switch.
    let c = run("local-test/not-downloaded");
    let err = String::from_utf8_lossy(&c.stderr);
    assert!(!c.status.success());
    assert!(
        err.contains("HF_HUB_OFFLINE") && err.contains("config.json"),
        "{err}"
    );
}

#[test]
fn vision_repo_id_resolves_through_the_hf_cache_offline() {
    let vit = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vision/vit");
    let images = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vision/images");
    let home = tempfile::tempdir().unwrap();
    hub_cache(home.path(), "local-test/vit-tiny", &vit);
    // The same repository without its preprocessor configuration.
    let partial = tempfile::tempdir().unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(vit.join(f), partial.path().join(f)).unwrap();
    }
    hub_cache(
        home.path(),
        "local-test/vit-no-preprocessor",
        partial.path(),
    );
    let run = |model: &str| {
        Command::new(common::cli())
            .args([
                "profile",
                "--model",
                model,
                "--images",
                images.to_str().unwrap(),
                "--json",
            ])
            .env("HF_HOME", home.path())
            .env("HF_HUB_OFFLINE", "1")
            .output_bounded()
            .unwrap()
    };
    let lines = |out: &std::process::Output| -> Vec<Value> {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let from_folder = lines(&run(vit.to_str().unwrap()));
    let from_hub = lines(&run("local-test/vit-tiny"));
    assert_eq!(from_folder.len(), 5);
    assert_eq!(from_hub.len(), 5);
    for (a, b) in from_folder.iter().zip(&from_hub) {
        assert_eq!(b["model"], "local-test/vit-tiny");
        assert_eq!(a["prompt"], b["prompt"]);
        assert_eq!(a["positions"], b["positions"]);
        assert_eq!(a["generated_ids"], b["generated_ids"]);
    }
    // A vision repository given a prompt: named as an image classifier, not a missing tokenizer.
    let d = Command::new(common::cli())
        .args([
            "profile",
            "--model",
            "local-test/vit-tiny",
            "--prompt",
            "hello",
        ])
        .env("HF_HOME", home.path())
        .env("HF_HUB_OFFLINE", "1")
        .output_bounded()
        .unwrap();
    let err = String::from_utf8_lossy(&d.stderr);
    assert!(!d.status.success());
    assert!(
        err.contains("image classifier") && err.contains("--images"),
        "{err}"
    );
    let c = run("local-test/vit-no-preprocessor");
    let err = String::from_utf8_lossy(&c.stderr);
    assert!(!c.status.success());
    assert!(
        err.contains("preprocessor_config.json") && err.contains("HF_HUB_OFFLINE"),
        "{err}"
    );
}
