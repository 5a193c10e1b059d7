//! The logit lens: decode residual streams with the model's own final norm and unembedding
//! (plus soft-cap) and reduce each next-token distribution to its statistics, chunk by chunk,
//! so that no [layers × positions × vocab] tensor is ever held.

use candle_core::{DType, Device, Storage, Tensor};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::model::Model;
use crate::phases::{self, Phase};

pub mod data;
mod device;
mod extras;
pub mod heldout;
pub mod shortcut;
pub mod stats;
mod torch_file;
pub mod train;
pub mod trainer;
pub mod tuned;

pub use extras::Extras;
pub use stats::{alpha_key, parse_alpha, row_stats, DistStats, Scratch, StatSpec, TargetToken};
pub use tuned::{LensKind, LensRecord, TunedLens, TunedLensConfig};

/// Upper bound on the logits held at once (one chunk of rows).
const MAX_CHUNK_BYTES: usize = 64 << 20;

/// A logit lens with the statistics to compute.
#[derive(Clone, Debug)]
pub struct Lens {
    spec: StatSpec,
    max_chunk_bytes: usize,
    force_device_path: bool,
}

/// Lens output for a batch of residual rows.
#[derive(Clone, Debug)]
pub struct LensOutput {
    /// One entry per input row.
    pub stats: Vec<DistStats>,
    /// The logits of the row asked for with [`Lens::apply_keep_logits`] (f32, on the host).
    pub kept_logits: Option<Vec<f32>>,
}

/// The target token of one group of rows (one position's layers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupTarget {
    /// No target.
    None,
    /// This token.
    Known(u32),
    /// The token chosen from the group's final logits (the next generated token).
    Choose,
}

/// Chooses a group's target from its final logits.
pub type Chooser<'a> = dyn FnMut(usize, &[f32]) -> Result<u32> + Send + 'a;

/// How [`Lens::apply_groups`] relates the rows of each group.
pub struct Groups<'a> {
    /// Rows per group; the last is the group's final distribution.
    pub size: usize,
    /// Measure KL(final ‖ row).
    pub kl: bool,
    /// One per group.
    pub targets: &'a [GroupTarget],
    /// Called for each [`GroupTarget::Choose`] group, in group order.
    pub choose: &'a mut Chooser<'a>,
}

/// What [`Lens::apply_groups`] returns.
#[derive(Clone, Debug)]
pub struct GroupedOutput {
    /// One entry per row.
    pub stats: Vec<DistStats>,
    /// The logits of the kept rows, in order.
    pub kept: Vec<Vec<f32>>,
    /// Each group's target (chosen or given).
    pub targets: Vec<Option<u32>>,
}

impl Lens {
    /// A lens computing `spec`; fails on α < 0 or p outside (0, 1].
    pub fn new(spec: StatSpec) -> Result<Self> {
        spec.validate()?;
        Ok(Self {
            spec,
            max_chunk_bytes: MAX_CHUNK_BYTES,
            force_device_path: false,
        })
    }

    pub fn spec(&self) -> &StatSpec {
        &self.spec
    }

    /// Limit the logits held at once (bytes); smaller chunks trade speed for memory.
    pub fn with_max_chunk_bytes(mut self, bytes: usize) -> Self {
        self.max_chunk_bytes = bytes.max(1);
        self
    }

    /// Use the tensor-op reduction (the one GPUs run) even on the CPU; for cross-checks.
    pub fn with_device_path(mut self, on: bool) -> Self {
        self.force_device_path = on;
        self
    }

    /// Statistics of `softmax(unembed(final_norm(x)))` for every row of `resid`.
    ///
    /// # Shapes
    /// `resid`: [rows, d]
    pub fn apply(&self, model: &Model, resid: &Tensor) -> Result<Vec<DistStats>> {
        Ok(self.apply_keep_logits(model, resid, None)?.stats)
    }

    /// As [`Lens::apply`], also returning the logits of row `keep` (for sampling the next token
    /// from exactly the distribution the lens measured).
    pub fn apply_keep_logits(
        &self,
        model: &Model,
        resid: &Tensor,
        keep: Option<usize>,
    ) -> Result<LensOutput> {
        let keep: Vec<usize> = keep.into_iter().collect();
        let (stats, mut kept) = self.apply_keep_rows(model, resid, &keep)?;
        Ok(LensOutput {
            stats,
            kept_logits: kept.pop(),
        })
    }

    /// As [`Lens::apply`], also returning the logits of each row in `keep`, in that order (a
    /// batch samples each sequence's next token from them).
    ///
    /// # Errors
    /// When a row of `keep` is not a row of `resid`.
    pub fn apply_keep_rows(
        &self,
        model: &Model,
        resid: &Tensor,
        keep: &[usize],
    ) -> Result<(Vec<DistStats>, Vec<Vec<f32>>)> {
        self.apply_inner(model, resid, keep, None)
    }

    /// As [`Lens::apply_keep_rows`], for rows in groups of `groups.size` — one position's layers,
    /// its final distribution (the last block) last — adding to each row its KL divergence from
    /// the group's final distribution (`groups.kl`) and the log-probability and rank of the group's
    /// target token. A [`GroupTarget::Choose`] target is chosen by `choose(group, final logits)`
    /// from exactly the logits the lens measured, before the group's statistics are taken (so a
    /// generated token can be followed through the layers that predicted it). Returns the
    /// statistics, the kept logits, and each group's target.
    ///
    /// # Errors
    /// When `groups.targets` does not have one entry per group, or a target is outside the
    /// vocabulary.
    pub fn apply_groups(
        &self,
        model: &Model,
        resid: &Tensor,
        groups: Groups<'_>,
        keep: &[usize],
    ) -> Result<GroupedOutput> {
        let (rows, _) = resid.dims2()?;
        if groups.size == 0 || rows != groups.size * groups.targets.len() {
            return Err(Error::invalid(format!(
                "{rows} rows are not {} groups of {}",
                groups.targets.len(),
                groups.size
            )));
        }
        let mut targets: Vec<Option<u32>> = vec![None; groups.targets.len()];
        let (stats, kept) = self.apply_inner(model, resid, keep, Some((groups, &mut targets)))?;
        Ok(GroupedOutput {
            stats,
            kept,
            targets,
        })
    }

    fn apply_inner(
        &self,
        model: &Model,
        resid: &Tensor,
        keep: &[usize],
        groups: Option<(Groups<'_>, &mut Vec<Option<u32>>)>,
    ) -> Result<(Vec<DistStats>, Vec<Vec<f32>>)> {
        // As the decoder's blocks (crate::threads): the chunks' products and statistics are
        // parallel operations, started from one of rayon's threads on the CPU.
        if matches!(model.device(), candle_core::Device::Cpu) {
            crate::threads::on_pool(|| self.apply_chunks(model, resid, keep, groups))
        } else {
            self.apply_chunks(model, resid, keep, groups)
        }
    }

    fn apply_chunks(
        &self,
        model: &Model,
        resid: &Tensor,
        keep: &[usize],
        mut groups: Option<(Groups<'_>, &mut Vec<Option<u32>>)>,
    ) -> Result<(Vec<DistStats>, Vec<Vec<f32>>)> {
        let (rows, _) = resid.dims2()?;
        if let Some(bad) = keep.iter().find(|&&k| k >= rows) {
            return Err(Error::invalid(format!(
                "cannot keep the logits of row {bad} of {rows}"
            )));
        }
        let vocab = model.info().vocab_size.max(1);
        let mut chunk = (self.max_chunk_bytes / (vocab * 4)).max(1);
        if let Some((g, _)) = &groups {
            // Whole groups per chunk: a row's final distribution is in its chunk.
            chunk = (chunk / g.size).max(1) * g.size;
        }
        let mut stats = Vec::with_capacity(rows);
        let mut kept: Vec<Option<Vec<f32>>> = vec![None; keep.len()];
        let mut start = 0;
        while start < rows {
            let n = chunk.min(rows - start);
            let x = resid.narrow(0, start, n)?;
            let logits = phases::timed(Phase::LensProduct, || -> Result<Tensor> {
                Ok(model
                    .unembed(&model.final_norm(&x)?)?
                    .to_dtype(DType::F32)?
                    .contiguous()?)
            })?;
            let chunk_stats = phases::timed(Phase::LensStats, || {
                self.chunk_stats(&logits, start, keep, &mut kept, &mut groups)
            })?;
            stats.extend(chunk_stats);
            start += n;
        }
        let kept = kept
            .into_iter()
            .map(|k| k.ok_or_else(|| Error::Data("the lens skipped a kept row".into())))
            .collect::<Result<Vec<_>>>()?;
        Ok((stats, kept))
    }

    /// The statistics of one chunk of logits (rows `start..` of the lens input), with the kept
    /// rows copied out and each group's target chosen and measured.
    fn chunk_stats(
        &self,
        logits: &Tensor,
        start: usize,
        keep: &[usize],
        kept: &mut [Option<Vec<f32>>],
        groups: &mut Option<(Groups<'_>, &mut Vec<Option<u32>>)>,
    ) -> Result<Vec<DistStats>> {
        let n = logits.dim(0)?;
        for (slot, &k) in kept.iter_mut().zip(keep) {
            if (start..start + n).contains(&k) {
                *slot = Some(logits.get(k - start)?.to_vec1::<f32>()?);
            }
        }
        let mut chunk_stats = self.stats_of(logits)?;
        if let Some((g, chosen)) = groups {
            let size = g.size;
            let first_group = start / size;
            for local in 0..n / size {
                let grp = first_group + local;
                chosen[grp] = match g.targets[grp] {
                    GroupTarget::None => None,
                    GroupTarget::Known(t) => Some(t),
                    GroupTarget::Choose => {
                        let final_row = logits.get(local * size + size - 1)?.to_vec1::<f32>()?;
                        Some((g.choose)(grp, &final_row)?)
                    }
                };
            }
            let plan: Vec<extras::RowPlan> = (0..n)
                .map(|i| {
                    let within = i % size;
                    extras::RowPlan {
                        final_row: g.kl.then_some(i - within + size - 1),
                        target: chosen[(start + i) / size],
                    }
                })
                .collect();
            let more = if self.force_device_path || !matches!(logits.device(), Device::Cpu) {
                extras::device_extras(logits, &plan)?
            } else {
                extras::cpu_extras(logits, &plan)?
            };
            for (s, e) in chunk_stats.iter_mut().zip(more) {
                s.extras = e;
            }
        }
        Ok(chunk_stats)
    }

    /// Statistics of `softmax(logits)` for every row, for logits made elsewhere (an image
    /// classifier's head read at every block, [`crate::runner::images`]).
    ///
    /// # Shapes
    /// `logits`: [rows, classes]
    pub fn apply_to_logits(&self, logits: &Tensor) -> Result<Vec<DistStats>> {
        let logits = logits.to_dtype(DType::F32)?.contiguous()?;
        self.stats_of(&logits)
    }

    /// The device reduction off the CPU (or when forced), the CPU kernel on it.
    fn stats_of(&self, logits: &Tensor) -> Result<Vec<DistStats>> {
        if self.force_device_path || !matches!(logits.device(), Device::Cpu) {
            device::chunk_stats(logits, &self.spec)
        } else {
            cpu_chunk_stats(logits, &self.spec)
        }
    }
}

/// Row statistics of a contiguous f32 CPU tensor [rows, vocab], rows in parallel.
fn cpu_chunk_stats(logits: &Tensor, spec: &StatSpec) -> Result<Vec<DistStats>> {
    let (_, vocab) = logits.dims2()?;
    if vocab == 0 {
        return Err(Error::Data(
            "the model produced logits over an empty vocabulary".into(),
        ));
    }
    let (storage, layout) = logits.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        return Err(Error::Device("expected logits on the CPU".into()));
    };
    let data = &cpu.as_slice::<f32>()?[layout.start_offset()..];
    let data = &data[..logits.elem_count()];
    data.par_chunks(vocab)
        .map_init(Scratch::default, |scratch, row| {
            row_stats(row, spec, scratch)
        })
        .collect()
}
