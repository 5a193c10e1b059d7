//! The contract an experiment implements. The machinery — configuration and its hash, work items,
//! the output folder, resume, shards, merge, batching, progress, `result.json`, `profiles.npy`,
//! `report.html` — knows only this trait; an experiment is one file that implements it and one line
//! in the registry (`experiments!` in `mod.rs`). `docs/experiments.md` ("Adding an experiment")
//! walks through the smallest one.
//!
//! A run goes: [`Experiment::spec`] (the plan's sizes at its scale and protocol: serialised into
//! `config.json` and hashed) → [`Experiment::input`] (stories, topics, questions, images) →
//! [`Experiment::models`] (one model, or several loaded one after another) →
//! [`Experiment::items`] (the deterministic work list) → per model, [`Experiment::measure`] on
//! fixed batches of items, one [`Record`] each, appended to `records.jsonl` → when every item is
//! recorded, [`Experiment::finish`] computes the result and the feature rows from the records, and
//! the result shows itself ([`Experiment::tables`], [`Experiment::charts`], and
//! [`Experiment::comparison`] beside the paper's numbers).

use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::inputs::{Input, Loaded};
use super::outputs::Features;
use super::plan::{ExperimentKind, Plan, PlanOption};
use super::settings::{ExperimentConfig, Generation, ModelIdentity, StatSettings};
use super::store::{OutputDir, Record, WorkItem};
use crate::analysis::Table;
use crate::error::{Error, Result};
use crate::lens::{LensKind, StatSpec};
use crate::model::vision::{is_vision_source, load_vision};
use crate::model::{load, LoadOptions, ModelSource};
use crate::plots::Chart;
use crate::runner::{device_name, ImageProfiler, ProfileRequest, Profiler, Sampling};

/// One experiment of the paper (or of yours): what it runs, how it measures, how it concludes and
/// how it shows itself.
pub trait Experiment: Sized + 'static {
    /// Its name on the command line, in `config.json` (`"kind"`) and in output folder names.
    const NAME: &'static str;
    /// Where it stands in the paper (`"Table 1, Figure 1"`).
    const PAPER: &'static str;
    /// What it asks, in one line.
    const SUMMARY: &'static str;
    /// The plan options it reads beyond the common ones; a plan setting any other is refused.
    /// [`PlanOption::Models`] makes it an experiment over several models.
    const OPTIONS: &'static [PlanOption] = &[];

    /// Its settings, resolved from the plan (sizes, kNN, orders…): stored in `config.json` and
    /// hashed, so a resume or merge with other settings is refused. Serialised as a struct.
    type Spec: Serialize + DeserializeOwned + Clone + Debug + PartialEq + 'static;
    /// `result.json`: deterministic (nothing time-dependent), computed from the records alone.
    type Result: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static;
    /// What it runs on.
    type Input: Input;
    /// What measures an item: a text [`Profiler`] or an [`ImageProfiler`].
    type Instrument: Instrument;

    /// The spec of `plan` at its scale and protocol; bad sizes fail here, before anything loads.
    fn spec(plan: &Plan) -> Result<Self::Spec>;

    /// Tokens generated per item (0: the prompt's last position only, or an image).
    fn tokens(spec: &Self::Spec) -> usize;

    /// The deterministic work list (`index` = position in the list; ids stable and readable).
    fn items(
        cfg: &ExperimentConfig,
        spec: &Self::Spec,
        input: &Self::Input,
    ) -> Result<Vec<WorkItem>>;

    /// The result and the feature rows (`profiles.npy`) from every record, sorted by item.
    fn finish(
        cfg: &ExperimentConfig,
        spec: &Self::Spec,
        records: &[Record],
    ) -> Result<(Self::Result, Features)>;

    /// Results of several runs (e.g. one per model) beside the paper's numbers.
    fn comparison(results: &[&Self::Result]) -> Vec<Table>;

    /// The result's own tables.
    fn tables(result: &Self::Result) -> Vec<Table>;

    /// The paper's figures for the result.
    fn charts(result: &Self::Result) -> Result<Vec<Chart>>;

    /// Loads the input (default: [`Input::load`] from `--data` or the default source).
    fn input(plan: &Plan, _spec: &Self::Spec) -> Result<Loaded<Self::Input>> {
        Self::Input::load(plan)
    }

    /// The model or models to run on (default: `--model`, else the default model).
    fn models(plan: &Plan, _spec: &Self::Spec) -> Result<Models> {
        Models::one(plan)
    }

    /// How tokens are generated (default: greedy unless `--temperature`, EOS ignored).
    fn generation(plan: &Plan, _spec: &Self::Spec) -> Result<Generation> {
        plan.generation(0.0)
    }

    /// The lens statistics to measure (default: Shannon, top-p counts).
    fn stat_spec(stats: &StatSettings, _spec: &Self::Spec) -> Result<StatSpec> {
        stats.stat_spec(&[])
    }

    /// Fails before any work when the items cannot give a result (e.g. k larger than a fold).
    fn check_feasible(
        _cfg: &ExperimentConfig,
        _spec: &Self::Spec,
        _items: &[WorkItem],
    ) -> Result<()> {
        Ok(())
    }

    /// Called once per loaded model before its first batch (checks, a line in `run.log`).
    fn prepare(_cx: &Cx<'_, Self>, _instrument: &mut Self::Instrument) -> Result<()> {
        Ok(())
    }

    /// Measures one batch: a record for each of its items not yet done ([`Batch::todo`]). The
    /// default profiles every item of the batch the instrument's way (a text item's
    /// [`Cx::request`], an image item's image) and keeps the records of the items to do.
    fn measure(
        cx: &Cx<'_, Self>,
        instrument: &mut Self::Instrument,
        batch: &Batch<'_>,
    ) -> Result<Vec<Record>> {
        Self::Instrument::measure_batch(cx, instrument, batch)
    }
}

impl<E: Experiment> From<E> for ExperimentKind {
    fn from(_: E) -> Self {
        ExperimentKind::named(E::NAME)
    }
}

/// The model or models a run covers.
#[derive(Clone, Debug, PartialEq)]
pub enum Models {
    /// One model (a GGUF file, a Hugging Face folder or a Hub id); the configuration holds its
    /// identity, so it is loaded before the configuration is made.
    One(ModelSource),
    /// Several models, loaded one after another; the configuration names the list, each record
    /// keeps its model's sha256, and every item carries its model's name in `meta.model`.
    Several(Vec<NamedModel>),
}

/// A model of a several-model run: the name its items and results use, and where it loads from.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedModel {
    pub name: String,
    pub source: String,
}

impl Models {
    /// `--model`, else `$ENTROPY_LENS_MODEL`, the cached offline SmolLM2 or its Hub id.
    pub fn one(plan: &Plan) -> Result<Self> {
        Ok(Models::One(crate::fetch::model_source_or_default(
            plan.model.as_deref(),
        )?))
    }
}

/// What an experiment measures with. Implemented by [`Profiler`] (language models) and
/// [`ImageProfiler`] (ViT/DeiT classifiers).
pub trait Instrument: Sized {
    /// The `architecture` of a several-model run's identity (`several`, `vision`).
    const SEVERAL: &'static str;

    /// Loads `source` to measure `spec`.
    fn load(source: &ModelSource, opts: &LoadOptions, spec: StatSpec) -> Result<Self>;

    /// Fails when `source` cannot be one of these instruments, without loading it (a run over
    /// several models checks every one before any work).
    fn check_source(source: &str) -> Result<()>;

    /// The model as the numbers depend on it.
    fn identity(&self) -> ModelIdentity;

    /// The device, as run contexts name it (`cpu`, `cuda:1`).
    fn device_name(&self) -> String;

    /// Items run together.
    fn set_batch_size(&mut self, n: usize) -> Result<()>;

    /// Reads with `lens` (checked against the model). Image classifiers have the logit lens only.
    fn set_lens(&mut self, lens: &LensKind) -> Result<()> {
        match lens {
            LensKind::Logit => Ok(()),
            LensKind::Tuned(_) => Err(Error::invalid(
                "a tuned lens reads a language model's residual stream; image classifiers are read through their own head (drop --lens)",
            )),
        }
    }

    /// Fails before any work on an item that cannot run (e.g. a prompt longer than the context).
    fn check_items<E: Experiment<Instrument = Self>>(
        _cx: &Cx<'_, E>,
        _instrument: &Self,
        _items: &[&WorkItem],
    ) -> Result<()> {
        Ok(())
    }

    /// The default measurement of a batch (see [`Experiment::measure`]).
    fn measure_batch<E: Experiment<Instrument = Self>>(
        cx: &Cx<'_, E>,
        instrument: &mut Self,
        batch: &Batch<'_>,
    ) -> Result<Vec<Record>>;
}

impl Instrument for Profiler {
    const SEVERAL: &'static str = "several";

    fn load(source: &ModelSource, opts: &LoadOptions, spec: StatSpec) -> Result<Self> {
        Profiler::new(load(source, opts)?, spec)
    }

    fn check_source(source: &str) -> Result<()> {
        crate::fetch::model_source(source).map(|_| ())
    }

    fn identity(&self) -> ModelIdentity {
        let info = self.model.info();
        ModelIdentity {
            name: info.name.clone(),
            sha256: info.sha256.clone(),
            architecture: info.architecture.as_str().to_string(),
            n_layers: info.n_layers,
            dtype: info.dtype.as_str().to_string(),
        }
    }

    fn device_name(&self) -> String {
        device_name(self.model.device())
    }

    fn set_batch_size(&mut self, n: usize) -> Result<()> {
        Profiler::set_batch_size(self, n)
    }

    fn set_lens(&mut self, lens: &LensKind) -> Result<()> {
        Profiler::set_lens(self, lens.clone())
    }

    fn check_items<E: Experiment<Instrument = Self>>(
        cx: &Cx<'_, E>,
        instrument: &Self,
        items: &[&WorkItem],
    ) -> Result<()> {
        for item in items {
            instrument
                .checked_prompt_ids(&cx.request(item))
                .map_err(|e| Error::invalid(format!("item {} ({}): {e}", item.index, item.id)))?;
        }
        Ok(())
    }

    /// Every item's [`Cx::request`] as one left-padded batch.
    fn measure_batch<E: Experiment<Instrument = Self>>(
        cx: &Cx<'_, E>,
        instrument: &mut Self,
        batch: &Batch<'_>,
    ) -> Result<Vec<Record>> {
        let reqs: Vec<ProfileRequest> = batch.items().iter().map(|i| cx.request(i)).collect();
        let profiles = instrument.run_batch(&reqs)?;
        Ok(batch.keep_todo(batch.items().iter().zip(profiles), Record::new))
    }
}

impl Instrument for ImageProfiler {
    const SEVERAL: &'static str = "vision";

    fn load(source: &ModelSource, opts: &LoadOptions, spec: StatSpec) -> Result<Self> {
        ImageProfiler::new(load_vision(source, opts)?, spec)
    }

    /// A folder in the ViT/DeiT layout, or a Hub repository with a preprocessor config.
    fn check_source(source: &str) -> Result<()> {
        match ModelSource::parse(source)? {
            ModelSource::HubRepo { repo, revision } => crate::model::hub::snapshot_files(
                &repo,
                revision.as_deref(),
                &["preprocessor_config.json"],
                &[],
            )
            .map(|_| ()),
            s if is_vision_source(&s) => Ok(()),
            s => Err(Error::UnknownArchitecture {
                architecture: format!("{} as an image classifier", s.describe()),
                supported: "ViT and DeiT folders (config.json with model_type vit or deit, *.safetensors, preprocessor_config.json) and Hub ids".into(),
            }),
        }
    }

    fn identity(&self) -> ModelIdentity {
        let info = self.model.info();
        ModelIdentity {
            name: info.name.clone(),
            sha256: info.sha256.clone(),
            architecture: info.model_type.clone(),
            n_layers: info.n_layers,
            dtype: info.dtype.as_str().to_string(),
        }
    }

    fn device_name(&self) -> String {
        device_name(self.model.device())
    }

    fn set_batch_size(&mut self, n: usize) -> Result<()> {
        ImageProfiler::set_batch_size(self, n)
    }

    /// Every item's image ([`Input::image`]) in one pass.
    fn measure_batch<E: Experiment<Instrument = Self>>(
        cx: &Cx<'_, E>,
        instrument: &mut Self,
        batch: &Batch<'_>,
    ) -> Result<Vec<Record>> {
        let images = batch
            .items()
            .iter()
            .map(|i| Ok((i.prompt.clone(), cx.input.image(i)?)))
            .collect::<Result<Vec<_>>>()?;
        let profiles = instrument.profile_images(&images, false)?;
        Ok(batch.keep_todo(batch.items().iter().zip(profiles), Record::new))
    }
}

/// What [`Experiment::measure`] and [`Experiment::prepare`] see of the run.
pub struct Cx<'a, E: Experiment> {
    pub cfg: &'a ExperimentConfig,
    pub spec: &'a E::Spec,
    pub input: &'a E::Input,
    /// The model measured now: its name in a several-model run, else the configuration's model.
    pub model: &'a str,
    out: &'a OutputDir,
}

impl<'a, E: Experiment> Cx<'a, E> {
    pub(crate) fn new(
        cfg: &'a ExperimentConfig,
        spec: &'a E::Spec,
        input: &'a E::Input,
        model: &'a str,
        out: &'a OutputDir,
    ) -> Self {
        Self {
            cfg,
            spec,
            input,
            model,
            out,
        }
    }

    /// Appends a line to the run's `run.log`.
    pub fn log(&self, line: &str) -> Result<()> {
        self.out.log(line)
    }

    /// The request of a text item: its prompt, [`Experiment::tokens`] tokens generated with the
    /// run's settings, sampling seeded by seed + item index (so an item's tokens do not depend on
    /// which items ran before it).
    pub fn request(&self, item: &WorkItem) -> ProfileRequest {
        let g = &self.cfg.generation;
        ProfileRequest {
            prompt: item.prompt.clone(),
            generate: E::tokens(self.spec),
            ignore_eos: g.ignore_eos,
            all_positions: false,
            add_bos: g.add_bos,
            chat: g.chat,
            include_embed: false,
            sampling: Sampling {
                temperature: g.temperature,
                sample_top_p: g.sample_top_p,
                seed: self.cfg.seed.wrapping_add(item.index as u64),
            },
            token_ids: None,
        }
    }
}

/// A fixed slice of a model's items. Batches are cut from the shard's item list, not from the items
/// left, so a batch's composition does not depend on where an earlier run stopped; items already
/// recorded are measured again with it where the batch runs together (a resume then writes the
/// bytes an uninterrupted run writes) but only the records of [`Batch::todo`] are kept.
pub struct Batch<'a> {
    items: &'a [&'a WorkItem],
    done: Vec<bool>,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(items: &'a [&'a WorkItem], done: Vec<bool>) -> Self {
        Self { items, done }
    }

    /// Every item of the batch, in order.
    pub fn items(&self) -> &[&'a WorkItem] {
        self.items
    }

    /// The items still to record.
    pub fn todo(&self) -> impl Iterator<Item = &'a WorkItem> + '_ {
        self.items
            .iter()
            .zip(&self.done)
            .filter(|(_, d)| !**d)
            .map(|(i, _)| *i)
    }

    /// Whether every item is recorded already.
    pub fn is_done(&self) -> bool {
        self.done.iter().all(|d| *d)
    }

    /// What `make` makes of each (item, measurement) — records — for the items still to record.
    pub fn keep_todo<T, R>(
        &self,
        measured: impl IntoIterator<Item = (&'a &'a WorkItem, T)>,
        make: impl Fn(&WorkItem, T) -> R,
    ) -> Vec<R> {
        measured
            .into_iter()
            .zip(&self.done)
            .filter(|(_, d)| !**d)
            .map(|((item, m), _)| make(item, m))
            .collect()
    }
}
