//! The paper's experiments as resumable, shardable runs, and the registry that finds them by name.
//!
//! An experiment is one file implementing [`Experiment`] and one line in the `experiments!` list
//! below. A [`Plan`] (experiment, model, scale, protocol, sizes) is resolved against the loaded
//! model and input into an [`ExperimentConfig`]; the config turns into a deterministic list of
//! [`WorkItem`]s; [`run`] measures the items not yet done, appending one [`Record`] per item to
//! `records.jsonl`; [`finish`] computes the result from the records and writes `profiles.npy`,
//! `index.json`, `result.json` and `report.html` ([`store`] describes the folder). A killed run
//! resumes where it stopped; `--shard i/n` runs a slice and [`merge`] joins the slices. The CLI
//! (`entropy-lens experiment …`) and the notebooks call these functions; an experiment of your own
//! runs through the same machinery with [`run_with`] and [`finish_with`] without being registered.
//!
//! | experiment | paper | result |
//! |---|---|---|
//! | [`validate`] | Table 1, Figure 1 | [`validate::ValidateResult`] |
//! | [`tasks`] | Tables 2 and 5, Figure 10 | [`tasks::TasksResult`] |
//! | [`formats`] | Table 3, Figures 5 and 9 | [`formats::FormatsResult`] |
//! | [`mmlu`] | Table 4 | [`mmlu::MmluResult`] |
//! | [`skip`] | Figure 6 | [`skip::SkipResult`] |
//! | [`family`] | Figures 3 and 4, Table 6 | [`family::FamilyResult`] |
//! | [`vit`] | Appendix A.4, Figure 8 | [`vit::VitResult`] |
//!
//! The modules: the contract ([`experiment`]: the trait, the instruments, a batch), what a run
//! is made of ([`plan`], [`settings`], [`inputs`], [`store`], [`outputs`], [`choice`],
//! [`several`]), the machinery (`run`, `finish`, [`report`], [`progress`], `entry`), and one file
//! per experiment. No module of this folder imports this file or one that imports it back.

use std::path::{Path, PathBuf};
use std::str::FromStr;

pub mod choice;
mod entry;
pub mod experiment;
mod finish;
pub mod inputs;
mod outcome;
pub mod outputs;
pub mod paired;
pub mod plan;
pub mod progress;
pub mod report;
mod run;
pub mod settings;
pub mod several;
pub mod store;

pub use experiment::{Batch, Cx, Experiment, Instrument, Models, NamedModel};
pub use finish::finish_with;
pub use outcome::{compare, Outcome, Tables};
pub use outputs::{FeatureLayout, Features, KnnScore, ProfileIndex};
pub use plan::{ExperimentKind, Plan, PlanOption};
pub use progress::ProgressMode;
pub use run::{default_out_dir, run_with, RunOptions, RunSummary};
pub use settings::{ExperimentConfig, Protocol, Scale, SpecRecord};
pub use store::{OutputDir, Record, Shard, WorkItem};

use crate::error::{Error, Result};
use entry::{Entry, Registered};

/// Declares each experiment's module, re-exports its type, and registers it.
macro_rules! experiments {
    ($($module:ident :: $name:ident),* $(,)?) => {
        $(pub mod $module; pub use $module::$name;)*

        /// Every registered experiment, in the order the CLI lists them.
        static REGISTRY: &[&dyn Registered] = &[$(&Entry::<$module::$name>::NEW),*];
    };
}

// A new experiment: its file in this folder, and its line here.
experiments! {
    validate::Validate,
    tasks::Tasks,
    formats::Formats,
    mmlu::Mmlu,
    skip::Skip,
    family::Family,
    vit::Vit,
}

/// Every registered experiment, in the order the CLI lists them.
pub fn kinds() -> Vec<ExperimentKind> {
    REGISTRY.iter().map(|e| e.kind()).collect()
}

/// Each registered experiment with where it stands in the paper and what it asks.
pub fn catalog() -> Vec<(ExperimentKind, &'static str, &'static str)> {
    REGISTRY
        .iter()
        .map(|e| (e.kind(), e.paper(), e.summary()))
        .collect()
}

/// The plan options `kind` reads beyond the common ones.
pub fn options(kind: ExperimentKind) -> Result<&'static [PlanOption]> {
    Ok(registered(kind.name())?.options())
}

fn registered(name: &str) -> Result<&'static dyn Registered> {
    REGISTRY
        .iter()
        .copied()
        .find(|e| e.kind().name() == name)
        .ok_or_else(|| {
            let names: Vec<&str> = REGISTRY.iter().map(|e| e.kind().name()).collect();
            Error::invalid(format!(
                "unknown experiment `{name}` (expected {})",
                match names.split_last() {
                    Some((last, rest)) if !rest.is_empty() =>
                        format!("{} or {last}", rest.join(", ")),
                    _ => names.join(", "),
                }
            ))
        })
}

impl FromStr for ExperimentKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(registered(s)?.kind())
    }
}

/// Runs (or resumes) the experiment `plan` names and, when the folder holds every item, finishes
/// it.
pub fn run(plan: &Plan, opts: &RunOptions) -> Result<RunSummary> {
    registered(plan.kind.name())?.run(plan, opts)
}

/// Computes the result of a complete experiment folder from its records and writes
/// `profiles.npy`, `index.json`, `result.json` and `report.html`. Refuses a shard or an
/// incomplete run.
pub fn finish(dir: &Path) -> Result<Outcome> {
    let stored = OutputDir::open(dir)?.stored;
    registered(stored.config.kind_name())?.finish(dir)
}

/// Joins shard folders of one experiment into `out` and finishes it. The shards must share one
/// configuration and hold every item exactly once; the result is byte for byte the one an
/// unsharded run gives.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Outcome> {
    finish::merge_shards(dirs, out)?;
    finish(out)
}

/// [`merge`] for an experiment of your own (not registered).
pub fn merge_with<E: Experiment>(dirs: &[PathBuf], out: &Path) -> Result<Outcome> {
    finish::merge_shards(dirs, out)?;
    finish_with::<E>(out)
}

impl Outcome {
    /// Reads `result.json` of a finished experiment folder.
    pub fn load(dir: &Path) -> Result<Self> {
        let stored = OutputDir::open(dir)?.stored;
        let path = dir.join(store::RESULT_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::invalid(format!(
                "{} has no {} yet; finish the run (or merge its shards) first",
                dir.display(),
                store::RESULT_FILE
            )),
            _ => Error::io(&path, e),
        })?;
        registered(stored.config.kind_name())?.parse(&text)
    }

    /// Parses the result of a `kind` experiment.
    pub fn from_json(kind: ExperimentKind, text: &str) -> Result<Self> {
        registered(kind.name())?.parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_names_list_the_registry() {
        for k in kinds() {
            assert_eq!(k.name().parse::<ExperimentKind>().unwrap(), k);
        }
        assert_eq!(kinds().len(), 7);
        assert_eq!(ExperimentKind::from(Tasks), "tasks".parse().unwrap());
        assert!("families"
            .parse::<ExperimentKind>()
            .unwrap_err()
            .to_string()
            .contains("validate, tasks, formats, mmlu, skip, family or vit"));
    }
}
