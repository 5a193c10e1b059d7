//! Hugging Face Hub access through `hf-hub`, with its cache conventions: files live under
//! `$HF_HOME/hub/models--owner--name/snapshots/<commit>/`, `refs/<revision>` names the commit, and
//! `HF_HUB_OFFLINE=1` reads the cache only.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use hf_hub::api::sync::{Api, ApiBuilder};
use hf_hub::{Cache, Repo, RepoType};

use crate::error::{Error, Result};

fn offline() -> bool {
    std::env::var("HF_HUB_OFFLINE")
        .map(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
        .unwrap_or(false)
}

/// The Hub client, or `None` when `HF_HUB_OFFLINE` says to read the cache only.
fn online_api() -> Result<Option<Api>> {
    if offline() {
        return Ok(None);
    }
    ApiBuilder::from_env()
        .with_progress(true)
        .build()
        .map(Some)
        .map_err(|e| Error::Hub(format!("cannot set up the Hub client: {e}")))
}

/// Fetches (or finds in the cache) what the runtime needs from a model repository and returns the
/// snapshot folder holding it: `config.json`, `tokenizer.json`, optional tokenizer/generation
/// configs and chat template, and the safetensors weights (single file or index + shards).
///
/// # Errors
/// [`Error::Hub`] when a required file is neither cached nor downloadable (offline with
/// `HF_HUB_OFFLINE`, no network, unknown repository, gated without `HF_TOKEN`); the message says
/// how to use a local folder instead.
pub fn snapshot(repo_id: &str, revision: Option<&str>) -> Result<PathBuf> {
    snapshot_files(
        repo_id,
        revision,
        &["tokenizer.json"],
        &[
            "tokenizer_config.json",
            "generation_config.json",
            "chat_template.jinja",
        ],
    )
}

/// As [`snapshot`], with the files beside `config.json` and the weights that the model needs
/// (`required`) or may use (`optional`): an image classifier needs `preprocessor_config.json`
/// and no tokenizer.
///
/// # Errors
/// As [`snapshot`].
pub fn snapshot_files(
    repo_id: &str,
    revision: Option<&str>,
    required: &[&str],
    optional: &[&str],
) -> Result<PathBuf> {
    let repo = Repo::with_revision(
        repo_id.to_string(),
        RepoType::Model,
        revision.unwrap_or("main").to_string(),
    );
    let cache = Cache::from_env();
    let api = online_api()?;
    let cached = cache.repo(repo.clone());
    let get = |file: &str, required: bool| -> Result<Option<PathBuf>> {
        if let Some(p) = cached.get(file) {
            return Ok(Some(p));
        }
        match &api {
            None if required => Err(Error::Hub(format!(
                "`{file}` of {repo_id} is not in the local cache ({}) and HF_HUB_OFFLINE is set\n  hint: unset HF_HUB_OFFLINE to download it, or download the repository on a machine with Hub access (`huggingface-cli download {repo_id} --local-dir DIR`) and pass `--model DIR` (a folder in the Hub's layout: config.json, *.safetensors, and tokenizer.json or preprocessor_config.json) or a GGUF file",
                cache.path().display()
            ))),
            None => Ok(None),
            Some(api) => match api.repo(repo.clone()).get(file) {
                Ok(p) => Ok(Some(p)),
                Err(_) if !required => Ok(None),
                Err(e) if file == "model.safetensors" => Err(Error::Hub(format!(
                    "cannot download `{file}` of {repo_id}: {e}\n  hint: entropy-lens reads safetensors only; some older repositories hold only pytorch_model.bin on `main`, with the Hub's safetensors conversion on a pull-request revision: pass `{repo_id}@refs/pr/N` (the revision that adds model.safetensors), or convert locally with transformers (`save_pretrained(DIR)`) and pass `--model DIR`"
                ))),
                Err(e) => Err(Error::Hub(format!(
                    "cannot download `{file}` of {repo_id}: {e}\n  hint: check the repo id, your network, and HF_TOKEN for gated models; without Hub access, download the repository elsewhere (`huggingface-cli download {repo_id} --local-dir DIR`) and pass `--model DIR` (a folder in the Hub's layout: config.json, *.safetensors, and tokenizer.json or preprocessor_config.json) or a GGUF file"
                ))),
            },
        }
    };
    let config = get("config.json", true)?.ok_or_else(|| Error::Hub("config.json".into()))?;
    // An image classifier has no tokenizer: say what it is rather than that a tokenizer is missing.
    if required.contains(&"tokenizer.json") {
        let model_type = std::fs::read_to_string(&config)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["model_type"].as_str().map(str::to_string));
        if let Some(t) =
            model_type.filter(|t| super::vision::VISION_MODEL_TYPES.contains(&t.as_str()))
        {
            return Err(Error::UnknownArchitecture {
                architecture: format!("{t} (an image classifier, {repo_id})"),
                supported: "language models here; profile images with `entropy-lens profile --model REPO --images FILES` or entropy_lens::runner::ImageProfiler".into(),
            });
        }
    }
    for file in required {
        get(file, true)?;
    }
    for file in optional {
        get(file, false)?;
    }
    match get("model.safetensors.index.json", false)? {
        Some(index) => {
            let text = std::fs::read_to_string(&index).map_err(|e| Error::io(&index, e))?;
            let v: serde_json::Value = serde_json::from_str(&text)?;
            let mut shards: Vec<&str> = v["weight_map"]
                .as_object()
                .map(|m| m.values().filter_map(|f| f.as_str()).collect())
                .unwrap_or_default();
            shards.sort();
            shards.dedup();
            for shard in shards {
                get(shard, true)?;
            }
        }
        None => {
            get("model.safetensors", true)?;
        }
    }
    config
        .parent()
        .map(|p| p.to_path_buf())
        .ok_or_else(|| Error::Hub("snapshot folder has no parent".into()))
}

/// Fetches (or finds in the cache) `files` of the folder `subfolder` of the Hub *space* `repo_id`
/// (where the tuned-lens package publishes its lenses: `lens/<model id>/` of
/// `AlignmentResearch/tuned-lens`), and returns the folder holding them.
///
/// # Errors
/// [`Error::Hub`] when a file is neither cached nor downloadable.
pub fn space_folder(repo_id: &str, subfolder: &str, files: &[&str]) -> Result<PathBuf> {
    let repo = Repo::with_revision(repo_id.to_string(), RepoType::Space, "main".to_string());
    let cached = Cache::from_env().repo(repo.clone());
    let api = online_api()?;
    let mut folder = None;
    for file in files {
        let name = format!("{subfolder}/{file}");
        let path = match (cached.get(&name), &api) {
            (Some(p), _) => p,
            (None, Some(api)) => api.repo(repo.clone()).get(&name).map_err(|e| {
                Error::Hub(format!("cannot download `{name}` of the space {repo_id}: {e}"))
            })?,
            (None, None) => {
                return Err(Error::Hub(format!(
                    "`{name}` of the space {repo_id} is not in the local cache and HF_HUB_OFFLINE is set"
                )))
            }
        };
        folder = path.parent().map(|p| p.to_path_buf());
    }
    folder.ok_or_else(|| Error::Hub(format!("no file asked of {repo_id}/{subfolder}")))
}
