//! Everything the numbers of a run depend on: the [`ExperimentConfig`] that a plan resolves to,
//! hashed, stored in `config.json`, and compared on resume and merge.
//!
//! The experiment's own part is a [`SpecRecord`]: the experiment's name (`"kind"`) and its spec's
//! fields, in the order the spec's type serialises them. The record knows no experiment type, so
//! this module depends on none; an experiment reads its typed spec back with
//! [`SpecRecord::typed`].

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::lens::{alpha_key, parse_alpha, LensRecord, StatSpec};
use crate::profile::Aggregation;

/// Preset sizes: `smoke` runs in a minute or two on a laptop CPU; `paper` is the paper's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    Smoke,
    Paper,
}

impl FromStr for Scale {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "smoke" => Ok(Scale::Smoke),
            "paper" => Ok(Scale::Paper),
            o => Err(Error::invalid(format!(
                "unknown scale `{o}` (expected smoke or paper)"
            ))),
        }
    }
}

impl Scale {
    pub fn name(self) -> &'static str {
        match self {
            Scale::Smoke => "smoke",
            Scale::Paper => "paper",
        }
    }
}

/// Whose protocol to follow where the paper's text and the authors' released code differ
/// (`docs/results.md` lists every difference).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The paper's text (default).
    Paper,
    /// The authors' released code.
    Authors,
}

impl FromStr for Protocol {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "paper" => Ok(Protocol::Paper),
            "authors" => Ok(Protocol::Authors),
            o => Err(Error::invalid(format!(
                "unknown protocol `{o}` (expected paper or authors)"
            ))),
        }
    }
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Paper => "paper",
            Protocol::Authors => "authors",
        }
    }
}

/// The experiment-specific part of a configuration: `{"kind": name, …the spec's fields}`.
///
/// The fields keep the order of the spec's type (serde_json's `preserve_order`), so a config read
/// from `config.json` serialises back to the same bytes and the same sha256.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecRecord {
    kind: String,
    fields: Map<String, Value>,
}

impl SpecRecord {
    /// The record of `spec`, an experiment's spec (a struct with named fields).
    pub fn new<S: Serialize>(kind: &str, spec: &S) -> Result<Self> {
        match serde_json::to_value(spec)? {
            Value::Object(fields) if !fields.contains_key("kind") => Ok(Self {
                kind: kind.to_string(),
                fields,
            }),
            other => Err(Error::invalid(format!(
                "the spec of {kind} must serialise as a struct without a `kind` field, got {other}"
            ))),
        }
    }

    /// The experiment's name.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The spec's fields, in order.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// The typed spec back.
    pub fn typed<S: DeserializeOwned>(&self) -> Result<S> {
        serde_json::from_value(Value::Object(self.fields.clone())).map_err(|e| {
            Error::Data(format!(
                "the configuration of this {} run cannot be read by this version: {e}",
                self.kind
            ))
        })
    }
}

impl Serialize for SpecRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1 + self.fields.len()))?;
        map.serialize_entry("kind", &self.kind)?;
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for SpecRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let all = Map::<String, Value>::deserialize(deserializer)?;
        let kind = match all.get("kind") {
            Some(Value::String(k)) => k.clone(),
            _ => return Err(serde::de::Error::missing_field("kind")),
        };
        // Rebuilt rather than removed from: removal would reorder the remaining fields.
        let fields = all.into_iter().filter(|(k, _)| k != "kind").collect();
        Ok(Self { kind, fields })
    }
}

/// The model as far as the numbers depend on it (its path may differ between machines).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelIdentity {
    pub name: String,
    pub sha256: String,
    pub architecture: String,
    pub n_layers: usize,
    /// `q` (exact quantized), `f32`, `f16`, `bf16`.
    pub dtype: String,
}

impl ModelIdentity {
    /// The identity of a run over several models: it names the list (`N-models`, the sha256 of
    /// the comma-joined names), not one set of weights; each record keeps its own model's sha256.
    pub fn several(names: &[&str], architecture: &str, dtype: Option<&str>) -> Self {
        Self {
            name: format!("{}-models", names.len()),
            sha256: format!("{:x}", Sha256::digest(names.join(",").as_bytes())),
            architecture: architecture.into(),
            n_layers: 0,
            dtype: dtype.unwrap_or_default().to_string(),
        }
    }
}

/// The input data as far as the numbers depend on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataIdentity {
    /// `tinystories`, `topics`, `mmlu`, `blank`, `images`, `synthetic-images`.
    pub dataset: String,
    /// sha256 of the bytes the records were parsed from.
    pub sha256: String,
    /// Number of stories, topics, questions or images available.
    pub records: usize,
}

/// How tokens are generated. Experiments always generate exactly `tokens` tokens (EOS ignored) so
/// every profile has the same length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    pub chat: bool,
    pub add_bos: bool,
    pub ignore_eos: bool,
    /// 0: greedy. Sampling uses seed + item index, so an item's tokens do not depend on the others.
    pub temperature: f64,
    /// Nucleus mass of sampled generation.
    pub sample_top_p: Option<f64>,
}

impl Generation {
    /// No text generated (image classifiers).
    pub fn none() -> Self {
        Self {
            chat: false,
            add_bos: false,
            ignore_eos: false,
            temperature: 0.0,
            sample_top_p: None,
        }
    }
}

/// Lens settings shared by every experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatSettings {
    /// Probability mass of the top-p candidate sets.
    pub top_p: f64,
    pub support_threshold: f64,
    /// KL(final ‖ block) measured for every profiled token (absent: not measured, so the
    /// configurations of earlier runs keep their bytes and hashes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kl_to_final: bool,
}

impl StatSettings {
    /// A lens spec with these settings and the given Rényi orders (no top-k).
    pub fn stat_spec(&self, alphas: &[f64]) -> Result<StatSpec> {
        let spec = StatSpec {
            alphas: alphas.to_vec(),
            support_threshold: self.support_threshold,
            top_p: self.top_p,
            top_p_ids: false,
            top_k: 0,
            top_p_overlap: false,
            kl_to_final: self.kl_to_final,
            ..StatSpec::default()
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// Everything the numbers of a run depend on. Stored in `config.json` with its sha256; a resume
/// or a merge with a different configuration is refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentConfig {
    pub spec: SpecRecord,
    pub protocol: Protocol,
    pub scale: Scale,
    pub model: ModelIdentity,
    /// Device kind (`cpu`, `cuda`): numbers differ slightly between kinds, not between GPUs.
    pub device: String,
    pub data: DataIdentity,
    pub seed: u64,
    pub generation: Generation,
    pub stats: StatSettings,
    pub crate_version: String,
    /// A lens other than the logit lens, by the sha256 of its parameters (absent: the logit lens,
    /// so the configurations of logit-lens runs keep their bytes and hashes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lens: Option<LensRecord>,
}

impl ExperimentConfig {
    /// The experiment's name.
    pub fn kind_name(&self) -> &str {
        self.spec.kind()
    }

    /// sha256 of the canonical JSON form.
    pub fn sha256(&self) -> Result<String> {
        let json = serde_json::to_string(self)?;
        Ok(Sha256::digest(json.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect())
    }

    /// The first differences from `other`, as `path: ours ≠ theirs` lines (for error messages).
    pub fn differences(&self, other: &ExperimentConfig) -> Vec<String> {
        let (a, b) = match (serde_json::to_value(self), serde_json::to_value(other)) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return vec!["(configurations cannot be compared)".into()],
        };
        let mut out = Vec::new();
        diff_values("", &a, &b, &mut out);
        out
    }
}

fn diff_values(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff_values(&p, u, v, out),
                    (u, v) => out.push(format!(
                        "{p}: {} ≠ {}",
                        u.map(|u| u.to_string()).unwrap_or_else(|| "absent".into()),
                        v.map(|v| v.to_string()).unwrap_or_else(|| "absent".into())
                    )),
                }
            }
        }
        _ if a != b => out.push(format!("{path}: {a} ≠ {b}")),
        _ => {}
    }
}

/// Rényi orders as the string keys stored in configs (JSON has no infinity).
pub fn alpha_keys(alphas: &[f64]) -> Vec<String> {
    alphas.iter().map(|&a| alpha_key(a)).collect()
}

/// The orders back from their keys.
pub fn parse_alpha_keys(keys: &[String]) -> Result<Vec<f64>> {
    keys.iter().map(|k| parse_alpha(k)).collect()
}

/// `Concat` (the paper's text) or `Mean` over tokens (the authors' code for Tables 2 and 4).
pub fn token_aggregation(protocol: Protocol) -> Aggregation {
    match protocol {
        Protocol::Paper => Aggregation::Concat,
        Protocol::Authors => Aggregation::Mean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Inner {
        zeta: f64,
        alpha: Option<u64>,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Spec {
        per_task: usize,
        knn: Inner,
        aggregation: Aggregation,
        fractions: Vec<f64>,
    }

    #[test]
    fn spec_records_keep_field_order_and_round_trip_to_the_same_bytes() {
        let spec = Spec {
            per_task: 12,
            knn: Inner {
                zeta: 0.1,
                alpha: None,
            },
            aggregation: Aggregation::Windows(8),
            fractions: vec![0.1, 0.2, 0.30000000000000004],
        };
        let rec = SpecRecord::new("tasks", &spec).unwrap();
        let text = serde_json::to_string(&rec).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"tasks","per_task":12,"knn":{"zeta":0.1,"alpha":null},"aggregation":{"windows":8},"fractions":[0.1,0.2,0.30000000000000004]}"#
        );
        let back: SpecRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(back.typed::<Spec>().unwrap(), spec);
        assert_eq!(back.kind(), "tasks");
        assert!(serde_json::from_str::<SpecRecord>(r#"{"per_task":1}"#).is_err());
        assert!(SpecRecord::new("x", &3).is_err());
    }

    #[test]
    fn scales_and_protocols_parse() {
        assert_eq!("authors".parse::<Protocol>().unwrap(), Protocol::Authors);
        assert!("large".parse::<Scale>().is_err());
        assert!("mine"
            .parse::<Protocol>()
            .unwrap_err()
            .to_string()
            .contains("paper or authors"));
    }

    #[test]
    fn differences_name_the_changed_fields() {
        let a = serde_json::json!({"spec": {"kind": "tasks", "per_task": 12}, "seed": 42});
        let b = serde_json::json!({"spec": {"kind": "tasks", "per_task": 30}, "seed": 42});
        let mut out = Vec::new();
        diff_values("", &a, &b, &mut out);
        assert_eq!(out, vec!["spec.per_task: 12 ≠ 30"]);
    }
}
