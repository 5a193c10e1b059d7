//! The run loop: load the model and data, resolve the configuration, skip the items already
//! recorded, profile the rest batch by batch, then finish (unless this is one shard of several).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::choice::LetterTokens;
use super::config::{ExperimentSpec, Plan, Protocol};
use super::data::load_data;
use super::progress::{format_secs, Progress, ProgressMode};
use super::store::{OutputDir, Record, RunContext, Shard, WorkItem};
use super::{finish, items, stat_spec, ExperimentConfig, Outcome};
use super::{mmlu, skip};
use crate::error::{Error, Result};
use crate::model::{load, parse_device, LoadOptions, ModelSource};
use crate::runner::{device_name, ProfileRequest, Profiler, Sampling};

/// Where and how to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Output folder (default: [`default_out_dir`]).
    pub out: Option<PathBuf>,
    /// Run only this slice of the items.
    pub shard: Option<Shard>,
    pub progress: ProgressMode,
    /// Items run as one batch (left-padded; [`Profiler::run_batch`]); their records are appended
    /// together. Batches are fixed slices of this shard's items, and a resumed run reruns a batch
    /// it had only partly recorded, so a resume gives the same bytes as an uninterrupted run at the
    /// same batch size. Profiles at different batch sizes agree to 1e-5 nats or better, not bitwise;
    /// MMLU and skipping score one question at a time whatever the batch.
    pub batch: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            out: None,
            shard: None,
            progress: ProgressMode::Auto,
            batch: 1,
        }
    }
}

impl RunOptions {
    /// Progress as lines in the cell output.
    pub fn notebook(out: impl Into<PathBuf>) -> Self {
        Self {
            out: Some(out.into()),
            progress: ProgressMode::Lines,
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
    let mut name = format!("{}-{model}-{}", cfg.kind().name(), cfg.scale.name());
    if cfg.protocol == Protocol::Authors {
        name.push_str("-authors");
    }
    if let Some(s) = shard.filter(|s| !s.is_whole()) {
        name.push_str(&format!("-shard-{}-of-{}", s.index, s.count));
    }
    Path::new("runs").join(name)
}

fn request(cfg: &ExperimentConfig, item: &WorkItem) -> ProfileRequest {
    let g = &cfg.generation;
    ProfileRequest {
        prompt: item.prompt.clone(),
        generate: cfg.spec.tokens(),
        ignore_eos: g.ignore_eos,
        all_positions: false,
        add_bos: g.add_bos,
        chat: g.chat,
        // skip ranks block 1 by its ΔH against the embedding output.
        include_embed: matches!(cfg.spec, ExperimentSpec::Skip(_)),
        sampling: Sampling {
            temperature: g.temperature,
            top_p: g.sample_top_p,
            // Per item, so an item's tokens do not depend on which items ran before it.
            seed: cfg.seed.wrapping_add(item.index as u64),
        },
        token_ids: None,
    }
}

/// Where a run stands in its folder: the records already written, which items they cover, the
/// items of this shard (`mine`) and those of them still to do (`todo`).
pub(super) struct Pending<'a> {
    pub done: Vec<Record>,
    pub is_done: Vec<bool>,
    pub mine: Vec<&'a WorkItem>,
    pub todo: Vec<&'a WorkItem>,
}

/// Reads the folder's records (recovering from a torn last line) and checks that each belongs to
/// `all`, the configuration's items.
pub(super) fn pending<'a>(
    out: &OutputDir,
    dir: &Path,
    all: &'a [WorkItem],
    shard: Option<Shard>,
) -> Result<Pending<'a>> {
    let done = out.recover_records()?;
    for r in &done {
        if all.get(r.index).is_none_or(|i| i.id != r.id) {
            return Err(Error::Data(format!(
                "{}: record {} ({:?}) is not item {} of this configuration ({:?}); the folder was written for other prompts, images or models",
                dir.display(),
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
        .filter(|i| shard.is_none_or(|s| s.contains(i.index)))
        .collect();
    let todo: Vec<&WorkItem> = mine.iter().copied().filter(|i| !is_done[i.index]).collect();
    Ok(Pending {
        done,
        is_done,
        mine,
        todo,
    })
}

/// Ends a run: logs the time spent on the items run now, finishes the folder unless it holds
/// one shard only, and sums up.
pub(super) fn conclude(
    out: &OutputDir,
    dir: PathBuf,
    config: ExperimentConfig,
    shard: Option<Shard>,
    (ran, mine): (usize, usize),
    start: Instant,
) -> Result<RunSummary> {
    let seconds = start.elapsed().as_secs_f64();
    if ran > 0 {
        out.log(&format!(
            "profiled {ran} items in {} ({:.3} items/s)",
            format_secs(seconds),
            ran as f64 / seconds.max(1e-9)
        ))?;
    }
    let outcome = match shard.filter(|s| !s.is_whole()) {
        Some(_) => None,
        None => Some(finish(&dir)?),
    };
    Ok(RunSummary {
        dir,
        config,
        ran,
        resumed: mine - ran,
        seconds,
        outcome,
    })
}

/// Refuses to resume a several-model run (family, vit) whose records for `model` were made with
/// other weights than those now loaded.
pub(super) fn check_same_weights(
    done: &[Record],
    model: &str,
    sha256: &str,
    dir: &Path,
) -> Result<()> {
    if let Some(r) = done.iter().find(|r| {
        r.meta.get("model").and_then(|v| v.as_str()) == Some(model)
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

/// Runs (or resumes) the experiment `plan` and, when the folder holds every item, finishes it.
pub fn run(plan: &Plan, opts: &RunOptions) -> Result<RunSummary> {
    plan.spec()?; // bad sizes fail before anything is loaded
    match plan.kind {
        super::ExperimentKind::Family => return super::family::run(plan, opts),
        super::ExperimentKind::Vit => return super::vit::run(plan, opts),
        _ => {}
    }
    let data = load_data(plan)?;
    let source = match &plan.model {
        Some(m) => ModelSource::parse(m)?,
        None => ModelSource::default_model()?,
    };
    let device = parse_device(&plan.device)?;
    let loaded = load(
        &source,
        &LoadOptions {
            device,
            dtype: plan.dtype,
        },
    )?;
    let cfg = plan.resolve(loaded.model.info(), data.identity.clone())?;
    let all = items(&cfg, &data)?;
    super::check_feasible(&cfg, &all)?;
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&cfg, opts.shard));
    let spec = stat_spec(&cfg)?;
    let out = OutputDir::prepare(
        &dir,
        &cfg,
        &all,
        RunContext {
            model: source.describe(),
            data: data.source.clone(),
            device: device_name(loaded.model.device()),
            shard: opts.shard.filter(|s| !s.is_whole()),
            batch: opts.batch.max(1),
        },
    )?;
    let _lock = out.lock()?;
    let Pending {
        is_done,
        mine,
        todo,
        ..
    } = pending(&out, &dir, &all, opts.shard)?;

    let mut profiler = Profiler::new(loaded, spec)?;
    let letters = match &cfg.spec {
        ExperimentSpec::Mmlu(_) | ExperimentSpec::Skip(_) => {
            let t = LetterTokens::new(&profiler.tokenizer)?;
            out.log(&format!("option letters compared as token ids {:?}", t.ids))?;
            Some(t)
        }
        _ => None,
    };
    let requests: Vec<ProfileRequest> = todo.iter().map(|i| request(&cfg, i)).collect();
    for (item, req) in todo.iter().zip(&requests) {
        profiler
            .checked_prompt_ids(req)
            .map_err(|e| Error::invalid(format!("item {} ({}): {e}", item.index, item.id)))?;
    }
    let batch = opts.batch.max(1);
    profiler.set_batch_size(batch)?;
    out.log(&format!(
        "run: {} on {} ({}), {} of {} items to do{}{}",
        cfg.kind().name(),
        out.stored.run.model,
        device_name(profiler.model.device()),
        todo.len(),
        mine.len(),
        opts.shard
            .map(|s| format!(", shard {s}"))
            .unwrap_or_default(),
        if batch > 1 {
            format!(", batches of {batch}")
        } else {
            String::new()
        }
    ))?;
    let label = format!("{} {}", cfg.kind().name(), cfg.model.name);
    let mut progress = Progress::new(opts.progress, &label, mine.len(), mine.len() - todo.len());
    let start = Instant::now();
    // Fixed slices of `mine`, not of `todo`: a batch's composition does not depend on where an
    // earlier run stopped.
    for block in mine.chunks(batch) {
        let pending: Vec<&WorkItem> = block
            .iter()
            .copied()
            .filter(|i| !is_done[i.index])
            .collect();
        if pending.is_empty() {
            continue;
        }
        let records: Vec<Record> = match (&cfg.spec, &letters) {
            (ExperimentSpec::Mmlu(s), Some(letters)) => pending
                .iter()
                .map(|i| mmlu::measure(s, &mut profiler, letters, i, &request(&cfg, i)))
                .collect::<Result<_>>()?,
            (ExperimentSpec::Skip(s), Some(letters)) => pending
                .iter()
                .map(|i| skip::measure(s, cfg.seed, &mut profiler, letters, i, &request(&cfg, i)))
                .collect::<Result<_>>()?,
            _ => {
                let reqs: Vec<ProfileRequest> = block.iter().map(|i| request(&cfg, i)).collect();
                profiler
                    .run_batch(&reqs)?
                    .into_iter()
                    .zip(block)
                    .filter(|(_, i)| !is_done[i.index])
                    .map(|(p, i)| Record::new(i, p))
                    .collect()
            }
        };
        out.append(&records)?;
        progress.inc(records.len());
    }
    progress.finish();
    conclude(&out, dir, cfg, opts.shard, (todo.len(), mine.len()), start)
}
