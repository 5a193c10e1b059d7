//! The paper's experiments as resumable, shardable runs.
//!
//! A [`Plan`] (experiment, model, scale, protocol, sizes) is resolved against the loaded model and
//! data into an [`ExperimentConfig`]; the config turns into a deterministic list of
//! [`WorkItem`]s (prompts with labels); [`run`] profiles the items not yet done, appending one
//! [`Record`] per item to `records.jsonl`; [`finish`] computes the result from the records and
//! writes `profiles.npy`, `index.json`, `result.json` and `report.html` ([`store`] describes the
//! folder). A killed run resumes where it stopped; `--shard i/n` runs a slice and [`merge`] joins
//! the slices. The CLI (`entropy-lens experiment …`) and the notebooks call these functions.
//!
//! | experiment | paper | result |
//! |---|---|---|
//! | [`validate`] | Table 1, Figure 1 | [`validate::ValidateResult`] |
//! | [`tasks`] | Table 2, Table 5, Figure 10 | [`tasks::TasksResult`] |
//! | [`formats`] | Table 3, Figures 5 and 9 | [`formats::FormatsResult`] |
//! | [`mmlu`] | Table 4 | [`mmlu::MmluResult`] |
//! | [`skip`] | Figure 6 | [`skip::SkipResult`] |
//! | [`family`] | Figures 3 and 4, Table 6 | [`family::FamilyResult`] |
//! | [`vit`] | Appendix A.4, Figure 8 | [`vit::VitResult`] |

use std::path::{Path, PathBuf};

use serde::Serialize;

pub mod choice;
pub mod common;
pub mod config;
pub mod data;
pub mod family;
pub mod formats;
pub mod mmlu;
pub mod paper;
pub mod progress;
pub mod report;
mod run;
pub mod skip;
pub mod store;
pub mod tasks;
pub mod validate;
pub mod vit;

pub use common::{FeatureLayout, Features, KnnScore, ProfileIndex};
pub use config::{ExperimentConfig, ExperimentKind, ExperimentSpec, Plan, Protocol, Scale};
pub use progress::ProgressMode;
pub use run::{default_out_dir, run, RunOptions, RunSummary};
pub use store::{OutputDir, Record, Shard, WorkItem};

use crate::analysis::Table;
use crate::error::{Error, Result};
use crate::plots::Chart;
use store::{write_atomic, write_npy, INDEX_FILE, PROFILES_FILE, REPORT_FILE, RESULT_FILE};

/// The deterministic work items of `cfg`, from its stories, topics or questions.
pub fn items(cfg: &ExperimentConfig, data: &data::LoadedData) -> Result<Vec<WorkItem>> {
    let texts = &data.records;
    match &cfg.spec {
        ExperimentSpec::Validate(s) => validate::items(s, texts),
        ExperimentSpec::Tasks(s) => tasks::items(s, cfg.protocol, cfg.seed, texts),
        ExperimentSpec::Formats(s) => formats::items(s, texts),
        ExperimentSpec::Mmlu(s) => mmlu::items(s, cfg.seed, &data.questions),
        ExperimentSpec::Skip(s) => skip::items(s, cfg.seed, &data.questions),
        ExperimentSpec::Family(s) => Ok(family::items(s)),
        ExperimentSpec::Vit(_) => Err(Error::invalid(
            "vit items come from its image set: run it with experiments::run (vit::run)",
        )),
    }
}

/// The lens statistics `cfg` needs.
pub fn stat_spec(cfg: &ExperimentConfig) -> Result<crate::lens::StatSpec> {
    match &cfg.spec {
        ExperimentSpec::Validate(_) => validate::stat_spec(cfg),
        ExperimentSpec::Tasks(_) => tasks::stat_spec(cfg),
        ExperimentSpec::Formats(s) => formats::stat_spec(cfg, s),
        // Shannon only.
        ExperimentSpec::Mmlu(_)
        | ExperimentSpec::Skip(_)
        | ExperimentSpec::Family(_)
        | ExperimentSpec::Vit(_) => cfg.stats.stat_spec(&[]),
    }
}

/// Fails before any work when the kNN settings cannot run on these items' classes (a class with
/// fewer members than folds, or k larger than a training fold).
pub fn check_feasible(cfg: &ExperimentConfig, items: &[WorkItem]) -> Result<()> {
    let (knn, ks) = match &cfg.spec {
        // Correctness labels are known only after the run; `finish` says when a class is too small.
        ExperimentSpec::Validate(_)
        | ExperimentSpec::Mmlu(_)
        | ExperimentSpec::Skip(_)
        | ExperimentSpec::Family(_)
        | ExperimentSpec::Vit(_) => return Ok(()),
        ExperimentSpec::Tasks(s) => (&s.knn, vec![s.knn.k, s.subset_k]),
        ExperimentSpec::Formats(s) => (&s.knn, vec![s.knn.k]),
    };
    let folds = knn.folds;
    let labels = crate::analysis::Labels::encode(
        &items.iter().map(|i| i.label.as_str()).collect::<Vec<_>>(),
    );
    let split = crate::analysis::crossval::stratified_kfold(
        &labels.encoded,
        labels.n_classes(),
        folds,
        knn.seed,
    )?;
    let smallest_train = items.len() - split.iter().map(Vec::len).max().unwrap_or(0);
    for k in ks {
        if k == 0 || k > smallest_train {
            return Err(Error::invalid(format!(
                "k = {k} neighbours cannot run on {} items in {folds} folds (a training fold has {smallest_train}); lower --k or --folds, or raise --n",
                items.len()
            )));
        }
    }
    Ok(())
}

/// The result of an experiment (the content of `result.json`), which shows itself as tables and
/// charts in a notebook.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Validate(validate::ValidateResult),
    Tasks(Box<tasks::TasksResult>),
    Formats(formats::FormatsResult),
    Mmlu(Box<mmlu::MmluResult>),
    Skip(Box<skip::SkipResult>),
    Family(Box<family::FamilyResult>),
    Vit(Box<vit::VitResult>),
}

impl Outcome {
    pub fn kind(&self) -> ExperimentKind {
        match self {
            Outcome::Validate(_) => ExperimentKind::Validate,
            Outcome::Tasks(_) => ExperimentKind::Tasks,
            Outcome::Formats(_) => ExperimentKind::Formats,
            Outcome::Mmlu(_) => ExperimentKind::Mmlu,
            Outcome::Skip(_) => ExperimentKind::Skip,
            Outcome::Family(_) => ExperimentKind::Family,
            Outcome::Vit(_) => ExperimentKind::Vit,
        }
    }

    /// Reads `result.json` of a finished experiment folder.
    pub fn load(dir: &Path) -> Result<Self> {
        let stored = OutputDir::open(dir)?.stored;
        let path = dir.join(RESULT_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::invalid(format!(
                "{} has no {RESULT_FILE} yet; finish the run (or merge its shards) first",
                dir.display()
            )),
            _ => Error::io(&path, e),
        })?;
        Self::from_json(stored.config.kind(), &text)
    }

    /// Parses the result of a `kind` experiment.
    pub fn from_json(kind: ExperimentKind, text: &str) -> Result<Self> {
        Ok(match kind {
            ExperimentKind::Validate => Outcome::Validate(serde_json::from_str(text)?),
            ExperimentKind::Tasks => Outcome::Tasks(serde_json::from_str(text)?),
            ExperimentKind::Formats => Outcome::Formats(serde_json::from_str(text)?),
            ExperimentKind::Mmlu => Outcome::Mmlu(serde_json::from_str(text)?),
            ExperimentKind::Skip => Outcome::Skip(serde_json::from_str(text)?),
            ExperimentKind::Family => Outcome::Family(serde_json::from_str(text)?),
            ExperimentKind::Vit => Outcome::Vit(serde_json::from_str(text)?),
        })
    }

    /// `result.json`'s bytes: pretty JSON with a final newline, nothing time-dependent.
    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(self)? + "\n")
    }

    /// Our numbers beside the paper's.
    pub fn comparison(&self) -> Vec<Table> {
        // One outcome of one kind: cannot fail.
        compare(std::slice::from_ref(self)).unwrap_or_default()
    }

    /// Tables that display themselves in a notebook: the comparison with the paper.
    pub fn comparison_view(&self) -> Tables {
        Tables(self.comparison())
    }

    /// Tables that display themselves in a notebook: the result's own tables.
    pub fn tables_view(&self) -> Tables {
        Tables(self.tables())
    }

    /// The result's own tables.
    pub fn tables(&self) -> Vec<Table> {
        match self {
            Outcome::Validate(r) => r.tables(),
            Outcome::Tasks(r) => r.tables(),
            Outcome::Formats(r) => r.tables(),
            Outcome::Mmlu(r) => r.tables(),
            Outcome::Skip(r) => r.tables(),
            Outcome::Family(r) => r.tables(),
            Outcome::Vit(r) => r.tables(),
        }
    }

    /// The paper's figures for this result.
    pub fn charts(&self) -> Result<Vec<Chart>> {
        match self {
            Outcome::Validate(r) => r.charts(),
            Outcome::Tasks(r) => r.charts(),
            Outcome::Formats(r) => r.charts(),
            Outcome::Mmlu(r) => r.charts(),
            Outcome::Skip(r) => r.charts(),
            Outcome::Family(r) => r.charts(),
            Outcome::Vit(r) => r.charts(),
        }
    }

    /// The comparison and result tables as HTML.
    pub fn tables_html(&self) -> String {
        self.comparison()
            .iter()
            .chain(&self.tables())
            .map(Table::to_html)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Renders in a Rust (evcxr) notebook: the tables, then the charts.
    pub fn evcxr_display(&self) {
        let mut html = self.tables_html();
        match self.charts() {
            Ok(charts) => charts
                .iter()
                .for_each(|c| html.push_str(&c.notebook_html())),
            Err(e) => html.push_str(&format!("<p>charts unavailable: {e}</p>")),
        }
        crate::display::evcxr_html(&html);
    }
}

/// Several runs of one experiment (e.g. one per model) beside the paper's numbers.
pub fn compare(outcomes: &[Outcome]) -> Result<Vec<Table>> {
    let Some(first) = outcomes.first() else {
        return Err(Error::invalid("nothing to compare"));
    };
    if let Some(o) = outcomes.iter().find(|o| o.kind() != first.kind()) {
        return Err(Error::invalid(format!(
            "cannot put {} and {} results in one table",
            first.kind().name(),
            o.kind().name()
        )));
    }
    Ok(match first {
        Outcome::Validate(_) => {
            let rs: Vec<&validate::ValidateResult> = outcomes
                .iter()
                .filter_map(|o| match o {
                    Outcome::Validate(r) => Some(r),
                    _ => None,
                })
                .collect();
            vec![validate::ValidateResult::comparison(&rs)]
        }
        Outcome::Tasks(_) => {
            let rs: Vec<&tasks::TasksResult> = outcomes
                .iter()
                .filter_map(|o| match o {
                    Outcome::Tasks(r) => Some(r.as_ref()),
                    _ => None,
                })
                .collect();
            tasks::TasksResult::comparison(&rs)
        }
        Outcome::Formats(_) => {
            let rs: Vec<&formats::FormatsResult> = outcomes
                .iter()
                .filter_map(|o| match o {
                    Outcome::Formats(r) => Some(r),
                    _ => None,
                })
                .collect();
            vec![formats::FormatsResult::comparison(&rs)]
        }
        Outcome::Mmlu(_) => {
            let rs: Vec<&mmlu::MmluResult> = outcomes
                .iter()
                .filter_map(|o| match o {
                    Outcome::Mmlu(r) => Some(r.as_ref()),
                    _ => None,
                })
                .collect();
            vec![mmlu::MmluResult::comparison(&rs)]
        }
        Outcome::Skip(_) => {
            let rs: Vec<&skip::SkipResult> = outcomes
                .iter()
                .filter_map(|o| match o {
                    Outcome::Skip(r) => Some(r.as_ref()),
                    _ => None,
                })
                .collect();
            vec![skip::SkipResult::comparison(&rs)]
        }
        Outcome::Family(_) => {
            let rs: Vec<&family::FamilyResult> = outcomes
                .iter()
                .filter_map(|o| match o {
                    Outcome::Family(r) => Some(r.as_ref()),
                    _ => None,
                })
                .collect();
            vec![family::FamilyResult::comparison(&rs)]
        }
        Outcome::Vit(_) => {
            let rs: Vec<&vit::VitResult> = outcomes
                .iter()
                .filter_map(|o| match o {
                    Outcome::Vit(r) => Some(r.as_ref()),
                    _ => None,
                })
                .collect();
            vec![vit::VitResult::comparison(&rs)]
        }
    })
}

/// A list of tables that shows itself (HTML in a notebook, aligned text elsewhere).
#[derive(Clone, Debug, Default)]
pub struct Tables(pub Vec<Table>);

impl Tables {
    pub fn to_html(&self) -> String {
        self.0
            .iter()
            .map(Table::to_html)
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn evcxr_display(&self) {
        crate::display::evcxr_html(&self.to_html());
    }
}

impl std::fmt::Display for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for t in &self.0 {
            writeln!(f, "{t}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for t in self.comparison().iter().chain(&self.tables()) {
            writeln!(f, "{t}")?;
        }
        Ok(())
    }
}

/// Computes the result of a complete experiment folder from its records and writes
/// `profiles.npy`, `index.json`, `result.json` and `report.html`. Refuses a shard or an
/// incomplete run.
pub fn finish(dir: &Path) -> Result<Outcome> {
    let out = OutputDir::open(dir)?;
    if let Some(shard) = out.stored.run.shard.filter(|s| !s.is_whole()) {
        return Err(Error::invalid(format!(
            "{} holds shard {shard} only; join the shards with `entropy-lens merge DIR... --out DIR`",
            dir.display()
        )));
    }
    let mut records = out.read_records()?;
    let n_items = out.stored.n_items;
    if records.len() != n_items {
        return Err(Error::invalid(format!(
            "{} has {} of {n_items} items; rerun the experiment with the same arguments to finish it",
            dir.display(),
            records.len()
        )));
    }
    records.sort_by_key(|r| r.index);
    let cfg = &out.stored.config;
    let (outcome, features) = match &cfg.spec {
        ExperimentSpec::Validate(_) => {
            let (r, f) = validate::finish(cfg, &records)?;
            (Outcome::Validate(r), f)
        }
        ExperimentSpec::Tasks(s) => {
            let (r, f) = tasks::finish(cfg, s, &records)?;
            (Outcome::Tasks(Box::new(r)), f)
        }
        ExperimentSpec::Formats(s) => {
            let (r, f) = formats::finish(cfg, s, &records)?;
            (Outcome::Formats(r), f)
        }
        ExperimentSpec::Mmlu(s) => {
            let (r, f) = mmlu::finish(cfg, s, &records)?;
            (Outcome::Mmlu(Box::new(r)), f)
        }
        ExperimentSpec::Skip(s) => {
            let (r, f) = skip::finish(cfg, s, &records)?;
            (Outcome::Skip(Box::new(r)), f)
        }
        ExperimentSpec::Family(s) => {
            let (r, f) = family::finish(cfg, s, &records)?;
            (Outcome::Family(Box::new(r)), f)
        }
        ExperimentSpec::Vit(s) => {
            let (r, f) = vit::finish(cfg, s, &records)?;
            (Outcome::Vit(Box::new(r)), f)
        }
    };
    write_npy(
        &out.file(PROFILES_FILE),
        features.n_rows(),
        features.layout.n_features(),
        &features.rows,
    )?;
    let index = serde_json::to_string_pretty(&ProfileIndex::from(&features))? + "\n";
    write_atomic(&out.file(INDEX_FILE), index.as_bytes())?;
    write_atomic(&out.file(RESULT_FILE), outcome.to_json()?.as_bytes())?;
    let html = report::report_html(&out.stored, &outcome)?;
    write_atomic(&out.file(REPORT_FILE), html.as_bytes())?;
    out.log(&format!(
        "finished: {} items → {RESULT_FILE}",
        records.len()
    ))?;
    Ok(outcome)
}

/// Joins shard folders of one experiment into `out` and finishes it. The shards must share one
/// configuration and hold every item exactly once; the result is byte for byte the one an
/// unsharded run gives.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Outcome> {
    let Some(first) = dirs.first() else {
        return Err(Error::invalid("merge needs at least one shard folder"));
    };
    let opened: Vec<OutputDir> = dirs
        .iter()
        .map(|d| OutputDir::open(d))
        .collect::<Result<_>>()?;
    let base = &opened[0].stored;
    for (d, o) in dirs.iter().zip(&opened).skip(1) {
        if o.stored.n_items != base.n_items || o.stored.items_sha256 != base.items_sha256 {
            return Err(Error::invalid(format!(
                "{} and {} hold different prompt lists ({} and {} items); only shards of one run can be merged",
                first.display(),
                d.display(),
                base.n_items,
                o.stored.n_items
            )));
        }
        if o.stored.config_sha256 != base.config_sha256 {
            return Err(Error::invalid(format!(
                "{} and {} come from different configurations ({}); only shards of one run can be merged",
                first.display(),
                d.display(),
                o.stored.config.differences(&base.config).into_iter().take(4).collect::<Vec<_>>().join("; ")
            )));
        }
    }
    let mut owner: Vec<Option<usize>> = vec![None; base.n_items];
    let mut records = Vec::with_capacity(base.n_items);
    for (k, o) in opened.iter().enumerate() {
        for r in o.read_records()? {
            if let Some(prev) = owner[r.index] {
                return Err(Error::invalid(format!(
                    "item {} ({}) is in both {} and {}: the shards overlap",
                    r.index,
                    r.id,
                    dirs[prev].display(),
                    dirs[k].display()
                )));
            }
            owner[r.index] = Some(k);
            records.push(r);
        }
    }
    let missing: Vec<usize> = (0..base.n_items).filter(|&i| owner[i].is_none()).collect();
    if let Some(&m) = missing.first() {
        let shards: Vec<String> = opened
            .iter()
            .filter_map(|o| o.stored.run.shard.map(|s| s.to_string()))
            .collect();
        let count = base.run.shard.map(|s| s.count).unwrap_or(1);
        return Err(Error::invalid(format!(
            "{} of {} items are missing (the first is item {m}, which belongs to shard {}/{count}); merged shards: {}; run the missing or unfinished shards first",
            missing.len(),
            base.n_items,
            m % count + 1,
            if shards.is_empty() { "none".into() } else { shards.join(", ") }
        )));
    }
    records.sort_by_key(|r| r.index);
    let run = store::RunContext {
        shard: None,
        ..base.run.clone()
    };
    let dest = OutputDir::prepare_with(
        out,
        &base.config,
        base.n_items,
        base.items_sha256.clone(),
        run,
    )?;
    let _lock = dest.lock()?;
    dest.write_records(&records)?;
    dest.log(&format!(
        "merged {} items from {}",
        records.len(),
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))?;
    finish(out)
}
