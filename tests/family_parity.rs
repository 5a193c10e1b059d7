//! Every family against transformers: tiny random models in the Hugging Face layout (and as GGUF
//! with llama.cpp's names, for the families llama.cpp writes), made and referenced by
//! `tests/fixtures/families/make_fixtures.py` (float64, the model's own modules, hooks on the
//! blocks). Loaded here through the normal loader: Shannon and Rényi (0.5, 2, 5, ∞) within 1e-4
//! nats at every position and layer, top-p counts and top-1 ids equal, greedy ids equal.

mod common;

use common::OutputBounded;

use std::path::PathBuf;

use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, Architecture, LoadOptions, ModelSource};
use entropy_lens::runner::{ProfileRequest, Profiler};
use serde_json::Value;

use common::parity::{generation_check, Report, ALPHAS};
use common::u32s;

const TOL: f64 = 1e-4;

fn fixtures() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/fixtures/families")
}

fn reference(family: &str) -> Value {
    let path = fixtures().join(family).join("reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn profiler(source: ModelSource) -> Profiler {
    let loaded = load(&source, &LoadOptions::cpu()).unwrap_or_else(|e| panic!("{e}"));
    let spec = StatSpec {
        alphas: ALPHAS.iter().map(|a| a.1).collect(),
        top_k: 5,
        ..Default::default()
    };
    Profiler::new(loaded, spec).unwrap()
}

fn check(source: ModelSource, gold: &Value, architecture: Architecture) {
    let mut prof = profiler(source.clone());
    assert_eq!(prof.model.info().architecture, architecture);
    let mut report = Report::default();
    for prompt in gold["prompts"].as_array().unwrap() {
        let req = ProfileRequest::new(prompt["text"].as_str().unwrap())
            .all_positions(true)
            .include_embed(true);
        assert_eq!(
            prof.prompt_ids(&req).unwrap(),
            u32s(&prompt["token_ids"]),
            "token ids of {:?}",
            prompt["text"]
        );
        let profile = prof.run(&req).unwrap();
        for (pos, p) in profile.positions.iter().enumerate() {
            report.position(p, &prompt["layers"], &prompt["embed"], pos);
        }
    }
    println!("{}: {report:?}", source.describe());
    assert!(report.entries > 0);
    report.assert_within(TOL);
    generation_check(&mut prof, gold, 8, TOL);
}

fn hf(family: &str, architecture: Architecture) {
    check(
        ModelSource::HfFolder(fixtures().join(family)),
        &reference(family),
        architecture,
    );
}

fn gguf(family: &str, architecture: Architecture) {
    check(
        ModelSource::Gguf(fixtures().join(format!("{family}.gguf"))),
        &reference(family),
        architecture,
    );
}

#[test]
fn gpt2_matches_transformers() {
    hf("gpt2", Architecture::Gpt2);
}

#[test]
fn gemma_matches_transformers() {
    hf("gemma", Architecture::Gemma);
}

#[test]
fn gemma2_matches_transformers_with_soft_caps_active() {
    let gold = reference("gemma2");
    // The fixture is only a test of the caps if they bite: raw logits pass the final cap, and
    // removing the attention cap changes the entropies.
    assert!(gold["final_softcap_reach"].as_f64().unwrap() > 1.0);
    assert!(gold["attn_softcap_effect"].as_f64().unwrap() > 0.01);
    hf("gemma2", Architecture::Gemma2);
}

#[test]
fn qwen2_matches_transformers() {
    hf("qwen2", Architecture::Qwen2);
}

#[test]
fn qwen3_matches_transformers() {
    hf("qwen3", Architecture::Qwen3);
}

#[test]
fn phi3_matches_transformers() {
    hf("phi3", Architecture::Phi3);
}

#[test]
fn mistral_matches_transformers() {
    hf("mistral", Architecture::Mistral);
}

#[test]
fn gpt_neox_matches_transformers() {
    hf("gpt_neox", Architecture::GptNeoX);
}

/// A copy of `family`'s fixture whose config names another `model_type`.
fn renamed(family: &str, model_type: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixtures().join(family)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let cfg_path = dir.path().join("config.json");
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    cfg["model_type"] = model_type.into();
    cfg["architectures"] = serde_json::json!(["SomethingNewForCausalLM"]);
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    dir
}

#[test]
fn unknown_model_type_in_the_llama_layout_is_auto_detected() {
    // Qwen3 (q/k norms) and Phi-3 (fused qkv and gate_up, LongRoPE) under a name no family claims.
    for family in ["qwen3", "phi3"] {
        let dir = renamed(family, "something_new");
        check(
            ModelSource::HfFolder(dir.path().to_path_buf()),
            &reference(family),
            Architecture::Auto,
        );
    }
}

#[test]
fn auto_detection_names_the_first_misfit() {
    let err = |family: &str| -> String {
        let dir = renamed(family, "something_new");
        match load(
            &ModelSource::HfFolder(dir.path().to_path_buf()),
            &LoadOptions::cpu(),
        ) {
            Ok(_) => panic!("{family} renamed should not load"),
            Err(e) => e.to_string(),
        }
    };
    let e = err("gpt_neox");
    assert!(
        e.contains("something_new") && e.contains("use_parallel_residual"),
        "{e}"
    );
    let e = err("gpt2");
    assert!(e.contains("model.embed_tokens.weight"), "{e}");
}

#[test]
fn gguf_files_of_the_llama_cpp_families_match_transformers() {
    for (family, architecture) in [
        ("qwen2", Architecture::Qwen2),
        ("qwen3", Architecture::Qwen3),
        ("gemma2", Architecture::Gemma2),
        ("phi3", Architecture::Phi3),
        ("gpt2", Architecture::Gpt2),
    ] {
        gguf(family, architecture);
    }
}

fn profile_json(model: &str, envs: &[(&str, &std::path::Path)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(common::cli());
    cmd.args([
        "profile",
        "--model",
        model,
        "--prompt",
        "Once upon a time",
        "--json",
    ]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.env("HF_HUB_OFFLINE", "1").output_bounded().unwrap()
}

#[test]
fn cli_profiles_every_family_fixture() {
    for family in [
        "gpt2", "gemma", "gemma2", "qwen2", "qwen3", "phi3", "mistral", "gpt_neox",
    ] {
        let folder = fixtures().join(family);
        let out = profile_json(folder.to_str().unwrap(), &[]);
        assert!(
            out.status.success(),
            "{family}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let gold = reference(family);
        assert_eq!(v["prompt_ids"], gold["prompts"][0]["token_ids"], "{family}");
        // The CLI profiles the last prompt position: the reference's row there.
        let last = u32s(&v["prompt_ids"]).len() - 1;
        let ours = common::f64s(&v["positions"][0]["shannon"]);
        let theirs = common::f64s(&gold["prompts"][0]["layers"]["shannon"][last]);
        assert_eq!(ours.len(), theirs.len(), "{family}");
        for (a, b) in ours.iter().zip(&theirs) {
            assert!((a - b).abs() < TOL, "{family}: {a} vs {b}");
        }
    }
}

/// Lays `files_from` out as `huggingface_hub` caches `repo` under `home`.
fn hub_cache(home: &std::path::Path, repo: &str, files_from: &std::path::Path) {
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let root = home
        .join("hub")
        .join(format!("models--{}", repo.replace('/', "--")));
    let snap = root.join("snapshots").join(commit);
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(root.join("refs")).unwrap();
    std::fs::write(root.join("refs/main"), commit).unwrap();
    for entry in std::fs::read_dir(files_from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, snap.join(path.file_name().unwrap())).unwrap();
    }
}

#[test]
fn registry_names_resolve_to_the_hub_and_say_what_to_do_offline() {
    let home = tempfile::tempdir().unwrap();
    // `gpt2` is the paper's openai-community/gpt2: served here from a Hub cache holding the
    // tiny GPT-2 in the Hub's layout.
    hub_cache(
        home.path(),
        "openai-community/gpt2",
        &fixtures().join("gpt2"),
    );
    let out = profile_json("gpt2", &[("HF_HOME", home.path())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["model"], "openai-community/gpt2");
    assert_eq!(
        v["prompt_ids"],
        reference("gpt2")["prompts"][0]["token_ids"]
    );
    // Not cached and no Hub: the error names the repository and how to use a local folder.
    let out = profile_json("gemma-2-2b-it", &[("HF_HOME", home.path())]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("google/gemma-2-2b-it")
            && err.contains("--local-dir")
            && err.contains("--model DIR"),
        "{err}"
    );
}

#[test]
fn models_command_lists_the_registry() {
    let out = std::process::Command::new(common::cli())
        .args(["models", "--json"])
        .output_bounded()
        .unwrap();
    assert!(out.status.success());
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let families: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["architecture"].as_str().unwrap())
        .collect();
    assert_eq!(
        families.into_iter().collect::<Vec<_>>(),
        ["gemma2", "gpt2", "llama", "phi3", "qwen2"]
    );
    assert!(rows
        .iter()
        .any(|r| r["name"] == "gpt2-xl" && r["hub_id"] == "openai-community/gpt2-xl"));
}

/// A copy of `family`'s fixture whose tensors are renamed (or dropped) by `rename`.
fn rewritten(family: &str, rename: impl Fn(&str) -> Option<String>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = fixtures().join(family);
    let mut tensors = std::collections::HashMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".safetensors") {
            for (k, v) in candle_core::safetensors::load(&path, &candle_core::Device::Cpu).unwrap()
            {
                if let Some(new) = rename(&k) {
                    tensors.insert(new, v);
                }
            }
        } else if name != "model.safetensors.index.json" {
            std::fs::copy(&path, dir.path().join(&name)).unwrap();
        }
    }
    candle_core::safetensors::save(&tensors, dir.path().join("model.safetensors")).unwrap();
    dir
}

#[test]
fn gpt2_in_the_hubs_unprefixed_layout_matches() {
    // The Hub's gpt2 checkpoints store the base model's names: `h.0.attn.c_attn.weight`, `wte.weight`.
    let dir = rewritten("gpt2", |k| {
        Some(k.strip_prefix("transformer.").unwrap_or(k).to_string())
    });
    check(
        ModelSource::HfFolder(dir.path().to_path_buf()),
        &reference("gpt2"),
        Architecture::Gpt2,
    );
}

#[test]
fn an_untied_head_that_is_missing_is_an_error_not_the_embedding() {
    let dir = rewritten("gpt_neox", |k| {
        (k != "embed_out.weight").then(|| k.to_string())
    });
    let err = match load(
        &ModelSource::HfFolder(dir.path().to_path_buf()),
        &LoadOptions::cpu(),
    ) {
        Ok(_) => panic!("loaded without its head"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("embed_out.weight"), "{err}");
}
