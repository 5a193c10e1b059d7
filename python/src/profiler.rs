//! `Profiler` and `Profile`: a loaded model and the profiles it measures.

use std::sync::{Arc, Mutex, MutexGuard};

use entropy_lens::cli::{profile_loaded, ProfileOptions};
use entropy_lens::lens::{LensKind, TargetToken};
use entropy_lens::model::{parse_device, LoadOptions, WeightDType};
use entropy_lens::ndarray::Array2;
use entropy_lens::plots::{delta_bars, entropy_heatmap, target_trace, HeatMetric};
use entropy_lens::profile::{EntropyProfile, ReadPoint};
use entropy_lens::runner::Profiler;
use entropy_lens::watch::Watch;
use numpy::{IntoPyArray, PyArray1, PyArray2};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;

use crate::errors::IntoPy;
use crate::watched::run_watched;

/// A loaded model with its tokenizer (the Rust `Profiler`).
#[pyclass(module = "entropy_lens._native", name = "Profiler")]
pub struct PyProfiler {
    inner: Mutex<Option<Profiler>>,
    /// The last tuned lens read, by its spec, so repeated calls do not reread it.
    lens_cache: Mutex<Option<(String, LensKind)>>,
    model_name: String,
}

fn closed() -> PyErr {
    PyValueError::new_err("this Profiler is closed; load the model again with Profiler.load(...)")
}

impl PyProfiler {
    /// The model, waited for with the GIL released: another thread's call may hold it while its
    /// own wait needs the GIL (a blocking lock here would deadlock the two).
    fn lock(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, Option<Profiler>>> {
        loop {
            match self.inner.try_lock() {
                Ok(guard) => return Ok(guard),
                Err(std::sync::TryLockError::WouldBlock) => {
                    py.detach(|| std::thread::sleep(std::time::Duration::from_millis(2)));
                    py.check_signals()?;
                }
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    return Err(PyValueError::new_err(
                        "this Profiler was poisoned by an earlier failure; load the model again",
                    ))
                }
            }
        }
    }

    fn lens(&self, spec: &str) -> PyResult<Option<LensKind>> {
        if spec == "logit" {
            return Ok(None);
        }
        let mut cache = self
            .lens_cache
            .lock()
            .map_err(|_| PyValueError::new_err("lens cache poisoned"))?;
        if let Some((s, kind)) = cache.as_ref() {
            if s == spec {
                return Ok(Some(kind.clone()));
            }
        }
        let kind = LensKind::parse(spec).py()?;
        *cache = Some((spec.to_string(), kind.clone()));
        Ok(Some(kind))
    }
}

#[pymethods]
impl PyProfiler {
    /// Loads `model` (see the Python `Profiler.load`).
    #[staticmethod]
    #[pyo3(signature = (model=None, device="cpu", dtype=None))]
    fn load(
        py: Python<'_>,
        model: Option<String>,
        device: &str,
        dtype: Option<&str>,
    ) -> PyResult<Self> {
        let dtype: Option<WeightDType> = dtype.map(str::parse).transpose().py()?;
        let device = parse_device(device).py()?;
        let watch = Arc::new(Watch::new());
        let profiler = run_watched(py, &watch, None, move |_| {
            let source = entropy_lens::fetch::model_source_or_default(model.as_deref())?;
            let loaded = entropy_lens::model::load(&source, &LoadOptions { device, dtype })?;
            Profiler::new(loaded, Default::default())
        })?;
        let model_name = profiler.model.info().name.clone();
        Ok(Self {
            inner: Mutex::new(Some(profiler)),
            lens_cache: Mutex::new(None),
            model_name,
        })
    }

    #[getter]
    fn name(&self) -> String {
        self.model_name.clone()
    }

    /// `{name, architecture, n_layers, d_model, vocab_size, context_length, ...}`.
    fn info(&self, py: Python<'_>) -> PyResult<String> {
        let guard = self.lock(py)?;
        let p = guard.as_ref().ok_or_else(closed)?;
        let i = p.model.info();
        Ok(serde_json::json!({
            "name": i.name,
            "architecture": i.architecture.as_str(),
            "dtype": i.dtype.as_str(),
            "sha256": i.sha256,
            "source": i.source,
            "n_layers": i.n_layers,
            "d_model": i.d_model,
            "vocab_size": i.vocab_size,
            "context_length": i.context_length,
            "device": entropy_lens::runner::device_name(p.model.device()),
        })
        .to_string())
    }

    /// Frees the model; later calls raise `ValueError`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        *self.lock(py)? = None;
        Ok(())
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.lock(py)?.is_none())
    }

    /// The token strings of `ids`, one per id.
    fn tokens(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<Vec<String>> {
        let guard = self.lock(py)?;
        let p = guard.as_ref().ok_or_else(closed)?;
        Ok(ids.iter().map(|&i| p.tokenizer.token_text(i)).collect())
    }

    /// The text of `ids`, decoded.
    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        let guard = self.lock(py)?;
        let p = guard.as_ref().ok_or_else(closed)?;
        p.tokenizer.decode(&ids).py()
    }

    /// Profiles `prompts`; the options are the CLI's `profile` flags (see the Python wrapper).
    #[pyo3(signature = (
        prompts, *, generate, chat, temperature, sample_top_p, seed, ignore_eos, all_positions,
        alphas, support_threshold, top_p, top_p_ids, top_k, embed, add_bos, kl, target, lens,
        read_point, skip, batch_size, progress=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn profile(
        &self,
        py: Python<'_>,
        prompts: Vec<String>,
        generate: i64,
        chat: bool,
        temperature: f64,
        sample_top_p: Option<f64>,
        seed: u64,
        ignore_eos: bool,
        all_positions: bool,
        alphas: Vec<f64>,
        support_threshold: f64,
        top_p: f64,
        top_p_ids: bool,
        top_k: usize,
        embed: bool,
        add_bos: bool,
        kl: bool,
        target: Option<String>,
        lens: &str,
        read_point: &str,
        skip: Vec<usize>,
        batch_size: Option<usize>,
        progress: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyProfile>> {
        if generate < 0 {
            return Err(PyValueError::new_err(format!(
                "generate must be 0 or more tokens, got {generate}"
            )));
        }
        if !temperature.is_finite() || temperature < 0.0 {
            return Err(PyValueError::new_err(format!(
                "temperature must be a finite number ≥ 0, got {temperature}"
            )));
        }
        if prompts.is_empty() {
            return Err(PyValueError::new_err("no prompts given"));
        }
        let opts = ProfileOptions {
            generate: generate as usize,
            ignore_eos,
            seed,
            temperature,
            sample_top_p,
            all_positions,
            alphas,
            support_threshold,
            top_p,
            top_p_ids,
            top_k,
            embed,
            no_bos: !add_bos,
            chat,
            skip,
            batch_size,
            kl,
            target: target
                .as_deref()
                .map(TargetToken::parse)
                .transpose()
                .py()?
                .unwrap_or_default(),
            read_point: ReadPoint::parse(read_point).py()?,
            ..Default::default()
        };
        let lens = self.lens(lens)?;
        let watch = Arc::new(Watch::new());
        watch.set_total(prompts.len() * opts.generate.max(1));
        let mut guard = self.lock(py)?;
        let profiler = guard.as_mut().ok_or_else(closed)?;
        let profiles = run_watched(py, &watch, progress.as_ref(), |w| {
            let mut out = Vec::with_capacity(prompts.len());
            profile_loaded(profiler, &opts, lens, &prompts, w, |p| {
                if opts.generate == 0 {
                    w.add_done(1);
                }
                w.check("profiling stopped")?;
                out.push(p.clone());
                Ok(())
            })?;
            w.check("profiling stopped")?;
            Ok(out)
        })?;
        Ok(profiles.into_iter().map(PyProfile::from).collect())
    }
}

/// One prompt's entropy profile (the Rust `EntropyProfile`).
#[pyclass(module = "entropy_lens._native", name = "Profile", frozen)]
pub struct PyProfile {
    pub inner: EntropyProfile,
}

impl From<EntropyProfile> for PyProfile {
    fn from(inner: EntropyProfile) -> Self {
        Self { inner }
    }
}

fn matrix<'py>(py: Python<'py>, m: Array2<f64>) -> Bound<'py, PyArray2<f64>> {
    m.into_pyarray(py)
}

/// A chart as (Plotly JSON, static SVG sketch, height in pixels): the Python `Figure` keeps the
/// sketch for notebook outputs.
pub type ChartParts = (String, String, usize);

pub fn chart_parts(chart: &entropy_lens::plots::Chart) -> ChartParts {
    (chart.to_json(), chart.to_svg(), chart.height())
}

fn chart_json(chart: entropy_lens::Result<entropy_lens::plots::Chart>) -> PyResult<ChartParts> {
    Ok(chart_parts(&chart.py()?))
}

#[pymethods]
impl PyProfile {
    /// Parses one line of `profile --json` (or a profile's `to_json()`).
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        Ok(Self {
            inner: EntropyProfile::from_json(text).py()?,
        })
    }

    /// The profile as one JSON line, byte for byte what `entropy-lens profile --json` prints.
    fn to_json(&self) -> PyResult<String> {
        self.inner.to_json_line().py()
    }

    #[getter]
    fn model(&self) -> String {
        self.inner.model.clone()
    }
    #[getter]
    fn prompt(&self) -> String {
        self.inner.prompt.clone()
    }
    #[getter]
    fn n_blocks(&self) -> usize {
        self.inner.n_blocks
    }
    #[getter]
    fn read_point(&self) -> String {
        self.inner.read_point.as_str().into()
    }
    #[getter]
    fn prompt_ids(&self) -> Vec<u32> {
        self.inner.prompt_ids.clone()
    }
    #[getter]
    fn generated_ids(&self) -> Vec<u32> {
        self.inner.generated_ids.clone()
    }
    #[getter]
    fn tokens(&self) -> Vec<String> {
        self.inner.tokens.clone()
    }
    #[getter]
    fn generated_text(&self) -> String {
        self.inner.generated_text.clone()
    }
    #[getter]
    fn top_p(&self) -> f64 {
        self.inner.top_p
    }
    /// Token position of each measured row (an index into `tokens`).
    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        self.inner
            .positions
            .iter()
            .map(|p| p.position as i64)
            .collect::<Vec<_>>()
            .into_pyarray(py)
    }
    /// Labels of the columns: `1` … `L`, or `1.a` … after each block's attention.
    #[getter]
    fn point_labels(&self) -> Vec<String> {
        self.inner.point_labels()
    }
    /// Whether layer 0 (the embedding output) is the first column.
    #[getter]
    fn has_embed(&self) -> bool {
        self.inner
            .positions
            .first()
            .is_some_and(|p| p.embed.is_some())
    }
    /// The Rényi orders measured, as their keys (`0.5`, `2`, `inf`).
    #[getter]
    fn alphas(&self) -> Vec<String> {
        self.inner
            .positions
            .first()
            .map(|p| p.renyi.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn shannon<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        Ok(matrix(py, self.inner.shannon_matrix().py()?))
    }
    fn renyi<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let alpha = entropy_lens::lens::parse_alpha(key).py()?;
        let known = self.alphas();
        if !known
            .iter()
            .any(|k| entropy_lens::lens::parse_alpha(k).ok() == Some(alpha))
        {
            return Err(PyKeyError::new_err(format!(
                "Rényi order {key} was not measured (measured: {}); profile with alphas=[{key}]",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        }
        Ok(matrix(py, self.inner.renyi_matrix(alpha).py()?))
    }
    fn top_p_count<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        Ok(matrix(py, self.inner.top_p_matrix().py()?))
    }
    fn kl_to_final<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyArray2<f64>>>> {
        if self.inner.positions.iter().all(|p| p.kl_to_final.is_none()) {
            return Ok(None);
        }
        Ok(Some(matrix(py, self.inner.kl_matrix().py()?)))
    }
    /// Each position's prediction depth (1-based point); `None` when a position has none (a
    /// profile written before depths existed).
    fn prediction_depth<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<i64>>> {
        let depths: Option<Vec<i64>> = self
            .inner
            .positions
            .iter()
            .map(|p| p.prediction_depth.map(|d| d as i64))
            .collect();
        depths.map(|d| d.into_pyarray(py))
    }
    /// (ranks, logprobs, ids) of the followed token, each positions × points; `None` without a
    /// target.
    #[allow(clippy::type_complexity)]
    fn target<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<
        Option<(
            Bound<'py, PyArray2<f64>>,
            Bound<'py, PyArray2<f64>>,
            Bound<'py, PyArray1<i64>>,
        )>,
    > {
        let traced: Vec<_> = self
            .inner
            .positions
            .iter()
            .map(|p| p.target.as_ref())
            .collect();
        if traced.iter().all(Option::is_none) {
            return Ok(None);
        }
        let n = self.inner.positions.len();
        let l = traced
            .iter()
            .flatten()
            .map(|t| t.rank.len())
            .max()
            .unwrap_or(0);
        let mut rank = Array2::from_elem((n, l), f64::NAN);
        let mut logprob = Array2::from_elem((n, l), f64::NAN);
        let mut ids = vec![-1i64; n];
        for (i, t) in traced.iter().enumerate() {
            if let Some(t) = t {
                ids[i] = t.id as i64;
                for (j, (&r, &lp)) in t.rank.iter().zip(&t.logprob).enumerate() {
                    rank[[i, j]] = r as f64;
                    logprob[[i, j]] = lp;
                }
            }
        }
        Ok(Some((
            matrix(py, rank),
            matrix(py, logprob),
            ids.into_pyarray(py),
        )))
    }
    /// Top-k (id, probability) per row and point.
    fn top_k(&self) -> Vec<Vec<Vec<(u32, f64)>>> {
        self.inner
            .positions
            .iter()
            .map(|p| p.top_k.clone())
            .collect()
    }

    /// Plotly JSON of the Rust charts (`plotly.io.from_json` reads it).
    #[pyo3(signature = (metric="shannon"))]
    fn heatmap_chart(&self, metric: &str) -> PyResult<ChartParts> {
        chart_json(entropy_heatmap(
            &self.inner,
            None,
            HeatMetric::parse(metric).py()?,
        ))
    }
    fn delta_bars_chart(&self, position: usize) -> PyResult<ChartParts> {
        chart_json(delta_bars(&self.inner, position))
    }
    fn trace_chart(&self, position: usize) -> PyResult<ChartParts> {
        chart_json(target_trace(&self.inner, position))
    }
    fn __len__(&self) -> usize {
        self.inner.positions.len()
    }
}
