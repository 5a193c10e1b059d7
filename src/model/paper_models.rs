//! The models of the paper, by short name: Hub id, family and size. `--model gpt2-medium`
//! resolves a short name to its Hub repository; `entropy-lens models` lists them.
//!
//! The paper compares 12 decoder-only models from the GPT-2, Gemma, Llama and Qwen families
//! (§5.1; it does not list the Qwen sizes: the Qwen2.5 sizes up to its stated 9B are registered
//! here) and adds Phi-3 in the task experiment (Table 2).

use serde::Serialize;

use super::Architecture;

/// One registered model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RegisteredModel {
    /// Short name (`gpt2-medium`, `gemma-2-2b-it`).
    pub name: &'static str,
    /// Hugging Face Hub repository.
    pub hub_id: &'static str,
    pub architecture: Architecture,
    /// Parameters, in billions (embedding included), as the model cards state them.
    pub params_b: f64,
    /// Instruction-tuned.
    pub instruct: bool,
    /// The Hub asks for a licence agreement (set `HF_TOKEN`).
    pub gated: bool,
}

const fn m(
    name: &'static str,
    hub_id: &'static str,
    architecture: Architecture,
    params_b: f64,
    instruct: bool,
    gated: bool,
) -> RegisteredModel {
    RegisteredModel {
        name,
        hub_id,
        architecture,
        params_b,
        instruct,
        gated,
    }
}

use Architecture::{Gemma2, Gpt2, Llama, Phi3, Qwen2};

/// The paper's models.
pub static PAPER_MODELS: &[RegisteredModel] = &[
    m("gpt2", "openai-community/gpt2", Gpt2, 0.124, false, false),
    m(
        "gpt2-medium",
        "openai-community/gpt2-medium",
        Gpt2,
        0.355,
        false,
        false,
    ),
    m(
        "gpt2-large",
        "openai-community/gpt2-large",
        Gpt2,
        0.774,
        false,
        false,
    ),
    m(
        "gpt2-xl",
        "openai-community/gpt2-xl",
        Gpt2,
        1.5,
        false,
        false,
    ),
    m("gemma-2-2b", "google/gemma-2-2b", Gemma2, 2.6, false, true),
    m(
        "gemma-2-2b-it",
        "google/gemma-2-2b-it",
        Gemma2,
        2.6,
        true,
        true,
    ),
    m("gemma-2-9b", "google/gemma-2-9b", Gemma2, 9.2, false, true),
    m(
        "gemma-2-9b-it",
        "google/gemma-2-9b-it",
        Gemma2,
        9.2,
        true,
        true,
    ),
    m(
        "llama-3.2-1b",
        "meta-llama/Llama-3.2-1B",
        Llama,
        1.24,
        false,
        true,
    ),
    m(
        "llama-3.2-1b-instruct",
        "meta-llama/Llama-3.2-1B-Instruct",
        Llama,
        1.24,
        true,
        true,
    ),
    m(
        "llama-3.2-3b",
        "meta-llama/Llama-3.2-3B",
        Llama,
        3.21,
        false,
        true,
    ),
    m(
        "llama-3.2-3b-instruct",
        "meta-llama/Llama-3.2-3B-Instruct",
        Llama,
        3.21,
        true,
        true,
    ),
    m(
        "llama-3.1-8b",
        "meta-llama/Llama-3.1-8B",
        Llama,
        8.03,
        false,
        true,
    ),
    m(
        "llama-3.1-8b-instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        Llama,
        8.03,
        true,
        true,
    ),
    m(
        "qwen2.5-0.5b",
        "Qwen/Qwen2.5-0.5B",
        Qwen2,
        0.49,
        false,
        false,
    ),
    m(
        "qwen2.5-1.5b",
        "Qwen/Qwen2.5-1.5B",
        Qwen2,
        1.54,
        false,
        false,
    ),
    m("qwen2.5-3b", "Qwen/Qwen2.5-3B", Qwen2, 3.09, false, false),
    m("qwen2.5-7b", "Qwen/Qwen2.5-7B", Qwen2, 7.62, false, false),
    m(
        "phi-3-mini-4k-instruct",
        "microsoft/Phi-3-mini-4k-instruct",
        Phi3,
        3.82,
        true,
        false,
    ),
];

/// A registered model by short name (case-insensitive) or Hub id.
pub fn lookup(name: &str) -> Option<&'static RegisteredModel> {
    PAPER_MODELS
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name) || m.hub_id == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_resolve() {
        for m in PAPER_MODELS {
            assert_eq!(lookup(m.name), Some(m));
            assert_eq!(lookup(m.hub_id), Some(m));
            assert_eq!(PAPER_MODELS.iter().filter(|n| n.name == m.name).count(), 1);
            assert!(m.hub_id.split('/').count() == 2);
        }
        assert_eq!(lookup("GPT2-XL").unwrap().architecture, Architecture::Gpt2);
        assert!(lookup("gpt5").is_none());
    }
}
