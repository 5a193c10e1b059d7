//! The run loop, the same for every experiment: resolve the plan (spec, input, models) into a
//! configuration, open the output folder (or find the run already there), skip the items already
//! recorded, then per model measure fixed batches of the items left and append their records;
//! finish when the folder holds every item (unless it is one shard of several).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::experiment::{Batch, Cx, Experiment, Instrument, Models};
use super::finish::finish_with;
use super::outcome::Outcome;
use super::plan::Plan;
use super::progress::{format_secs, Progress, ProgressMode};
use super::settings::{ExperimentConfig, ModelIdentity, Protocol, SpecRecord};
use super::store::{OutputDir, Record, RunContext, Shard, WorkItem};
use crate::error::{Error, Result};
use crate::lens::{LensKind, LensRecord};
use crate::model::{parse_device, LoadOptions, ModelSource};
use crate::profile::provenance::CRATE_VERSION;
use crate::runner::{default_batch_size, device_name};
use crate::watch::Watch;

/// Where and how to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Output folder (default: [`default_out_dir`]).
    pub out: Option<PathBuf>,
    /// Run only this slice of the items.
    pub shard: Option<Shard>,
    pub progress: ProgressMode,
    /// Items measured as one batch (text: one left-padded batch; images: one forward pass);
    /// `None`: the device's default (8 on the CPU, 32 on a GPU), recorded in `config.json`.
    /// Batches are fixed slices of this shard's items, and a resumed run reruns a batch it had
    /// only partly recorded, so a resume gives the same bytes as an uninterrupted run at the same
    /// batch size (a resume at another size is refused). Profiles at different batch sizes agree
    /// to 1e-5 nats or better, not bitwise. MMLU batches its questions too; skipping batches
    /// its questions' unskipped pass, and runs each question's trials alone (a trial's skipped
    /// blocks are its question's own).
    pub batch: Option<usize>,
    /// Progress published for a watcher on another thread, and its stop request: checked after
    /// each batch's records are written, so a stopped run resumes where it stopped.
    pub watch: Option<Arc<Watch>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            out: None,
            shard: None,
            progress: ProgressMode::Auto,
            batch: None,
            watch: None,
        }
    }
}

impl RunOptions {
    /// Progress on one line of the cell output, updated in place.
    pub fn notebook(out: impl Into<PathBuf>) -> Self {
        Self {
            out: Some(out.into()),
            progress: ProgressMode::Notebook,
            ..Default::default()
        }
    }
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub dir: PathBuf,
    pub config: ExperimentConfig,
    /// Items profiled by this call, and items found already done.
    pub ran: usize,
    pub resumed: usize,
    /// Items measured per batch.
    pub batch: usize,
    pub seconds: f64,
    /// The result; `None` for one shard of several (merge them to get it).
    pub outcome: Option<Outcome>,
}

/// `runs/<experiment>-<model>-<scale>[-authors][-shard-i-of-n]`.
pub fn default_out_dir(cfg: &ExperimentConfig, shard: Option<Shard>) -> PathBuf {
    let model: String = cfg
        .model
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{}-{model}-{}", cfg.kind_name(), cfg.scale.name());
    if cfg.protocol == Protocol::Authors {
        name.push_str("-authors");
    }
    if let Some(s) = shard.filter(|s| !s.is_whole()) {
        name.push_str(&format!("-shard-{}-of-{}", s.index, s.count));
    }
    Path::new("runs").join(name)
}

/// Where a run stands in its folder: the records already written, which items they cover, the
/// items of this shard (`mine`) and those of them still to do (`todo`).
struct Pending<'a> {
    done: Vec<Record>,
    is_done: Vec<bool>,
    mine: Vec<&'a WorkItem>,
    todo: Vec<&'a WorkItem>,
}

/// Reads the folder's records (recovering from a torn last line) and checks that each belongs to
/// `all`, the configuration's items.
fn pending<'a>(
    out: &OutputDir,
    all: &'a [WorkItem],
    shard: Option<Shard>,
    batch: usize,
) -> Result<Pending<'a>> {
    let done = out.recover_records()?;
    for r in &done {
        if all.get(r.index).is_none_or(|i| i.id != r.id) {
            return Err(Error::Data(format!(
                "{}: record {} ({:?}) is not item {} of this configuration ({:?}); the folder was written for other prompts, images or models",
                out.path.display(),
                r.index,
                r.id,
                r.index,
                all.get(r.index).map(|i| i.id.as_str()).unwrap_or("none")
            )));
        }
    }
    let mut is_done = vec![false; all.len()];
    done.iter().for_each(|r| is_done[r.index] = true);
    let mine: Vec<&WorkItem> = all
        .iter()
        .filter(|i| shard.is_none_or(|s| s.contains(i.index, batch)))
        .collect();
    let todo: Vec<&WorkItem> = mine.iter().copied().filter(|i| !is_done[i.index]).collect();
    Ok(Pending {
        done,
        is_done,
        mine,
        todo,
    })
}

/// Refuses to resume a several-model run whose records for `model` were made with other weights
/// than those now loaded.
fn check_same_weights(done: &[Record], model: &str, sha256: &str, dir: &Path) -> Result<()> {
    if let Some(r) = done.iter().find(|r| {
        r.meta_str("model") == model
            && r.profile
                .provenance
                .as_ref()
                .is_some_and(|p| p.model_sha256 != sha256)
    }) {
        return Err(Error::invalid(format!(
            "{}: record {} was made with other weights for {model} (sha256 differs); use a new --out",
            dir.display(),
            r.id
        )));
    }
    Ok(())
}

/// One model of the run: the name its items go by, where it loads from, and its items.
struct Group<'a> {
    name: String,
    source: ModelSource,
    items: Vec<&'a WorkItem>,
}

/// Runs (or resumes) experiment `E` as `plan` asks and, when the folder holds every item,
/// finishes it. `plan.kind` must be `E`'s.
pub fn run_with<E: Experiment>(plan: &Plan, opts: &RunOptions) -> Result<RunSummary> {
    if plan.kind.name() != E::NAME {
        return Err(Error::invalid(format!(
            "the plan is for the {} experiment, not {}",
            plan.kind.name(),
            E::NAME
        )));
    }
    plan.check_options(E::OPTIONS)?;
    // Bad sizes and settings fail before anything is loaded.
    let spec = E::spec(plan)?;
    let device = parse_device(&plan.device)?;
    let batch = match opts.batch {
        Some(0) => {
            return Err(Error::invalid(
                "--batch must be at least 1 (leave it out for the device's default: 8 on the CPU, 32 on a GPU)",
            ))
        }
        Some(b) => b,
        None => default_batch_size(&device),
    };
    let stats = plan.stat_settings()?;
    let generation = E::generation(plan, &spec)?;
    let stat_spec = E::stat_spec(&stats, &spec)?;
    let models = E::models(plan, &spec)?;
    // A tuned lens belongs to one model: it is loaded (and a bad one refused) before any work.
    let lens = match plan.lens.as_deref() {
        None | Some("logit") => LensKind::Logit,
        Some(l) if matches!(models, Models::Several(_)) => {
            return Err(Error::invalid(format!(
                "--lens {l}: a tuned lens is trained for one model, and {} measures several; run it with the logit lens",
                E::NAME
            )))
        }
        Some(l) => LensKind::parse(l)?,
    };
    let input = E::input(plan, &spec)?;
    let load_opts = LoadOptions {
        device: device.clone(),
        dtype: plan.dtype,
    };

    // One model is loaded first: the configuration holds its identity. Several are checked
    // (folder present, Hub files downloadable) before any work, and loaded in turn.
    let (identity, mut loaded, sources, described) = match &models {
        Models::One(source) => {
            let mut instrument = E::Instrument::load(source, &load_opts, stat_spec.clone())?;
            instrument.set_lens(&lens)?;
            let identity = instrument.identity();
            let device = instrument.device_name();
            let name = identity.name.clone();
            (
                identity,
                Some(instrument),
                vec![(name, source.clone())],
                (source.describe(), device),
            )
        }
        Models::Several(list) => {
            let mut sources = Vec::with_capacity(list.len());
            for m in list {
                E::Instrument::check_source(&m.source)
                    .and_then(|()| crate::fetch::model_source(&m.source))
                    .map(|s| sources.push((m.name.clone(), s)))
                    .map_err(|e| Error::invalid(format!("model {} ({}): {e}", m.name, m.source)))?;
            }
            let names: Vec<&str> = list.iter().map(|m| m.name.as_str()).collect();
            let joined: Vec<&str> = list.iter().map(|m| m.source.as_str()).collect();
            (
                ModelIdentity::several(
                    &names,
                    E::Instrument::SEVERAL,
                    plan.dtype.map(|d| d.as_str()),
                ),
                None,
                sources,
                (joined.join(", "), device_name(&device)),
            )
        }
    };
    let several = matches!(models, Models::Several(_));
    let cfg = ExperimentConfig {
        spec: SpecRecord::new(E::NAME, &spec)?,
        protocol: plan.protocol,
        scale: plan.scale,
        model: identity,
        device: plan.device_kind(),
        data: input.identity.clone(),
        seed: plan.seed,
        generation,
        stats,
        crate_version: CRATE_VERSION.to_string(),
        lens: lens.record().map(|r| LensRecord {
            source: String::new(),
            ..r
        }),
    };
    let all = E::items(&cfg, &spec, &input.value)?;
    E::check_feasible(&cfg, &spec, &all)?;
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&cfg, opts.shard));
    let shard = opts.shard.filter(|s| !s.is_whole());
    let (model_text, device_text) = described;
    let out = OutputDir::prepare(
        &dir,
        &cfg,
        &all,
        RunContext {
            model: model_text,
            data: input.source.clone(),
            device: device_text.clone(),
            shard,
            batch,
            lens: lens.record().map(|r| r.source),
        },
    )?;
    let _lock = out.lock()?;
    let Pending {
        done,
        is_done,
        mine,
        todo,
    } = pending(&out, &all, opts.shard, batch)?;
    out.log(&format!(
        "run: {} on {} ({device_text}), {} of {} items to do{}, batches of {batch}",
        E::NAME,
        out.stored.run.model,
        todo.len(),
        mine.len(),
        shard.map(|s| format!(", shard {s}")).unwrap_or_default(),
    ))?;
    if let (Some(s), true) = (shard, mine.is_empty()) {
        out.log(&format!(
            "shard {s} holds no items: {} items in batches of {batch} make {} batches, shared round-robin",
            all.len(),
            all.len().div_ceil(batch)
        ))?;
    }
    let groups: Vec<Group> = sources
        .into_iter()
        .map(|(name, source)| Group {
            items: mine
                .iter()
                .copied()
                .filter(|i| !several || i.meta_str("model") == name)
                .collect(),
            name,
            source,
        })
        .collect();
    let label = format!("{} {}", E::NAME, cfg.model.name);
    let mut progress = Progress::new(opts.progress, &label, mine.len(), mine.len() - todo.len());
    let watch = opts.watch.as_deref();
    if let Some(w) = watch {
        w.set_total(mine.len());
        w.set_done(mine.len() - todo.len());
        w.set_status(&progress.status());
    }
    let stopped = || {
        format!(
            "the run in {} stopped; run it again with the same arguments to resume",
            dir.display()
        )
    };
    let start = Instant::now();
    for group in &groups {
        let left: Vec<&WorkItem> = group
            .items
            .iter()
            .copied()
            .filter(|i| !is_done[i.index])
            .collect();
        if left.is_empty() {
            continue;
        }
        let mut instrument = match loaded.take() {
            Some(i) => i,
            None => E::Instrument::load(&group.source, &load_opts, stat_spec.clone())
                .and_then(|mut i| i.set_lens(&lens).map(|()| i))
                .map_err(|e| {
                    Error::invalid(format!(
                        "model {} ({}): {e}",
                        group.name,
                        group.source.describe()
                    ))
                })?,
        };
        if several {
            check_same_weights(&done, &group.name, &instrument.identity().sha256, &dir)?;
        }
        let cx = Cx::<E>::new(&cfg, &spec, &input.value, &group.name, &out);
        E::Instrument::check_items(&cx, &instrument, &left)?;
        E::prepare(&cx, &mut instrument)?;
        instrument.set_batch_size(batch)?;
        // Fixed slices of the model's items, not of those left: a batch's composition does not
        // depend on where an earlier run stopped.
        for block in group.items.chunks(batch) {
            let b = Batch::new(block, block.iter().map(|i| is_done[i.index]).collect());
            if b.is_done() {
                continue;
            }
            let records = E::measure(&cx, &mut instrument, &b)?;
            let wanted: Vec<usize> = b.todo().map(|i| i.index).collect();
            let got: Vec<usize> = records.iter().map(|r| r.index).collect();
            if got != wanted {
                return Err(Error::Data(format!(
                    "{} measured items {got:?} for a batch whose items to record are {wanted:?}",
                    E::NAME
                )));
            }
            out.append(&records)?;
            progress.inc(records.len());
            if let Some(w) = watch {
                w.add_done(records.len());
                w.set_status(&progress.status());
                w.check(&stopped())?;
            }
        }
    }
    progress.finish();
    let seconds = start.elapsed().as_secs_f64();
    let ran = todo.len();
    if ran > 0 {
        out.log(&format!(
            "profiled {ran} items in {} ({:.3} items/s)",
            format_secs(seconds),
            ran as f64 / seconds.max(1e-9)
        ))?;
    }
    let outcome = match shard {
        Some(_) => None,
        None => Some(finish_with::<E>(&dir)?),
    };
    Ok(RunSummary {
        dir,
        config: cfg,
        ran,
        resumed: mine.len() - ran,
        batch,
        seconds,
        outcome,
    })
}
