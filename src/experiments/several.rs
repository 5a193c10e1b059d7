//! What the experiments over several models (`family`, `vit`) share: the model list of `--models`,
//! the names models go by, model-major work items labelled by model, and the per-model summaries
//! of their results (mean ± std bands, per-sample standardisation, kNN macro F1 over random
//! splits). Loading the models one after another, resuming and checking that a model's weights did
//! not change is the run loop's ([`super::experiment::Models::Several`]).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use ndarray::Array2;

use super::experiment::{Models, NamedModel};
use super::plan::Plan;
use super::store::{Record, WorkItem};
use crate::analysis::{repeated_split_f1, Labels};
use crate::error::{Error, Result};
use crate::plots::Band;

/// Points of the relative-depth axis the profiles are interpolated to.
pub const DEPTH_POINTS: usize = 32;

/// The model list of `--models` (`paper` expands to `paper_models`; names may not repeat or be
/// empty), else `default()`.
pub fn model_sources(
    plan: &Plan,
    paper_models: &[String],
    default: impl FnOnce() -> Result<Vec<String>>,
) -> Result<Vec<String>> {
    let Some(list) = &plan.models else {
        return default();
    };
    let mut out = Vec::new();
    for m in list {
        if m.trim().is_empty() {
            return Err(Error::invalid(
                "--models holds an empty name (a stray comma?)",
            ));
        }
        if m == "paper" {
            out.extend(paper_models.iter().cloned());
        } else {
            out.push(m.clone());
        }
    }
    let mut seen = HashSet::new();
    if let Some(dup) = out.iter().find(|m| !seen.insert(m.as_str())) {
        return Err(Error::invalid(format!(
            "model {dup} is listed twice in --models"
        )));
    }
    if out.is_empty() {
        return Err(Error::invalid("--models names no model"));
    }
    Ok(out)
}

/// The name a model given as `source` goes by: a Hub id's repository name (without a
/// `@revision`), a file's stem, a folder's name.
pub fn model_name(source: &str) -> String {
    let path = match source.split_once('@') {
        Some((id, rev)) if !Path::new(source).exists() && !rev.is_empty() => id,
        _ => source,
    };
    PathBuf::from(path.trim_end_matches('/'))
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| source.to_string())
}

/// The models of a run: `names[i]` loads from `sources[i]`; two models may not share a name.
pub fn named_models(names: &[String], sources: &[String]) -> Result<Models> {
    let mut seen = HashSet::new();
    if let Some(m) = names.iter().find(|m| !seen.insert(m.as_str())) {
        return Err(Error::invalid(format!(
            "two models of --models are both named {m}; give them distinct file or folder names"
        )));
    }
    Ok(Models::Several(
        names
            .iter()
            .zip(sources)
            .map(|(name, source)| NamedModel {
                name: name.clone(),
                source: source.clone(),
            })
            .collect(),
    ))
}

/// One item of one model: its id within the model, its prompt, and extra meta.
pub struct ModelItem {
    pub id: String,
    pub prompt: String,
    pub meta: BTreeMap<String, serde_json::Value>,
}

/// Model-major items: for each model, `per_model(model)`'s items, labelled with the model's name
/// (`meta.model`; the id is `<model>/<id>`).
pub fn items(models: &[String], per_model: impl Fn(&str) -> Vec<ModelItem>) -> Vec<WorkItem> {
    let mut out = Vec::new();
    for m in models {
        for it in per_model(m) {
            let mut meta = it.meta;
            meta.insert("model".into(), m.clone().into());
            out.push(WorkItem {
                index: out.len(),
                id: format!("{m}/{}", it.id),
                label: m.clone(),
                prompt: it.prompt,
                meta,
            });
        }
    }
    out
}

/// Records labelled with their model's family instead of the model (the kNN's classes).
pub fn labelled(records: Vec<Record>, family: &str) -> Vec<Record> {
    records
        .into_iter()
        .map(|mut r| {
            r.label = family.to_string();
            r
        })
        .collect()
}

/// Mean and population standard deviation of each column of `rows`.
pub fn mean_std_rows(rows: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
    let n = rows.len().max(1) as f64;
    let d = rows.first().map(Vec::len).unwrap_or(0);
    let mean: Vec<f64> = (0..d)
        .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n)
        .collect();
    let std = (0..d)
        .map(|j| (rows.iter().map(|r| (r[j] - mean[j]).powi(2)).sum::<f64>() / n).sqrt())
        .collect();
    (mean, std)
}

/// A row standardised on its own (zero mean, unit population std; all zeros when constant).
pub fn zscore(row: &[f64]) -> Vec<f64> {
    let n = row.len().max(1) as f64;
    let m = row.iter().sum::<f64>() / n;
    let sd = (row.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n).sqrt();
    row.iter()
        .map(|v| if sd > 0.0 { (v - m) / sd } else { 0.0 })
        .collect()
}

/// Mean ± std bands of each model's rows, in the models' order (models without rows left out).
pub fn bands(models: &[String], rows: &BTreeMap<String, Vec<Vec<f64>>>) -> Vec<Band> {
    models
        .iter()
        .filter_map(|m| rows.get(m.as_str()).map(|r| (m, r)))
        .map(|(m, r)| {
            let (mean, std) = mean_std_rows(r);
            Band {
                name: m.clone(),
                mean,
                std,
                n: r.len(),
            }
        })
        .collect()
}

/// Macro F1 (mean, std) of a kNN over `splits` random stratified 50/50 splits; a note instead
/// when there is one class only or the split cannot run.
pub fn f1(
    x: &Array2<f64>,
    labels: &[String],
    (k, splits): (usize, usize),
    seed: u64,
    what: &str,
    notes: &mut Vec<String>,
) -> Result<(Option<f64>, Option<f64>)> {
    let l = Labels::encode(labels);
    if l.n_classes() < 2 {
        notes.push(format!(
            "{what} F1: only one {what} ({}), nothing to classify",
            l.classes.first().map(String::as_str).unwrap_or("none")
        ));
        return Ok((None, None));
    }
    match repeated_split_f1(x.view(), &l, k, splits, 0.5, seed, false) {
        Ok(r) => Ok((Some(r.f1_mean), Some(r.f1_std))),
        Err(e) => {
            notes.push(format!("{what} F1 not computed: {e}"));
            Ok((None, None))
        }
    }
}

/// `rows` (each of length `d`) as a matrix.
pub fn matrix(rows: &[Vec<f64>], d: usize) -> Result<Array2<f64>> {
    Array2::from_shape_vec((rows.len(), d), rows.concat()).map_err(|e| Error::Data(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_and_lists() {
        assert_eq!(
            model_name("google/vit-base-patch16-224"),
            "vit-base-patch16-224"
        );
        assert_eq!(model_name("owner/deit@refs/pr/3"), "deit");
        assert_eq!(model_name("/m/SmolLM2.Q4_1.gguf"), "SmolLM2.Q4_1");
        assert_eq!(model_name("runs/folder/"), "folder");
        let mut plan = Plan::new(super::super::plan::ExperimentKind::named("family"));
        plan.models = Some(vec!["a".into(), "paper".into()]);
        let paper = vec!["p1".to_string(), "p2".to_string()];
        assert_eq!(
            model_sources(&plan, &paper, || Ok(vec![])).unwrap(),
            ["a", "p1", "p2"]
        );
        plan.models = Some(vec!["a".into(), "a".into()]);
        assert!(model_sources(&plan, &paper, || Ok(vec![]))
            .unwrap_err()
            .to_string()
            .contains("twice"));
        plan.models = Some(vec!["".into()]);
        assert!(model_sources(&plan, &paper, || Ok(vec![])).is_err());
        assert!(named_models(&["x".into(), "x".into()], &["a".into(), "b".into()]).is_err());
    }

    #[test]
    fn items_are_model_major_and_labelled_by_model() {
        let items = items(&["m1".into(), "m2".into()], |_| {
            (0..2)
                .map(|s| ModelItem {
                    id: format!("s{s}"),
                    prompt: String::new(),
                    meta: BTreeMap::from([("sample".into(), s.into())]),
                })
                .collect()
        });
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["m1/s0", "m1/s1", "m2/s0", "m2/s1"]);
        assert_eq!(items[3].index, 3);
        assert_eq!(items[2].meta_str("model"), "m2");
        assert_eq!(items[2].label, "m2");
    }

    #[test]
    fn zscore_and_bands() {
        assert_eq!(zscore(&[1.0, 1.0]), [0.0, 0.0]);
        let z = zscore(&[1.0, 3.0]);
        assert_eq!(z, [-1.0, 1.0]);
        let (m, s) = mean_std_rows(&[vec![1.0, 2.0], vec![3.0, 2.0]]);
        assert_eq!((m, s), (vec![2.0, 2.0], vec![1.0, 0.0]));
    }
}
