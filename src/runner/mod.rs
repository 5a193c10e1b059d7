//! Running prompts and generations through a model and its lens into [`EntropyProfile`]s.

pub mod images;
pub mod sampler;

pub use images::ImageProfiler;
pub use sampler::TokenSampler;

use candle_core::Tensor;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::lens::{GroupTarget, Groups, Lens, LensKind, StatSpec, TargetToken};
use crate::model::{
    load, Captured, LoadOptions, LoadedModel, Model, ModelSource, Positions, TextTokenizer,
};
use crate::profile::provenance::CRATE_VERSION;
use crate::profile::{EntropyProfile, PositionProfile, Provenance, ReadPoint};

/// The token ids `tokenizer` makes of `req`'s prompt (in the chat template when asked). An empty
/// prompt runs on BOS alone (an error when BOS is turned off). `req.token_ids` are not looked at:
/// see [`Profiler::prompt_ids`].
pub fn prompt_token_ids(tokenizer: &TextTokenizer, req: &ProfileRequest) -> Result<Vec<u32>> {
    let ids = if req.chat {
        // Templates write BOS themselves when the model wants it.
        let text = tokenizer.apply_chat_template(&req.prompt)?;
        tokenizer.encode(&text, false)?
    } else {
        tokenizer.encode(&req.prompt, req.add_bos)?
    };
    if !ids.is_empty() {
        return Ok(ids);
    }
    if !req.add_bos && !req.chat {
        // Running on BOS would contradict --no-bos; running on nothing is impossible.
        return Err(Error::invalid(
            "the prompt is empty and BOS is turned off (--no-bos), so there is no token to run on; give a non-empty prompt or keep BOS",
        ));
    }
    match tokenizer.bos_token_id() {
        Some(bos) => Ok(vec![bos]),
        None => Err(Error::invalid(
            "the prompt is empty and this model has no BOS token to run on; give a non-empty prompt",
        )),
    }
}

/// The observer of a run nobody watches.
struct Unobserved;

impl TokenObserver for Unobserved {
    fn token(&self, _request: usize) -> bool {
        true
    }
}

/// How the next token is chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// 0 means greedy (argmax, smallest id on ties).
    pub temperature: f64,
    /// Nucleus (top-p) sampling mass, `--sample-top-p` (None: sample from the whole distribution).
    /// Not the lens' top-p candidate set ([`crate::lens::StatSpec::top_p`]).
    #[serde(alias = "top_p")]
    pub sample_top_p: Option<f64>,
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            sample_top_p: None,
            seed: 42,
        }
    }
}

/// One profiling job: a prompt, and optionally a generation from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileRequest {
    pub prompt: String,
    /// Number of tokens to generate (0: the prompt only).
    pub generate: usize,
    /// Keep generating after the end-of-sequence token.
    pub ignore_eos: bool,
    /// Measure every prompt position, not only the last.
    pub all_positions: bool,
    /// Apply the tokenizer's BOS rule (false: never prepend BOS).
    pub add_bos: bool,
    /// Wrap the prompt in the model's chat template as a user turn.
    pub chat: bool,
    /// Also measure layer 0 (the embedding output).
    pub include_embed: bool,
    pub sampling: Sampling,
    /// Run these token ids instead of tokenizing `prompt` (e.g. `[bos, bos]`, the authors' blank
    /// prompt in the family experiment); `prompt` is then only a label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
}

impl Default for ProfileRequest {
    fn default() -> Self {
        Self {
            prompt: String::new(),
            generate: 0,
            ignore_eos: false,
            all_positions: false,
            add_bos: true,
            chat: false,
            include_embed: false,
            sampling: Sampling::default(),
            token_ids: None,
        }
    }
}

impl ProfileRequest {
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            ..Default::default()
        }
    }

    pub fn generate(mut self, n: usize) -> Self {
        self.generate = n;
        self
    }

    pub fn all_positions(mut self, on: bool) -> Self {
        self.all_positions = on;
        self
    }

    pub fn ignore_eos(mut self, on: bool) -> Self {
        self.ignore_eos = on;
        self
    }

    pub fn chat(mut self, on: bool) -> Self {
        self.chat = on;
        self
    }

    pub fn include_embed(mut self, on: bool) -> Self {
        self.include_embed = on;
        self
    }

    pub fn sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = sampling;
        self
    }
}

/// Told of every token a batch generates: progress for a bar or a web page, and a way to stop one
/// sequence early (a request whose page was closed).
pub trait TokenObserver {
    /// Request `request` (an index into the requests given) chose another token. `false` stops
    /// that sequence there, as an end-of-sequence token would; the others go on.
    fn token(&self, request: usize) -> bool;
}

impl TokenObserver for ProgressBar {
    fn token(&self, _request: usize) -> bool {
        self.inc(1);
        true
    }
}

/// A generation watched token by token: each token counts one item, and a stop request ends
/// every sequence at its next token (the caller then reports [`Error::Interrupted`]).
impl TokenObserver for crate::watch::Watch {
    fn token(&self, _request: usize) -> bool {
        self.add_done(1);
        !self.stop_requested()
    }
}

/// An observer seeing the requests of one group as `offset + i`.
struct Shifted<'a> {
    inner: &'a dyn TokenObserver,
    offset: usize,
}

impl TokenObserver for Shifted<'_> {
    fn token(&self, request: usize) -> bool {
        self.inner.token(self.offset + request)
    }
}

/// A model, its tokenizer and a lens: the object notebooks and the CLI work with.
pub struct Profiler {
    pub model: Model,
    pub tokenizer: TextTokenizer,
    lens: Lens,
    /// Which lens reads the residuals (the logit lens unless set).
    lens_kind: LensKind,
    /// Where the residual stream is read.
    read_point: ReadPoint,
    /// Sequences run together by [`Profiler::run_batch`].
    batch_size: usize,
}

/// The batch size [`Profiler`] starts with: 8 sequences on the CPU (a decode step's products
/// become small matrix products instead of matrix-vector ones), 32 on an accelerator.
pub fn default_batch_size(device: &candle_core::Device) -> usize {
    if matches!(device, candle_core::Device::Cpu) {
        8
    } else {
        32
    }
}

/// One captured (batch row, column) to measure, and where its entry goes.
#[derive(Clone, Copy, Debug)]
struct Pick {
    /// The request it belongs to.
    request: usize,
    /// Row of the batch.
    row: usize,
    /// Column of the captured residuals ([b, p, d]).
    column: usize,
    /// Position in the sequence (what the entry is labelled with).
    position: usize,
    /// Keep this pick's final-block logits (the row's next token is chosen from them).
    keep_logits: bool,
    /// The token whose probability and rank the lens follows ([`StatSpec::target`]).
    target: GroupTarget,
}

/// What [`Profiler::measure_picks`] returns.
struct Measured {
    /// One entry per pick.
    entries: Vec<PositionProfile>,
    /// The final-block logits of the picks that keep them, in order.
    kept: Vec<Vec<f32>>,
    /// Per pick, the token chosen from its final logits ([`GroupTarget::Choose`]).
    chosen: Vec<Option<u32>>,
}

impl Profiler {
    pub fn new(loaded: LoadedModel, spec: StatSpec) -> Result<Self> {
        let batch_size = default_batch_size(loaded.model.device());
        Ok(Self {
            model: loaded.model,
            tokenizer: loaded.tokenizer,
            lens: Lens::new(spec)?,
            lens_kind: LensKind::Logit,
            read_point: ReadPoint::Block,
            batch_size,
        })
    }

    /// Loads `model` (GGUF file, Hugging Face folder, a name in the models folder, an offline
    /// model's short name such as `smollm2` — downloaded on first use —, a registered name or a
    /// Hub id) with default statistics.
    ///
    /// # Errors
    /// Those of [`crate::fetch::model_source`] and [`crate::model::load()`].
    pub fn load(model: &str, opts: &LoadOptions) -> Result<Self> {
        Self::new(
            load(&crate::fetch::model_source(model)?, opts)?,
            StatSpec::default(),
        )
    }

    /// Loads the default model (see [`ModelSource::default_model`]) on the CPU.
    pub fn load_default() -> Result<Self> {
        Self::new(
            load(&ModelSource::default_model()?, &LoadOptions::default())?,
            StatSpec::default(),
        )
    }

    pub fn lens(&self) -> &Lens {
        &self.lens
    }

    /// The lens reading the residuals.
    pub fn lens_kind(&self) -> &LensKind {
        &self.lens_kind
    }

    /// Reads the residuals with `kind` from now on: the logit lens, or a tuned lens (its
    /// translator, then the final norm and unembedding; the last block as the model reads it).
    ///
    /// # Errors
    /// When a tuned lens was made for a model of another width or depth.
    pub fn set_lens(&mut self, kind: LensKind) -> Result<()> {
        if let Some(t) = kind.tuned() {
            let info = self.model.info();
            t.check_fits(&info.name, info.d_model, info.n_layers)?;
            if !self.read_point.is_block() {
                return Err(tuned_mid_block());
            }
        }
        self.lens_kind = kind;
        Ok(())
    }

    /// Where the residual stream is read.
    pub fn read_point(&self) -> ReadPoint {
        self.read_point
    }

    /// Reads the residual stream at `point` from now on: after every block, after every block's
    /// attention (before its MLP), or both.
    ///
    /// # Errors
    /// A mid-block point on a parallel-residual model (it has none), or with a tuned lens (its
    /// translators are trained for the block outputs).
    pub fn set_read_point(&mut self, point: ReadPoint) -> Result<()> {
        if !point.is_block() && self.lens_kind.tuned().is_some() {
            return Err(tuned_mid_block());
        }
        self.model.set_capture_attention(point.reads_mid_block())?;
        self.model.set_capture_writes(point.reads_writes());
        self.read_point = point;
        Ok(())
    }

    /// Sequences [`Profiler::run_batch`] runs together (left-padded, one forward per step).
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Sets [`Profiler::batch_size`] (at least 1; 1 runs every request alone).
    ///
    /// # Errors
    /// When `n` is 0.
    pub fn set_batch_size(&mut self, n: usize) -> Result<()> {
        if n == 0 {
            return Err(Error::invalid("the batch size must be at least 1"));
        }
        self.batch_size = n;
        Ok(())
    }

    /// Replace the statistics computed (validated).
    pub fn set_spec(&mut self, spec: StatSpec) -> Result<()> {
        self.lens = Lens::new(spec)?;
        Ok(())
    }

    /// Token ids the request's prompt runs on. An empty prompt runs on BOS alone (an error when
    /// BOS is turned off).
    pub fn prompt_ids(&self, req: &ProfileRequest) -> Result<Vec<u32>> {
        if let Some(ids) = &req.token_ids {
            let vocab = self.model.info().vocab_size;
            if ids.is_empty() {
                return Err(Error::invalid("the request's token ids are empty"));
            }
            if let Some(bad) = ids.iter().find(|&&i| i as usize >= vocab) {
                return Err(Error::invalid(format!(
                    "token id {bad} is outside the model's vocabulary of {vocab}"
                )));
            }
            return Ok(ids.clone());
        }
        prompt_token_ids(&self.tokenizer, req)
    }

    /// The prompt's token ids, after checking that the prompt and the requested generation fit in
    /// the model's context.
    pub fn checked_prompt_ids(&self, req: &ProfileRequest) -> Result<Vec<u32>> {
        let ids = self.prompt_ids(req)?;
        let context = self.model.info().context_length;
        // Saturating: a huge --generate must be refused, not wrap around the check.
        let requested = ids.len().saturating_add(req.generate);
        if requested > context {
            return Err(Error::ContextOverflow {
                requested,
                context_length: context,
                prompt_tokens: ids.len(),
                generate: req.generate,
            });
        }
        Ok(ids)
    }

    /// Profile of the prompt at every position (no generation).
    pub fn profile_prompt(&mut self, prompt: &str) -> Result<EntropyProfile> {
        self.run(&ProfileRequest::new(prompt).all_positions(true))
    }

    /// Greedy generation of `n` tokens with a profile for each.
    pub fn generate(&mut self, prompt: &str, n: usize) -> Result<EntropyProfile> {
        self.run(&ProfileRequest::new(prompt).generate(n))
    }

    pub fn run(&mut self, req: &ProfileRequest) -> Result<EntropyProfile> {
        self.run_with_progress(req, None)
    }

    /// Profiles several requests, [`Profiler::batch_size`] at a time: each group runs as one
    /// left-padded batch (one forward per step for all its sequences; a sequence that ends stops
    /// costing anything). Each profile agrees with what [`Profiler::run`] gives for its request
    /// alone to 1e-5 nats or better (the same ids under greedy decoding and seeded sampling, barring
    /// exact ties): the products sum in another order when their row counts differ.
    pub fn run_batch(&mut self, reqs: &[ProfileRequest]) -> Result<Vec<EntropyProfile>> {
        self.run_batch_with_progress(reqs, None)
    }

    /// As [`Profiler::run_batch`]; `progress` advances once per generated token of any sequence.
    pub fn run_batch_with_progress(
        &mut self,
        reqs: &[ProfileRequest],
        progress: Option<&ProgressBar>,
    ) -> Result<Vec<EntropyProfile>> {
        match progress {
            Some(bar) => self.run_batch_observed(reqs, bar),
            None => self.run_batch_observed(reqs, &Unobserved),
        }
    }

    /// As [`Profiler::run_batch`], telling `observer` of every generated token (with the index of
    /// its request in `reqs`); a sequence the observer stops ends there.
    pub fn run_batch_observed(
        &mut self,
        reqs: &[ProfileRequest],
        observer: &dyn TokenObserver,
    ) -> Result<Vec<EntropyProfile>> {
        Ok(self
            .run_batch_scored(reqs, Some(observer))?
            .into_iter()
            .map(|(profile, _)| profile)
            .collect())
    }

    /// As [`Profiler::run_batch_observed`], each profile with the model's own next-token logits
    /// after its prompt, as [`Profiler::run_scored`] returns them (e.g. to score answer options
    /// for a batch of questions).
    pub fn run_batch_scored(
        &mut self,
        reqs: &[ProfileRequest],
        observer: Option<&dyn TokenObserver>,
    ) -> Result<Vec<(EntropyProfile, Vec<f32>)>> {
        let observer = observer.unwrap_or(&Unobserved);
        let mut out = Vec::with_capacity(reqs.len());
        let size = self.batch_size.max(1);
        for (g, group) in reqs.chunks(size).enumerate() {
            let shifted = Shifted {
                inner: observer,
                offset: g * size,
            };
            if let [req] = group {
                out.push(self.run_scored(req, Some(&shifted))?);
            } else {
                out.extend(self.run_padded(group, &shifted)?);
            }
        }
        Ok(out)
    }

    /// Runs `req`; `progress` (when given) advances once per generated token.
    pub fn run_with_progress(
        &mut self,
        req: &ProfileRequest,
        progress: Option<&ProgressBar>,
    ) -> Result<EntropyProfile> {
        Ok(self
            .run_scored(req, progress.map(|b| b as &dyn TokenObserver))?
            .0)
    }

    /// The text the model is given for `req`: the prompt, or the prompt inside the chat template.
    pub fn model_text(&self, req: &ProfileRequest) -> Result<String> {
        if req.chat {
            self.tokenizer.apply_chat_template(&req.prompt)
        } else {
            Ok(req.prompt.clone())
        }
    }

    /// Runs `req` and also returns the model's own next-token logits after the prompt (the
    /// distribution the first generated token is chosen from), e.g. to score answer options.
    /// `progress` hears of each generated token (as request 0) and may stop the generation.
    pub fn run_scored(
        &mut self,
        req: &ProfileRequest,
        progress: Option<&dyn TokenObserver>,
    ) -> Result<(EntropyProfile, Vec<f32>)> {
        check_sampling(&req.sampling)?;
        let prompt_ids = self.checked_prompt_ids(req)?;
        let n = prompt_ids.len();
        let mut sampler = sampler(&req.sampling);
        let eos = self.tokenizer.eos_token_ids().to_vec();

        self.model.reset();
        self.model.declare_prompt_end(n);
        let device = self.model.device().clone();
        let ids = Tensor::new(prompt_ids.as_slice(), &device)?.unsqueeze(0)?;
        let will_generate = req.generate > 0;
        // The token chosen inside the lens pass when the lens follows the next token.
        let mut pending: Option<u32> = None;
        let (mut entries, mut logits) = if req.all_positions {
            // Streamed: each prefill chunk's residuals go through the lens before the next chunk
            // runs, so memory stays flat however long the prompt (chunk × layers × hidden).
            let chunk = self.model.prefill_chunk();
            let mut entries = Vec::with_capacity(n);
            let mut logits = Vec::new();
            for start in (0..n).step_by(chunk) {
                let len = chunk.min(n - start);
                let captured = self
                    .model
                    .forward_capture(&ids.narrow(1, start, len)?, Positions::All)?;
                let (more, last, chosen) = self.measure(
                    &captured,
                    start,
                    req.include_embed,
                    &prompt_ids,
                    will_generate,
                    &mut sampler,
                )?;
                entries.extend(more);
                logits = last;
                pending = chosen;
            }
            (entries, logits)
        } else {
            let captured = self.model.forward_capture(&ids, Positions::Last)?;
            let (entries, logits, chosen) = self.measure(
                &captured,
                n - 1,
                req.include_embed,
                &prompt_ids,
                will_generate,
                &mut sampler,
            )?;
            pending = chosen;
            (entries, logits)
        };
        let first_logits = logits.clone();

        let mut generated: Vec<u32> = Vec::with_capacity(req.generate);
        for step in 0..req.generate {
            let next = match pending.take() {
                Some(t) => t,
                None => choose_next(&mut sampler, &logits)?,
            };
            generated.push(next);
            let stopped = progress.is_some_and(|p| !p.token(0));
            let stop = stopped || (!req.ignore_eos && eos.contains(&next));
            if stop || step + 1 == req.generate {
                break;
            }
            let ids = Tensor::new(&[next], &device)?.unsqueeze(0)?;
            let captured = self.model.forward_capture(&ids, Positions::Last)?;
            let (more, l, chosen) = self.measure(
                &captured,
                n + step,
                req.include_embed,
                &prompt_ids,
                true,
                &mut sampler,
            )?;
            entries.extend(more);
            logits = l;
            pending = chosen;
        }

        let profile = self.assemble(req, prompt_ids, generated, entries)?;
        Ok((profile, first_logits))
    }

    /// The model's next-token logits after `req`'s prompt — the last block's residual through the
    /// final norm, the unembedding and any soft-cap — without the lens at the other blocks: what an
    /// answer is read from when no profile is wanted (the `skip` experiment's trials). Equal to the
    /// logits [`Profiler::run_scored`] returns for the same prompt.
    pub fn next_token_logits(&mut self, req: &ProfileRequest) -> Result<Vec<f32>> {
        let prompt_ids = self.checked_prompt_ids(req)?;
        let n = prompt_ids.len();
        self.model.reset();
        self.model.declare_prompt_end(n);
        let ids = Tensor::new(prompt_ids.as_slice(), self.model.device())?.unsqueeze(0)?;
        let captured = self.model.forward_capture(&ids, Positions::Last)?;
        let last = captured
            .residuals
            .last()
            .ok_or_else(|| Error::Data("the model returned no residual stream".into()))?;
        let d = last.dim(2)?;
        let row = last.reshape((1, d))?;
        let (_, mut kept) = self.lens.apply_keep_rows(&self.model, &row, &[0])?;
        kept.pop()
            .ok_or_else(|| Error::Data("lens returned no logits for the last block".into()))
    }

    /// The profile of `req` from its ids and measured positions.
    fn assemble(
        &self,
        req: &ProfileRequest,
        prompt_ids: Vec<u32>,
        generated: Vec<u32>,
        positions: Vec<PositionProfile>,
    ) -> Result<EntropyProfile> {
        let all: Vec<u32> = prompt_ids.iter().chain(&generated).copied().collect();
        Ok(EntropyProfile {
            schema_version: Some(crate::profile::schema::PROFILE_SCHEMA_VERSION),
            model: self.model.info().name.clone(),
            prompt: req.prompt.clone(),
            n_blocks: self.model.n_layers(),
            read_point: self.read_point,
            tokens: all.iter().map(|&i| self.tokenizer.token_text(i)).collect(),
            generated_text: self.tokenizer.decode(&generated)?,
            prompt_ids,
            generated_ids: generated,
            top_p: self.lens.spec().top_p,
            positions,
            provenance: Some(self.provenance(req)),
        })
    }

    /// Runs `reqs` as one left-padded batch (see [`Profiler::run_batch`]).
    fn run_padded(
        &mut self,
        reqs: &[ProfileRequest],
        observer: &dyn TokenObserver,
    ) -> Result<Vec<(EntropyProfile, Vec<f32>)>> {
        for req in reqs {
            check_sampling(&req.sampling)?;
        }
        let prompts = reqs
            .iter()
            .map(|r| self.checked_prompt_ids(r))
            .collect::<Result<Vec<_>>>()?;
        let width = prompts.iter().map(Vec::len).max().unwrap_or(0);
        let pads: Vec<usize> = prompts.iter().map(|p| width - p.len()).collect();
        let b = reqs.len();
        // Padding columns hold token 0 (a valid id in any vocabulary); nothing attends to them.
        let padded: Vec<u32> = prompts
            .iter()
            .zip(&pads)
            .flat_map(|(p, &pad)| std::iter::repeat_n(0, pad).chain(p.iter().copied()))
            .collect();
        let include_embed = reqs.iter().any(|r| r.include_embed);
        let eos = self.tokenizer.eos_token_ids().to_vec();
        let mut samplers: Vec<Option<TokenSampler>> =
            reqs.iter().map(|r| sampler(&r.sampling)).collect();
        let mut entries: Vec<Vec<PositionProfile>> = vec![Vec::new(); b];
        let mut logits: Vec<Vec<f32>> = vec![Vec::new(); b];
        // Tokens chosen inside the lens pass (when the lens follows the next token).
        let mut pending: Vec<Option<u32>> = vec![None; b];

        self.model.reset();
        self.model.set_left_padding(pads.clone())?;
        self.model.declare_prompt_end(width);
        let device = self.model.device().clone();
        let ids = Tensor::from_vec(padded, (b, width), &device)?;
        // The prompt: every row's last column (its last prompt token) at least; every real
        // column of the rows that ask for all positions, chunk by chunk as `run` streams them.
        let (chunk, positions) = if reqs.iter().any(|r| r.all_positions) {
            (self.model.prefill_chunk(), Positions::All)
        } else {
            // The model chunks a long prompt itself and keeps only the last column.
            (width, Positions::Last)
        };
        for start in (0..width).step_by(chunk.max(1)) {
            let len = chunk.min(width - start);
            let last_chunk = start + len == width;
            let captured = self
                .model
                .forward_capture(&ids.narrow(1, start, len)?, positions)?;
            let mut picks = Vec::new();
            for (row, (req, &pad)) in reqs.iter().zip(&pads).enumerate() {
                let columns = if positions == Positions::Last {
                    0..1
                } else if req.all_positions {
                    pad.saturating_sub(start).min(len)..len
                } else if last_chunk {
                    len - 1..len
                } else {
                    0..0
                };
                for column in columns {
                    let absolute = if positions == Positions::Last {
                        width - 1
                    } else {
                        start + column
                    };
                    let position = absolute - pad;
                    picks.push(Pick {
                        request: row,
                        row,
                        column,
                        position,
                        keep_logits: absolute == width - 1,
                        target: self.target_at(&prompts[row], position, req.generate > 0),
                    });
                }
            }
            let mut choose = |k: usize, z: &[f32]| choose_next(&mut samplers[picks[k].request], z);
            let measured = self.measure_picks(&captured, &picks, include_embed, &mut choose)?;
            let mut kept = measured.kept.into_iter();
            for ((pick, entry), chosen) in picks.iter().zip(measured.entries).zip(measured.chosen) {
                let req = &reqs[pick.request];
                entries[pick.request].push(keep_embed(entry, req.include_embed));
                if pick.keep_logits {
                    logits[pick.request] = kept
                        .next()
                        .ok_or_else(|| Error::Data("the lens kept too few logits".into()))?;
                }
                if chosen.is_some() {
                    pending[pick.request] = chosen;
                }
            }
        }

        let first_logits = logits.clone();

        // Generation: `active` lists the batch rows still running, in the model's row order.
        let mut generated: Vec<Vec<u32>> = vec![Vec::new(); b];
        let mut active: Vec<usize> = (0..b).filter(|&r| reqs[r].generate > 0).collect();
        if !active.is_empty() && active.len() < b {
            self.model.retain_rows(&active)?;
        }
        while !active.is_empty() {
            let mut next_ids = Vec::with_capacity(active.len());
            let mut still = Vec::with_capacity(active.len());
            for (slot, &r) in active.iter().enumerate() {
                let next = match pending[r].take() {
                    Some(t) => t,
                    None => choose_next(&mut samplers[r], &logits[r])?,
                };
                generated[r].push(next);
                let stopped = !observer.token(r);
                let stop = stopped || (!reqs[r].ignore_eos && eos.contains(&next));
                if !stop && generated[r].len() < reqs[r].generate {
                    still.push(slot);
                    next_ids.push(next);
                }
            }
            if still.is_empty() {
                break;
            }
            if still.len() < active.len() {
                self.model.retain_rows(&still)?;
                active = still.iter().map(|&slot| active[slot]).collect();
            }
            let ids = Tensor::from_vec(next_ids, (active.len(), 1), &device)?;
            let captured = self.model.forward_capture(&ids, Positions::Last)?;
            let picks: Vec<Pick> = active
                .iter()
                .enumerate()
                .map(|(row, &r)| {
                    let position = prompts[r].len() + generated[r].len() - 1;
                    Pick {
                        request: r,
                        row,
                        column: 0,
                        position,
                        keep_logits: true,
                        target: self.target_at(&prompts[r], position, true),
                    }
                })
                .collect();
            let mut choose = |k: usize, z: &[f32]| choose_next(&mut samplers[picks[k].request], z);
            let measured = self.measure_picks(&captured, &picks, include_embed, &mut choose)?;
            for (((&r, entry), l), chosen) in active
                .iter()
                .zip(measured.entries)
                .zip(measured.kept)
                .zip(measured.chosen)
            {
                entries[r].push(keep_embed(entry, reqs[r].include_embed));
                logits[r] = l;
                pending[r] = chosen;
            }
        }
        self.model.reset();

        reqs.iter()
            .zip(prompts)
            .zip(generated)
            .zip(entries)
            .zip(first_logits)
            .map(|((((req, p), g), e), first)| Ok((self.assemble(req, p, g, e)?, first)))
            .collect()
    }

    /// The settings a profile of `req` is measured with.
    pub fn provenance(&self, req: &ProfileRequest) -> Provenance {
        let info = self.model.info();
        let spec = self.lens.spec();
        Provenance {
            model: info.name.clone(),
            model_sha256: info.sha256.clone(),
            architecture: info.architecture.as_str().to_string(),
            dtype: info.dtype.as_str().to_string(),
            device: device_name(self.model.device()),
            skipped_blocks: self.model.skipped_blocks(),
            alphas: spec
                .alphas
                .iter()
                .map(|&a| crate::lens::alpha_key(a))
                .collect(),
            top_p: spec.top_p,
            support_threshold: spec.support_threshold,
            chat_template: req.chat,
            add_bos: req.add_bos,
            ignore_eos: req.ignore_eos,
            temperature: req.sampling.temperature,
            sample_top_p: req.sampling.sample_top_p,
            seed: req.sampling.seed,
            crate_version: CRATE_VERSION.to_string(),
            lens: self.lens_kind.record(),
        }
    }

    /// What the lens follows at `position` of a sequence with `prompt`: the given token, the next
    /// prompt token, or (the last position of a sequence that generates) the token about to be
    /// chosen.
    fn target_at(&self, prompt: &[u32], position: usize, will_generate: bool) -> GroupTarget {
        match self.lens.spec().target {
            TargetToken::None => GroupTarget::None,
            TargetToken::Token(t) => GroupTarget::Known(t),
            TargetToken::Next => match prompt.get(position + 1) {
                Some(&t) => GroupTarget::Known(t),
                None if will_generate => GroupTarget::Choose,
                None => GroupTarget::None,
            },
        }
    }

    /// Lens statistics of captured residuals of one sequence; returns one entry per captured
    /// position (the first being `first_position`), the last position's final-layer logits, and
    /// the token `sampler` chose from them when the lens follows the next token.
    fn measure(
        &self,
        captured: &Captured,
        first_position: usize,
        include_embed: bool,
        prompt: &[u32],
        will_generate: bool,
        sampler: &mut Option<TokenSampler>,
    ) -> Result<(Vec<PositionProfile>, Vec<f32>, Option<u32>)> {
        let p = captured.residuals.first().map_or(Ok(0), |l| l.dim(1))?;
        let picks: Vec<Pick> = (0..p)
            .map(|column| {
                let position = first_position + column;
                Pick {
                    request: 0,
                    row: 0,
                    column,
                    position,
                    keep_logits: column + 1 == p,
                    target: self.target_at(prompt, position, will_generate),
                }
            })
            .collect();
        let mut choose = |_: usize, logits: &[f32]| choose_next(sampler, logits);
        let mut measured = self.measure_picks(captured, &picks, include_embed, &mut choose)?;
        let logits = measured
            .kept
            .pop()
            .ok_or_else(|| Error::Data("lens returned no logits for the last row".into()))?;
        Ok((measured.entries, logits, measured.chosen.pop().flatten()))
    }

    /// The residual streams a pick is read at, in order, the last being the final block's (the
    /// model's own distribution). With the attention read point that last one is extra: measured
    /// for KL and sampling, then dropped.
    fn read_layers<'a>(
        &self,
        captured: &'a Captured,
        include_embed: bool,
    ) -> Result<Vec<&'a Tensor>> {
        let r = &captured.residuals;
        let embed = r.first().filter(|_| include_embed);
        let last = r
            .last()
            .ok_or_else(|| Error::Data("the model returned no residual stream".into()))?;
        let mids = &captured.after_attention;
        let (attn, mlp) = (&captured.attention_writes, &captured.mlp_writes);
        let blocks = r.len().saturating_sub(1);
        let point = self.read_point;
        let missing =
            |what: &str, n: usize| Err(Error::Data(format!("{n} {what} for {blocks} blocks")));
        if point.reads_mid_block() && mids.len() != blocks {
            return missing("mid-block residuals", mids.len());
        }
        if point.reads_writes() && (attn.len() != blocks || mlp.len() != blocks) {
            return missing("attention and MLP writes", attn.len().min(mlp.len()));
        }
        Ok(match point {
            ReadPoint::Block => embed.into_iter().chain(&r[1..]).collect(),
            ReadPoint::Attention => embed.into_iter().chain(mids).chain([last]).collect(),
            ReadPoint::AttnOut => embed.into_iter().chain(attn).chain([last]).collect(),
            ReadPoint::MlpOut => embed.into_iter().chain(mlp).chain([last]).collect(),
            ReadPoint::Both => embed
                .into_iter()
                .chain(mids.iter().zip(&r[1..]).flat_map(|(m, b)| [m, b]))
                .collect(),
            ReadPoint::Components => embed
                .into_iter()
                .chain(
                    attn.iter()
                        .zip(mlp)
                        .zip(&r[1..])
                        .flat_map(|((a, m), b)| [a, m, b]),
                )
                .collect(),
        })
    }

    /// Lens statistics at the picked (row, column)s of captured residuals ([b, p, d] per layer),
    /// one entry per pick, the final-block logits of the picks that keep them, in order, and the
    /// tokens chosen by `choose(pick, final logits)` for the picks whose target is
    /// [`GroupTarget::Choose`].
    fn measure_picks(
        &self,
        captured: &Captured,
        picks: &[Pick],
        include_embed: bool,
        choose: &mut (dyn FnMut(usize, &[f32]) -> Result<u32> + Send),
    ) -> Result<Measured> {
        if picks.is_empty() {
            return Ok(Measured {
                entries: Vec::new(),
                kept: Vec::new(),
                chosen: Vec::new(),
            });
        }
        let read = self.read_layers(captured, include_embed)?;
        // A tuned lens translates each layer's residual first (the last block's stays as is).
        let translated: Vec<Tensor>;
        let used: Vec<&Tensor> = match self.lens_kind.tuned() {
            None => read,
            Some(t) => {
                let from = usize::from(!include_embed);
                translated = read
                    .iter()
                    .enumerate()
                    .map(|(k, r)| t.translate(from + k, r))
                    .collect::<Result<_>>()?;
                translated.iter().collect()
            }
        };
        let nl = used.len();
        // [b, p, d] per layer → [b, p, layers, d] → one row per (pick, layer), pick-major.
        let stacked = Tensor::stack(&used, 2)?;
        let (b, p, _, d) = stacked.dims4()?;
        let flat = stacked.reshape((b * p, nl * d))?;
        let all_in_order = picks.len() == b * p
            && picks
                .iter()
                .enumerate()
                .all(|(i, k)| k.row * p + k.column == i);
        let rows = if all_in_order {
            flat
        } else {
            let idx: Vec<u32> = picks
                .iter()
                .map(|k| (k.row * p + k.column) as u32)
                .collect();
            flat.index_select(&Tensor::new(idx.as_slice(), flat.device())?, 0)?
        };
        let rows = rows.reshape((picks.len() * nl, d))?;
        let keep: Vec<usize> = picks
            .iter()
            .enumerate()
            .filter(|(_, k)| k.keep_logits)
            .map(|(i, _)| i * nl + nl - 1)
            .collect();
        let spec = self.lens.spec();
        let (stats, kept, targets) = if spec.relates_rows() {
            let targets: Vec<GroupTarget> = picks.iter().map(|k| k.target).collect();
            let out = self.lens.apply_groups(
                &self.model,
                &rows,
                Groups {
                    size: nl,
                    kl: spec.kl_to_final,
                    targets: &targets,
                    choose,
                },
                &keep,
            )?;
            (out.stats, out.kept, out.targets)
        } else {
            let (stats, kept) = self.lens.apply_keep_rows(&self.model, &rows, &keep)?;
            (stats, kept, vec![None; picks.len()])
        };
        // Read points of one kind that is not the block output (the residual after attention, or
        // a write): the final block's row was read for KL and sampling only.
        let shown = match self.read_point {
            ReadPoint::Attention | ReadPoint::AttnOut | ReadPoint::MlpOut => nl - 1,
            ReadPoint::Block | ReadPoint::Both | ReadPoint::Components => nl,
        };
        let entries = picks
            .iter()
            .zip(stats.chunks(nl))
            .zip(&targets)
            .map(|((pick, row), &target)| {
                // The group's last row is the model's own distribution, shown or not.
                let last = &row[nl - 1];
                let row = &row[..shown];
                let (embed, blocks) = if include_embed {
                    (Some(&row[0]), &row[1..])
                } else {
                    (None, row)
                };
                PositionProfile::from_stats(pick.position, spec, embed, blocks, last, target)
            })
            .collect();
        let chosen = picks
            .iter()
            .zip(targets)
            .map(|(k, t)| t.filter(|_| k.target == GroupTarget::Choose))
            .collect();
        Ok(Measured {
            entries,
            kept,
            chosen,
        })
    }
}

/// A tuned lens with a mid-block read point.
fn tuned_mid_block() -> Error {
    Error::invalid(
        "a tuned lens has translators for the block outputs only; read it at --read-point block (or use --lens logit for the mid-block point and the blocks' attention and MLP writes)",
    )
}

/// The next token from `logits`: greedy (argmax) without a sampler.
fn choose_next(sampler: &mut Option<TokenSampler>, logits: &[f32]) -> Result<u32> {
    match sampler {
        None => Ok(argmax(logits)),
        Some(s) => s.sample(logits),
    }
}

/// A batch measures layer 0 when any of its requests asks; the others drop it.
fn keep_embed(mut entry: PositionProfile, include_embed: bool) -> PositionProfile {
    if !include_embed {
        entry.embed = None;
    }
    entry
}

/// Refuses a negative or NaN temperature and a nucleus mass outside (0, 1].
fn check_sampling(sampling: &Sampling) -> Result<()> {
    let t = sampling.temperature;
    if t < 0.0 || t.is_nan() {
        return Err(Error::invalid(format!("temperature must be ≥ 0, got {t}")));
    }
    // Logits divided by a smaller one overflow f32 and the sampler fails; such a temperature is
    // greedy decoding in all but name.
    if t > 0.0 && t < 1e-6 {
        return Err(Error::invalid(format!(
            "temperature {t} is too small to sample with; give 0 for greedy decoding or at least 1e-6"
        )));
    }
    if let Some(p) = sampling.sample_top_p {
        if !(p > 0.0 && p <= 1.0) {
            return Err(Error::invalid(format!(
                "sampling top-p must be in (0, 1], got {p}"
            )));
        }
    }
    Ok(())
}

/// `cpu`, `cuda:N`, `metal:N`.
pub fn device_name(device: &candle_core::Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

fn sampler(s: &Sampling) -> Option<TokenSampler> {
    if s.temperature <= 0.0 {
        return None;
    }
    Some(TokenSampler::new(s.seed, s.temperature, s.sample_top_p))
}

/// Greedy choice: the largest logit, smallest id among equals.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}
