//! Export of a GGUF model to the Hugging Face layout (`config.json`, sharded `*.safetensors` with
//! `model.safetensors.index.json`, `tokenizer.json`, `tokenizer_config.json`), dequantized to f32.
//!
//! It undoes llama.cpp's conventions on the way: Llama Q/K rows are un-permuted, and Gemma norm
//! scales are stored as `w` rather than `1 + w`.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use serde_json::{json, Value};

use super::config::GgufMetadata;
use super::families::{self, gemma3, llama};
use super::tokenizer::TextTokenizer;
use super::weights::Weights;
use super::Architecture;
use crate::error::{Error, Result};

/// Writes `gguf` as a Hugging Face folder at `out` with `shards` safetensors files.
///
/// # Errors
/// [`Error::InvalidArgument`] for zero shards; [`Error::UnknownArchitecture`] for GGUF files other
/// than llama and gemma3; those of reading the GGUF file; [`Error::Io`] when writing fails.
pub fn export_gguf_to_hf(gguf: &Path, out: &Path, shards: usize) -> Result<()> {
    if shards == 0 {
        return Err(Error::invalid("shards must be at least 1"));
    }
    let (content, mut file) = Weights::open_gguf(gguf)?;
    if shards > content.tensor_infos.len() {
        return Err(Error::invalid(format!(
            "{shards} shards for {} tensors: at most one shard per tensor",
            content.tensor_infos.len()
        )));
    }
    let md = GgufMetadata::new(&content);
    let architecture: Architecture = md.str("general.architecture")?.parse()?;
    let tokenizer = TextTokenizer::from_gguf(&md)?;
    let mut config = match architecture {
        Architecture::Llama => {
            let mut c = serde_json::to_value(llama::Config::from_gguf(&md)?)?;
            c["model_type"] = json!("llama");
            c["architectures"] = json!(["LlamaForCausalLM"]);
            c["hidden_act"] = json!("silu");
            c
        }
        Architecture::Gemma3 => {
            let cfg = gemma3::Config::from_gguf(&md)?;
            let types: Vec<&str> = (0..cfg.num_hidden_layers)
                .map(|i| {
                    if cfg.is_global(i) {
                        "full_attention"
                    } else {
                        "sliding_attention"
                    }
                })
                .collect();
            let mut c = serde_json::to_value(&cfg)?;
            c["layer_types"] = json!(types);
            c["model_type"] = json!("gemma3_text");
            c["architectures"] = json!(["Gemma3ForCausalLM"]);
            c["hidden_activation"] = json!("gelu_pytorch_tanh");
            c
        }
        other => {
            return Err(Error::UnknownArchitecture {
                architecture: format!("{other} (GGUF export)"),
                supported: "llama, gemma3".into(),
            })
        }
    };
    let gguf_names = families::by_architecture(architecture)
        .and_then(|f| f.gguf_names)
        .expect("llama and gemma3 name their GGUF tensors");
    config["torch_dtype"] = json!("float32");
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;

    let heads = md.opt_usize(&format!("{architecture}.attention.head_count"))?;
    let kv_heads = md
        .opt_usize(&format!("{architecture}.attention.head_count_kv"))?
        .or(heads);

    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(String, Tensor)> = Vec::with_capacity(names.len());
    for gname in names {
        // rope_freqs (llama.cpp's RoPE scaling factors) has no Hugging Face counterpart: the
        // scaling belongs in config.json.
        let Some(name) = gguf_names
            .to_hf(gname)
            .filter(|n| !n.ends_with("rope_freqs.weight"))
        else {
            continue;
        };
        let mut t = content
            .tensor(&mut file, gname, &Device::Cpu)
            .and_then(|q| q.dequantize(&Device::Cpu))
            .map_err(|e| Error::CorruptGguf {
                path: gguf.to_path_buf(),
                reason: format!("reading `{gname}`: {e}"),
            })?;
        if architecture == Architecture::Llama {
            if name.ends_with("q_proj.weight") {
                t = unpermute_rows(&t, heads.unwrap_or(1))?;
            } else if name.ends_with("k_proj.weight") {
                t = unpermute_rows(&t, kv_heads.unwrap_or(1))?;
            }
        }
        if architecture == Architecture::Gemma3 && name.ends_with("norm.weight") {
            t = (t - 1.0)?;
        }
        tensors.push((name, t));
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));

    // Greedy balance of bytes across shards, keeping name order within each shard.
    let total: usize = tensors.iter().map(|(_, t)| t.elem_count() * 4).sum();
    let per_shard = total.div_ceil(shards);
    let mut shard_of: Vec<usize> = Vec::with_capacity(tensors.len());
    let (mut shard, mut filled) = (0usize, 0usize);
    for (_, t) in &tensors {
        let size = t.elem_count() * 4;
        if filled > 0 && filled + size > per_shard && shard + 1 < shards {
            shard += 1;
            filled = 0;
        }
        shard_of.push(shard);
        filled += size;
    }
    let shard_name = |i: usize| format!("model-{:05}-of-{:05}.safetensors", i + 1, shards);
    let mut weight_map = serde_json::Map::new();
    for s in 0..shards {
        let part: HashMap<String, Tensor> = tensors
            .iter()
            .zip(&shard_of)
            .filter(|(_, &k)| k == s)
            .map(|((n, t), _)| (n.clone(), t.clone()))
            .collect();
        for n in part.keys() {
            weight_map.insert(n.clone(), json!(shard_name(s)));
        }
        let path = out.join(shard_name(s));
        candle_core::safetensors::save(&part, &path)?;
    }
    let index = json!({"metadata": {"total_size": total}, "weight_map": weight_map});
    write_json(&out.join("model.safetensors.index.json"), &index)?;
    write_json(&out.join("config.json"), &config)?;
    write_json(
        &out.join("tokenizer_config.json"),
        &tokenizer.tokenizer_config_json(),
    )?;
    let tok_path = out.join("tokenizer.json");
    std::fs::write(&tok_path, tokenizer.to_json()?).map_err(|e| Error::io(&tok_path, e))?;
    Ok(())
}

fn write_json(path: &Path, v: &Value) -> Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(v)?).map_err(|e| Error::io(path, e))
}

/// Inverse of llama.cpp's Q/K row permutation: GGUF row blocks `(head, i, pair)` back to
/// Hugging Face's `(head, pair, i)`.
///
/// # Shapes
/// `w`: [heads · head_dim, in] → same
fn unpermute_rows(w: &Tensor, heads: usize) -> Result<Tensor> {
    let (out, inp) = w.dims2()?;
    let head_dim = out / heads;
    Ok(w.reshape((heads, head_dim / 2, 2, inp))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((out, inp))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_llama_cpp_permutation() {
        // llama.cpp: w.reshape(h, 2, hd/2, in).swapaxes(1, 2).reshape(out, in)
        let (h, hd, inp) = (3, 4, 2);
        let w = Tensor::arange(0f32, (h * hd * inp) as f32, &Device::Cpu)
            .unwrap()
            .reshape((h * hd, inp))
            .unwrap();
        let permuted = w
            .reshape((h, 2, hd / 2, inp))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
            .reshape((h * hd, inp))
            .unwrap();
        let back = unpermute_rows(&permuted, h).unwrap();
        assert_eq!(back.to_vec2::<f32>().unwrap(), w.to_vec2::<f32>().unwrap());
    }
}
