//! Tokenizers: built from GGUF metadata (byte-level BPE for `gpt2`-type vocabularies,
//! SentencePiece-style BPE for `llama`-type ones) or read from a Hugging Face `tokenizer.json`,
//! with BOS/EOS handling and chat templates.
//!
//! A GGUF tokenizer is built as a `tokenizer.json` document, so the same value can be written out
//! when a GGUF model is exported to the Hugging Face layout.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Value};
use tokenizers::Tokenizer;

use super::config::GgufMetadata;
use crate::error::{Error, Result};

/// GGUF token types (llama.cpp's `llama_token_type`).
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// Gemma's turn format, used when a Gemma GGUF file carries no chat template.
const GEMMA_CHAT_TEMPLATE: &str = "{{ bos_token }}{% for message in messages %}\
{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}\
<start_of_turn>{{ role }}\n{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}\
{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";

/// A tokenizer together with the model's special-token conventions.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    bos: Option<u32>,
    eos: Vec<u32>,
    adds_bos: bool,
    chat_template: Option<String>,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("vocab", &self.inner.get_vocab_size(true))
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("adds_bos", &self.adds_bos)
            .finish()
    }
}

fn tok_err(e: impl std::fmt::Display) -> Error {
    Error::Tokenizer(e.to_string())
}

impl TextTokenizer {
    /// Builds the tokenizer described by a GGUF header (`tokenizer.ggml.*`).
    ///
    /// # Errors
    /// [`Error::Tokenizer`] for an unsupported tokenizer model or inconsistent tokens, types,
    /// merges or ids; [`Error::Config`] for metadata of the wrong type.
    pub fn from_gguf(md: &GgufMetadata) -> Result<Self> {
        let doc = gguf_tokenizer_json(md)?;
        let inner: Tokenizer = crate::error::guard_dependency(
            || {
                serde_json::from_value(doc).map_err(|e| {
                    Error::Tokenizer(format!(
                        "cannot build the tokenizer from GGUF metadata: {e}"
                    ))
                })
            },
            |msg| {
                Error::Tokenizer(format!(
                    "cannot build the tokenizer from GGUF metadata: the tokenizers library failed on it ({msg})"
                ))
            },
        )?;
        let bos = md.opt_u32("tokenizer.ggml.bos_token_id")?;
        let eos = md.opt_u32("tokenizer.ggml.eos_token_id")?;
        let mut chat_template = md.opt_str("tokenizer.chat_template")?.map(str::to_string);
        let architecture = md.opt_str("general.architecture")?.unwrap_or_default();
        if chat_template.is_none() && architecture.starts_with("gemma") {
            chat_template = Some(GEMMA_CHAT_TEMPLATE.to_string());
        }
        let mut eos: Vec<u32> = eos.into_iter().collect();
        // Chat models end a turn with their end-of-turn token as well.
        for t in ["<end_of_turn>", "<|im_end|>", "<|eot_id|>"] {
            if let Some(id) = inner.token_to_id(t) {
                if !eos.contains(&id) && chat_template.as_deref().is_some_and(|c| c.contains(t)) {
                    eos.push(id);
                }
            }
        }
        Self::new(inner, bos, eos, chat_template)
    }

    /// Reads `tokenizer.json`, plus `tokenizer_config.json` (chat template, special tokens) and
    /// the model's `config.json` / `generation_config.json` ids when present.
    ///
    /// # Errors
    /// [`Error::ModelNotFound`] without `tokenizer.json`; [`Error::Tokenizer`] when it cannot be
    /// parsed; [`Error::Config`] for invalid JSON in the other files.
    pub fn from_hf_folder(folder: &Path) -> Result<Self> {
        let path = folder.join("tokenizer.json");
        if !path.exists() {
            return Err(Error::ModelNotFound { path });
        }
        let inner = crate::error::guard_dependency(
            || {
                Tokenizer::from_file(&path)
                    .map_err(|e| Error::Tokenizer(format!("cannot read {}: {e}", path.display())))
            },
            |msg| {
                Error::Tokenizer(format!(
                    "cannot read {}: the tokenizers library failed on it ({msg}); the file is corrupt or from an unsupported version",
                    path.display()
                ))
            },
        )?;
        let read = |name: &str| -> Result<Option<Value>> {
            let p = folder.join(name);
            if !p.exists() {
                return Ok(None);
            }
            let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
            Ok(Some(serde_json::from_str(&text).map_err(|e| {
                Error::Config(format!("{} is not valid JSON: {e}", p.display()))
            })?))
        };
        let tok_cfg = read("tokenizer_config.json")?.unwrap_or(Value::Null);
        let model_cfg = read("config.json")?.unwrap_or(Value::Null);
        let gen_cfg = read("generation_config.json")?.unwrap_or(Value::Null);

        let token_id = |v: &Value| -> Option<u32> {
            let s = v
                .as_str()
                .or_else(|| v.get("content").and_then(Value::as_str))?;
            inner.token_to_id(s)
        };
        let ids = |v: &Value| -> Vec<u32> {
            match v {
                Value::Number(n) => n.as_u64().map(|x| vec![x as u32]).unwrap_or_default(),
                Value::Array(a) => a
                    .iter()
                    .filter_map(|x| x.as_u64().map(|x| x as u32))
                    .collect(),
                _ => vec![],
            }
        };
        let bos = tok_cfg
            .get("bos_token")
            .and_then(token_id)
            .or_else(|| ids(&model_cfg["bos_token_id"]).first().copied());
        let mut eos: Vec<u32> = tok_cfg
            .get("eos_token")
            .and_then(token_id)
            .into_iter()
            .collect();
        for id in ids(&model_cfg["eos_token_id"])
            .into_iter()
            .chain(ids(&gen_cfg["eos_token_id"]))
        {
            if !eos.contains(&id) {
                eos.push(id);
            }
        }
        let chat_template = match tok_cfg.get("chat_template") {
            Some(Value::String(s)) => Some(s.clone()),
            // A list of named templates: take "default".
            Some(Value::Array(list)) => list
                .iter()
                .find(|t| t["name"] == "default")
                .or_else(|| list.first())
                .and_then(|t| t["template"].as_str())
                .map(str::to_string),
            _ => {
                let p = folder.join("chat_template.jinja");
                p.exists()
                    .then(|| std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e)))
                    .transpose()?
            }
        };
        Self::new(inner, bos, eos, chat_template)
    }

    fn new(
        inner: Tokenizer,
        bos: Option<u32>,
        eos: Vec<u32>,
        chat_template: Option<String>,
    ) -> Result<Self> {
        // Whether encoding with special tokens prepends BOS is decided by the post-processor;
        // observe it rather than trust a flag.
        let with = inner.encode("a", true).map_err(tok_err)?;
        let without = inner.encode("a", false).map_err(tok_err)?;
        let adds_bos = bos.is_some()
            && with.get_ids().len() > without.get_ids().len()
            && with.get_ids().first() == bos.as_ref();
        Ok(Self {
            inner,
            bos,
            eos,
            adds_bos,
            chat_template,
        })
    }

    pub fn bos_token_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos_token_ids(&self) -> &[u32] {
        &self.eos
    }

    /// Whether [`TextTokenizer::encode`] with `add_special` prepends BOS for this model.
    pub fn adds_bos(&self) -> bool {
        self.adds_bos
    }

    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }

    /// Token ids of `text`; with `add_special`, the model's own rule for BOS applies.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        Ok(self
            .inner
            .encode(text, add_special)
            .map_err(tok_err)?
            .get_ids()
            .to_vec())
    }

    /// Text of a sequence of ids (special tokens kept).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(tok_err)
    }

    /// Text of one token, for display (partial UTF-8 shows as U+FFFD).
    pub fn token_text(&self, id: u32) -> String {
        self.inner
            .decode(&[id], false)
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| self.inner.id_to_token(id))
            .unwrap_or_else(|| format!("<{id}>"))
    }

    /// The prompt rendered through the model's chat template as one user turn, ready for the
    /// model's answer.
    pub fn apply_chat_template(&self, user: &str) -> Result<String> {
        let template = self
            .chat_template
            .as_deref()
            .ok_or_else(|| Error::invalid("this model has no chat template; run without --chat"))?;
        let mut env = minijinja::Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template("chat", template)
            .map_err(|e| Error::Tokenizer(format!("invalid chat template: {e}")))?;
        let text = |id: Option<u32>| {
            id.and_then(|i| self.inner.id_to_token(i))
                .unwrap_or_default()
        };
        env.get_template("chat")
            .and_then(|t| {
                t.render(minijinja::context! {
                    messages => vec![minijinja::context! { role => "user", content => user }],
                    add_generation_prompt => true,
                    bos_token => text(self.bos),
                    eos_token => text(self.eos.first().copied()),
                })
            })
            .map_err(|e| Error::Tokenizer(format!("chat template failed: {e}")))
    }

    /// The `tokenizer.json` document of this tokenizer.
    pub fn to_json(&self) -> Result<String> {
        self.inner.to_string(false).map_err(tok_err)
    }

    /// A `tokenizer_config.json` carrying the special tokens and the chat template.
    pub fn tokenizer_config_json(&self) -> Value {
        let text = |id: Option<u32>| id.and_then(|i| self.inner.id_to_token(i));
        json!({
            "add_bos_token": self.adds_bos,
            "add_eos_token": false,
            "bos_token": text(self.bos),
            "eos_token": text(self.eos.first().copied()),
            "chat_template": self.chat_template,
            "tokenizer_class": "PreTrainedTokenizerFast",
        })
    }
}

/// Builds a Hugging Face `tokenizer.json` document from the `tokenizer.ggml.*` keys.
fn gguf_tokenizer_json(md: &GgufMetadata) -> Result<Value> {
    let kind = md.str("tokenizer.ggml.model")?;
    let tokens: Vec<String> = md
        .array("tokenizer.ggml.tokens")?
        .iter()
        .map(|v| v.to_string().cloned())
        .collect::<candle_core::Result<_>>()
        .map_err(|e| Error::Tokenizer(format!("tokenizer.ggml.tokens: {e}")))?;
    let types: Vec<i64> = match md.metadata.get("tokenizer.ggml.token_type") {
        Some(v) => v
            .to_vec()
            .and_then(|a| a.iter().map(|x| x.to_i32().map(i64::from)).collect())
            .map_err(|e| Error::Tokenizer(format!("tokenizer.ggml.token_type: {e}")))?,
        None => vec![1; tokens.len()],
    };
    if types.len() != tokens.len() {
        return Err(Error::Tokenizer(format!(
            "{} token types for {} tokens",
            types.len(),
            tokens.len()
        )));
    }
    let add_bos = md
        .opt_bool("tokenizer.ggml.add_bos_token")?
        .unwrap_or(false);
    let bos = md.opt_u32("tokenizer.ggml.bos_token_id")?;
    let add_space_prefix = md
        .opt_bool("tokenizer.ggml.add_space_prefix")?
        .unwrap_or(false);

    let spm = match kind {
        "gpt2" => false,
        "llama" => true,
        other => {
            return Err(Error::Tokenizer(format!(
                "unsupported GGUF tokenizer model `{other}` (supported: gpt2, llama)"
            )))
        }
    };
    // SentencePiece user-defined pieces are stored with spaces by llama.cpp; the BPE model sees "▁".
    let tokens: Vec<String> = tokens
        .into_iter()
        .zip(&types)
        .map(|(t, &ty)| {
            if spm && ty == TOKEN_TYPE_USER_DEFINED {
                t.replace(' ', "▁")
            } else {
                t
            }
        })
        .collect();

    let mut vocab = serde_json::Map::with_capacity(tokens.len());
    for (i, t) in tokens.iter().enumerate() {
        // Keep the first id of a duplicated piece, as Hugging Face does.
        vocab.entry(t.clone()).or_insert(json!(i));
    }
    let added: Vec<Value> = tokens
        .iter()
        .zip(&types)
        .enumerate()
        .filter(|(_, (_, &ty))| ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_USER_DEFINED)
        .map(|(i, (t, &ty))| {
            json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": ty == TOKEN_TYPE_CONTROL})
        })
        .collect();

    let post_processor = match (add_bos, bos) {
        (true, Some(b)) => {
            let bos_text = tokens.get(b as usize).cloned().ok_or_else(|| {
                Error::Tokenizer(format!("bos_token_id {b} is outside the vocabulary"))
            })?;
            json!({
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos_text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos_text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos_text, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos_text.clone(): {"id": bos_text, "ids": [b], "tokens": [bos_text]}}
            })
        }
        _ => Value::Null,
    };

    let doc = if spm {
        let scores: Vec<f32> = md
            .array("tokenizer.ggml.scores")?
            .iter()
            .map(|v| v.to_f32())
            .collect::<candle_core::Result<_>>()
            .map_err(|e| Error::Tokenizer(format!("tokenizer.ggml.scores: {e}")))?;
        let merges = spm_merges(&tokens, &types, &scores);
        let unk = md
            .opt_u32("tokenizer.ggml.unknown_token_id")?
            .and_then(|i| tokens.get(i as usize).cloned());
        let replace = json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"});
        let normalizer = if add_space_prefix {
            json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, replace]})
        } else {
            replace
        };
        let mut decoders = vec![
            json!({"type": "Replace", "pattern": {"String": "▁"}, "content": " "}),
            json!({"type": "ByteFallback"}),
            json!({"type": "Fuse"}),
        ];
        if add_space_prefix {
            decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
        }
        json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": added,
            "normalizer": normalizer,
            "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
            "post_processor": post_processor,
            "decoder": {"type": "Sequence", "decoders": decoders},
            "model": {"type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                      "vocab": vocab, "merges": merges}
        })
    } else {
        let merges: Vec<Value> = md
            .array("tokenizer.ggml.merges")?
            .iter()
            .map(|v| {
                let s = v.to_string().map_err(|e| Error::Tokenizer(e.to_string()))?;
                let (a, b) = s
                    .split_once(' ')
                    .ok_or_else(|| Error::Tokenizer(format!("malformed merge `{s}`")))?;
                Ok(json!([a, b]))
            })
            .collect::<Result<_>>()?;
        json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": added,
            "normalizer": null,
            // Digits one by one, then GPT-2's byte-level split, as the SmolLM2/Llama 3 tokenizers do.
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true},
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]},
            "post_processor": post_processor,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                      "vocab": vocab, "merges": merges}
        })
    };
    Ok(doc)
}

/// Merges of a SentencePiece BPE vocabulary, recovered from pieces and scores the way Hugging
/// Face's converter does: every split of a piece into two pieces of the vocabulary is a merge,
/// ranked by the merged piece's score (user-defined pieces score 0), then by the lengths of the
/// two halves, longer first; ties keep vocabulary order.
fn spm_merges(tokens: &[String], types: &[i64], scores: &[f32]) -> Vec<Value> {
    let ids: HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    struct Merge {
        left: usize,
        right: usize,
        score: f32,
        len_left: usize,
        len_right: usize,
    }
    let mut merges: Vec<Merge> = Vec::new();
    for (i, piece) in tokens.iter().enumerate() {
        if ids.get(piece.as_str()) != Some(&i) {
            continue;
        }
        let score = if types[i] == TOKEN_TYPE_USER_DEFINED {
            0.0
        } else {
            scores.get(i).copied().unwrap_or(0.0)
        };
        let start = merges.len();
        for (cut, _) in piece.char_indices().skip(1) {
            let (l, r) = piece.split_at(cut);
            if let (Some(&li), Some(&ri)) = (ids.get(l), ids.get(r)) {
                merges.push(Merge {
                    left: li,
                    right: ri,
                    score,
                    len_left: l.chars().count(),
                    len_right: r.chars().count(),
                });
            }
        }
        merges[start..].sort_by_key(|m| (m.left, m.right));
    }
    // Stable sort, descending on (score, len_left, len_right).
    merges.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.len_left.cmp(&a.len_left))
            .then(b.len_right.cmp(&a.len_right))
    });
    merges
        .into_iter()
        .map(|m| json!([tokens[m.left], tokens[m.right]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spm_merges_rank_by_score_then_length() {
        let tokens: Vec<String> = ["a", "b", "c", "ab", "abc", "bc"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let types = vec![1; 6];
        // "bc" scores highest, then "ab", then "abc".
        let scores = vec![0.0, 0.0, 0.0, -1.0, -2.0, -0.5];
        let merges = spm_merges(&tokens, &types, &scores);
        let pairs: Vec<(String, String)> = merges
            .iter()
            .map(|m| (m[0].as_str().unwrap().into(), m[1].as_str().unwrap().into()))
            .collect();
        let p = |a: &str, b: &str| (a.to_string(), b.to_string());
        // abc splits as (a, bc) and (ab, c): same score; longer left half first.
        assert_eq!(
            pairs,
            vec![p("b", "c"), p("a", "b"), p("ab", "c"), p("a", "bc")]
        );
    }
}
