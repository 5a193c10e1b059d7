//! Weight storage: GGUF (quantized or dequantized at load) or safetensors (Hugging Face layout),
//! behind one prefix-scoped accessor that the model files use with Hugging Face tensor names.
//!
//! The model code always asks for Hugging Face names (`model.layers.3.self_attn.q_proj.weight`);
//! a GGUF store translates them to llama.cpp names (`blk.3.attn_q.weight`). This keeps each
//! family file a single, plain description of the architecture.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{DType, Device, Storage, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How the weights of the blocks and of the unembedding are held in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WeightDType {
    /// Keep the GGUF quantization (fast to load, small; products decode the weights on the fly and
    /// keep activations in f32, see `model/qmatmul.rs`).
    #[default]
    Quantized,
    F32,
    F16,
    BF16,
}

impl WeightDType {
    /// The candle dtype of activations for this weight dtype.
    pub fn activation_dtype(self) -> DType {
        match self {
            WeightDType::Quantized | WeightDType::F32 => DType::F32,
            WeightDType::F16 => DType::F16,
            WeightDType::BF16 => DType::BF16,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WeightDType::Quantized => "q",
            WeightDType::F32 => "f32",
            WeightDType::F16 => "f16",
            WeightDType::BF16 => "bf16",
        }
    }
}

impl FromStr for WeightDType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "q" | "quantized" => Ok(WeightDType::Quantized),
            "f32" | "float32" => Ok(WeightDType::F32),
            "f16" | "float16" => Ok(WeightDType::F16),
            "bf16" | "bfloat16" => Ok(WeightDType::BF16),
            other => Err(Error::invalid(format!(
                "unknown dtype `{other}` (expected q, f32, f16 or bf16)"
            ))),
        }
    }
}

/// A weight matrix [out, in], quantized (GGUF blocks) or dense.
#[derive(Clone, Debug)]
enum Matrix {
    Quantized(Arc<QTensor>),
    Dense(Tensor),
}

/// A linear layer `y = x Wᵀ (+ b)` over quantized or dense weights, with an optional bias.
///
/// Quantized weights are multiplied exactly (f32 activations, see `model/qmatmul.rs`).
#[derive(Clone, Debug)]
pub struct Linear {
    weight: Matrix,
    /// In the dtype of the layer's output (the activation dtype), converted once at load.
    bias: Option<Tensor>,
}

impl Linear {
    /// A layer from a dense weight [out, in] and an optional bias [out] (in the output's dtype):
    /// for building a layer outside a checkpoint, e.g. to benchmark the products.
    pub fn dense(weight: Tensor, bias: Option<Tensor>) -> Self {
        Self {
            weight: Matrix::Dense(weight),
            bias,
        }
    }

    /// # Shapes
    /// `x`: [.., in] → [.., out]
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = self.forward_weight(x)?;
        match &self.bias {
            Some(b) => {
                debug_assert_eq!(b.dtype(), y.dtype(), "bias dtype fixed at load");
                y.broadcast_add(b)
            }
            None => Ok(y),
        }
    }

    fn forward_weight(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match &self.weight {
            Matrix::Quantized(q) => super::qmatmul::forward(q, x),
            Matrix::Dense(w) => {
                // One [rows, in] × [in, out] product over every leading dimension: a batch of
                // decode steps is then one GEMM, not one matrix-vector product per row.
                let dims = x.dims();
                let (inner, lead) = dims.split_last().map_or((0, &[][..]), |(i, l)| (*i, l));
                let rows: usize = lead.iter().product();
                let mut out_dims = lead.to_vec();
                out_dims.push(w.dim(0)?);
                if let Some(y) = few_rows_f32(w, x, rows, inner)? {
                    return y.reshape(out_dims);
                }
                if dims.len() <= 2 {
                    return x.matmul(&w.t()?);
                }
                x.reshape((rows, inner))?.matmul(&w.t()?)?.reshape(out_dims)
            }
        }
    }

    /// One layer whose output is the outputs of `parts` side by side (`[x W₁ᵀ, x W₂ᵀ, …]`), so
    /// that projections reading the same input (q, k, v; gate, up) are one product: when
    /// decoding, each product is a parallel pass over its weights whose start-up cost is paid
    /// per call. The CPU's few-row kernels compute every output row by row as before, so
    /// decoding gives the same bits; elsewhere (prompts through gemm, GPUs) the wider product
    /// may only change the order of f32 summation. `None` when the parts cannot share one
    /// matrix (storage kinds, dtypes or devices differ).
    pub(crate) fn stack(parts: &[Linear]) -> candle_core::Result<Option<Linear>> {
        let Some(first) = parts.first() else {
            return Ok(None);
        };
        let weight = match &first.weight {
            Matrix::Dense(w0) => {
                let mut ws = Vec::with_capacity(parts.len());
                for p in parts {
                    match &p.weight {
                        Matrix::Dense(w)
                            if w.dtype() == w0.dtype()
                                && w.device().same_device(w0.device())
                                && w.dim(1)? == w0.dim(1)? =>
                        {
                            ws.push(w.clone())
                        }
                        _ => return Ok(None),
                    }
                }
                Matrix::Dense(Tensor::cat(&ws, 0)?)
            }
            Matrix::Quantized(q0) => {
                let (_, k) = q0.shape().dims2()?;
                if !matches!(q0.device(), Device::Cpu) {
                    return Ok(None);
                }
                let (mut bytes, mut rows) = (Vec::new(), 0);
                for p in parts {
                    match &p.weight {
                        Matrix::Quantized(q) if q.dtype() == q0.dtype() => {
                            let (n, kq) = q.shape().dims2()?;
                            if kq != k || !matches!(q.device(), Device::Cpu) {
                                return Ok(None);
                            }
                            bytes.extend_from_slice(&q.data()?);
                            rows += n;
                        }
                        _ => return Ok(None),
                    }
                }
                // Rows are whole blocks, so a row-wise concatenation of the bytes is the
                // stacked matrix. candle reads the bytes as blocks in place and asserts their
                // alignment, which a byte vector does not promise: keep the parts apart then.
                if !(bytes.as_ptr() as usize).is_multiple_of(8) {
                    return Ok(None);
                }
                let storage = candle_core::quantized::QStorage::from_data(
                    std::borrow::Cow::Owned(bytes),
                    &Device::Cpu,
                    q0.dtype(),
                )?;
                Matrix::Quantized(Arc::new(QTensor::new(storage, (rows, k))?))
            }
        };
        let bias = if parts.iter().all(|p| p.bias.is_none()) {
            None
        } else {
            // A missing bias is a zero one: adding 0 leaves every output unchanged.
            let dtype = parts
                .iter()
                .find_map(|p| p.bias.as_ref().map(Tensor::dtype))
                .unwrap_or(DType::F32);
            let mut bs = Vec::with_capacity(parts.len());
            for p in parts {
                let (n, _) = p.dims()?;
                bs.push(match &p.bias {
                    Some(b) => b.to_dtype(dtype)?,
                    None => Tensor::zeros(n, dtype, &first.weight_device())?,
                });
            }
            Some(Tensor::cat(&bs, 0)?)
        };
        Ok(Some(Linear { weight, bias }))
    }

    fn weight_device(&self) -> Device {
        match &self.weight {
            Matrix::Quantized(q) => q.device(),
            Matrix::Dense(t) => t.device().clone(),
        }
    }

    /// Whether the checkpoint gave this layer a bias.
    pub fn has_bias(&self) -> bool {
        self.bias.is_some()
    }

    /// `(out, in)`: the weight's shape.
    pub fn dims(&self) -> candle_core::Result<(usize, usize)> {
        match &self.weight {
            Matrix::Quantized(q) => q.shape().dims2(),
            Matrix::Dense(t) => t.dims2(),
        }
    }

    /// Dense weight as f32 [out, in] (dequantizing if needed).
    pub fn dense_weight(&self) -> candle_core::Result<Tensor> {
        match &self.weight {
            Matrix::Quantized(q) => q.dequantize(&q.device()),
            Matrix::Dense(t) => t.to_dtype(DType::F32),
        }
    }
}

/// `x Wᵀ` through [`super::gemv`] when it applies (f32 on the CPU, a few rows: decoding); the
/// result is [rows, out].
fn few_rows_f32(
    w: &Tensor,
    x: &Tensor,
    rows: usize,
    inner: usize,
) -> candle_core::Result<Option<Tensor>> {
    if rows > super::gemv::max_rows()
        || w.dtype() != DType::F32
        || x.dtype() != DType::F32
        || !matches!(w.device(), Device::Cpu)
        || !w.is_contiguous()
    {
        return Ok(None);
    }
    let (n, k) = w.dims2()?;
    if k != inner {
        return Ok(None);
    }
    let x = x.reshape((rows, inner))?.contiguous()?;
    let (ws, wl) = w.storage_and_layout();
    let (xs, xl) = x.storage_and_layout();
    let (Storage::Cpu(wc), Storage::Cpu(xc)) = (&*ws, &*xs) else {
        return Ok(None);
    };
    let wv = &wc.as_slice::<f32>()?[wl.start_offset()..wl.start_offset() + n * k];
    let xv = &xc.as_slice::<f32>()?[xl.start_offset()..xl.start_offset() + rows * k];
    match super::gemv::product(wv, n, k, xv, rows) {
        Some(out) => Ok(Some(Tensor::from_vec(out, (rows, n), &Device::Cpu)?)),
        None => Ok(None),
    }
}

/// Token embedding table; lookups dequantize only the requested rows.
#[derive(Clone, Debug)]
pub struct Embedding {
    table: Matrix,
    hidden: usize,
}

impl Embedding {
    /// # Shapes
    /// `ids`: [b, s] (u32) → [b, s, hidden]
    pub fn forward(&self, ids: &Tensor, dtype: DType) -> candle_core::Result<Tensor> {
        let rows = match &self.table {
            Matrix::Quantized(q) => q.embedding(ids)?,
            Matrix::Dense(w) => {
                let mut dims = ids.dims().to_vec();
                dims.push(self.hidden);
                // A chunk of a longer prompt is a narrowed, non-contiguous view of its ids.
                w.index_select(&ids.flatten_all()?.contiguous()?, 0)?
                    .reshape(dims)?
            }
        };
        rows.to_dtype(dtype)
    }

    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// The same storage used as an unembedding (tied embeddings).
    pub fn as_linear(&self) -> Linear {
        Linear {
            weight: self.table.clone(),
            bias: None,
        }
    }
}

pub(crate) enum Store {
    Gguf {
        path: PathBuf,
        content: gguf_file::Content,
        file: Mutex<File>,
        names: &'static GgufNames,
    },
    Safetensors {
        folder: PathBuf,
        tensors: candle_core::safetensors::MmapedSafetensors,
    },
}

impl Store {
    fn describe(&self) -> String {
        match self {
            Store::Gguf { path, .. } => format!("GGUF file {}", path.display()),
            Store::Safetensors { folder, .. } => format!("safetensors in {}", folder.display()),
        }
    }
}

/// Prefix-scoped view of a weight store, in the manner of candle's `VarBuilder`.
#[derive(Clone)]
pub struct Weights {
    store: Arc<Store>,
    prefix: String,
    dtype: WeightDType,
    device: Device,
}

impl Weights {
    pub(crate) fn new(store: Store, dtype: WeightDType, device: &Device) -> Result<Self> {
        if matches!(store, Store::Safetensors { .. }) && dtype == WeightDType::Quantized {
            return Err(Error::invalid(
                "--dtype q keeps GGUF quantization and needs a GGUF file; use f32, f16 or bf16 with safetensors",
            ));
        }
        Ok(Self {
            store: Arc::new(store),
            prefix: String::new(),
            dtype,
            device: device.clone(),
        })
    }

    /// Open a GGUF file, reading only its header; tensors are read on demand.
    pub(crate) fn open_gguf(path: &Path) -> Result<(gguf_file::Content, File)> {
        // Values candle's reader trusts (it divides by `general.alignment`) are checked first.
        super::gguf_header::check(path)?;
        let mut file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::ModelNotFound {
                path: path.to_path_buf(),
            },
            _ => Error::io(path, e),
        })?;
        let content = gguf_file::Content::read(&mut file).map_err(|e| Error::CorruptGguf {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        // A truncated file still has a readable header: check that every tensor fits.
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        for (name, info) in &content.tensor_infos {
            let corrupt = |reason: String| Error::CorruptGguf {
                path: path.to_path_buf(),
                reason: format!(
                    "tensor `{name}` with dimensions {:?} {reason}",
                    info.shape.dims()
                ),
            };
            // Dimensions come from the file: multiply without wrapping (candle does not check).
            let elems = info
                .shape
                .dims()
                .iter()
                .try_fold(1usize, |n, &d| n.checked_mul(d))
                .ok_or_else(|| corrupt("has more elements than this machine can address".into()))?;
            let block = info.ggml_dtype.block_size();
            if elems % block != 0 {
                return Err(corrupt(format!(
                    "is not a whole number of {:?} blocks of {block} values",
                    info.ggml_dtype
                )));
            }
            let end = (elems / block)
                .checked_mul(info.ggml_dtype.type_size())
                .and_then(|bytes| u64::try_from(bytes).ok())
                .and_then(|bytes| {
                    content
                        .tensor_data_offset
                        .checked_add(info.offset)?
                        .checked_add(bytes)
                })
                .ok_or_else(|| {
                    corrupt(format!("at offset {} lies beyond any file", info.offset))
                })?;
            if end > len {
                return Err(Error::CorruptGguf {
                    path: path.to_path_buf(),
                    reason: format!(
                        "tensor `{name}` ends at byte {end} but the file has {len} bytes (truncated download?)"
                    ),
                });
            }
        }
        Ok((content, file))
    }

    pub(crate) fn gguf(
        path: &Path,
        content: gguf_file::Content,
        file: File,
        names: &'static GgufNames,
        dtype: WeightDType,
        device: &Device,
    ) -> Result<Self> {
        Self::new(
            Store::Gguf {
                path: path.to_path_buf(),
                content,
                file: Mutex::new(file),
                names,
            },
            dtype,
            device,
        )
    }

    pub(crate) fn safetensors(
        folder: &Path,
        files: &[PathBuf],
        dtype: WeightDType,
        device: &Device,
    ) -> Result<Self> {
        // SAFETY: the files are memory-mapped read-only; modifying them while the model is
        // loaded is undefined behaviour, as with every mmap-based loader.
        let tensors = unsafe { candle_core::safetensors::MmapedSafetensors::multi(files) }
            .map_err(|e| Error::CorruptSafetensors {
                folder: folder.to_path_buf(),
                reason: e.to_string(),
            })?;
        Self::new(
            Store::Safetensors {
                folder: folder.to_path_buf(),
                tensors,
            },
            dtype,
            device,
        )
    }

    /// A view whose names are prefixed with `name.`.
    pub fn pp(&self, name: impl std::fmt::Display) -> Self {
        let prefix = if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{}", self.prefix, name)
        };
        Self {
            prefix,
            ..self.clone()
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> WeightDType {
        self.dtype
    }

    pub fn activation_dtype(&self) -> DType {
        self.dtype.activation_dtype()
    }

    /// The parsed header of a GGUF store.
    pub(crate) fn gguf_content(&self) -> Option<&gguf_file::Content> {
        match &*self.store {
            Store::Gguf { content, .. } => Some(content),
            Store::Safetensors { .. } => None,
        }
    }

    /// True when the store is a GGUF file (llama.cpp conventions: permuted Llama Q/K rows,
    /// Gemma norm weights stored as 1 + w).
    pub fn is_gguf(&self) -> bool {
        matches!(*self.store, Store::Gguf { .. })
    }

    fn full_name(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{}", self.prefix, name)
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        let full = self.full_name(name);
        match &*self.store {
            Store::Gguf { content, names, .. } => names
                .to_gguf(&full)
                .map(|n| content.tensor_infos.contains_key(&n))
                .unwrap_or(false),
            Store::Safetensors { tensors, .. } => tensors.get(&full).is_ok(),
        }
    }

    fn missing(&self, full: &str) -> Error {
        Error::MissingWeight {
            name: full.to_string(),
            source_desc: self.store.describe(),
        }
    }

    fn qtensor(&self, full: &str) -> Result<QTensor> {
        let Store::Gguf {
            path,
            content,
            file,
            names,
        } = &*self.store
        else {
            unreachable!("qtensor is only called on GGUF stores")
        };
        let gname = names.to_gguf(full).ok_or_else(|| self.missing(full))?;
        if !content.tensor_infos.contains_key(&gname) {
            return Err(self.missing(&format!("{full} (GGUF `{gname}`)")));
        }
        let mut file = file
            .lock()
            .map_err(|_| Error::Config("weight file lock poisoned".into()))?;
        content
            .tensor(&mut *file, &gname, &self.device)
            .map_err(|e| Error::CorruptGguf {
                path: path.clone(),
                reason: format!("reading tensor `{gname}`: {e}"),
            })
    }

    fn dense(&self, full: &str, dtype: DType) -> Result<Tensor> {
        match &*self.store {
            Store::Gguf { .. } => Ok(self
                .qtensor(full)?
                .dequantize(&self.device)?
                .to_dtype(dtype)?),
            Store::Safetensors { tensors, .. } => {
                if tensors.get(full).is_err() {
                    return Err(self.missing(full));
                }
                let t = tensors.load(full, &self.device).map_err(|e| {
                    Error::Config(format!(
                        "cannot read tensor `{full}` from {}: {e}",
                        self.store.describe()
                    ))
                })?;
                Ok(t.to_dtype(dtype)?)
            }
        }
    }

    fn matrix(&self, full: &str) -> Result<Matrix> {
        match (&*self.store, self.dtype) {
            (Store::Gguf { .. }, WeightDType::Quantized) => {
                let q = self.qtensor(full)?;
                // Tensors stored unquantized in the file (F32/F16) gain nothing from the block path.
                if matches!(q.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16) {
                    Ok(Matrix::Dense(q.dequantize(&self.device)?))
                } else {
                    Ok(Matrix::Quantized(Arc::new(q)))
                }
            }
            _ => Ok(Matrix::Dense(self.dense(full, self.activation_dtype())?)),
        }
    }

    /// A linear layer from `<name>.weight` ([out, in]) and `<name>.bias` when the checkpoint
    /// has one (biases are read from the weights, not from config flags that vary by family).
    pub fn linear(&self, name: &str) -> Result<Linear> {
        let full = self.full_name(&format!("{name}.weight"));
        Ok(Linear {
            weight: self.matrix(&full)?,
            bias: self.bias(name)?,
        })
    }

    /// A GPT-2 `Conv1D` layer: Hugging Face stores its weight as [in, out]; llama.cpp's converter
    /// transposes it to [out, in], so only safetensors are transposed here.
    pub fn conv1d(&self, name: &str) -> Result<Linear> {
        if self.is_gguf() {
            return self.linear(name);
        }
        let full = self.full_name(&format!("{name}.weight"));
        let w = self
            .dense(&full, self.activation_dtype())?
            .t()?
            .contiguous()?;
        Ok(Linear {
            weight: Matrix::Dense(w),
            bias: self.bias(name)?,
        })
    }

    /// A patch embedding's `Conv2d` whose kernel equals its stride (ViT), as a linear layer over
    /// flattened patches: `<name>.weight` [out, channels, p, p] becomes [out, channels · p · p].
    pub fn patch_linear(&self, name: &str) -> Result<Linear> {
        let full = self.full_name(&format!("{name}.weight"));
        let w = self.dense(&full, self.activation_dtype())?;
        let out = w.dim(0)?;
        let inner = w.elem_count() / out.max(1);
        Ok(Linear {
            weight: Matrix::Dense(w.reshape((out, inner))?.contiguous()?),
            bias: self.bias(name)?,
        })
    }

    fn bias(&self, name: &str) -> Result<Option<Tensor>> {
        let bias = format!("{name}.bias");
        if !self.contains(&bias) {
            return Ok(None);
        }
        // The dtype the layer's output has (dense weights compute in it; quantized ones give
        // f32), so the bias is converted once here rather than at every forward.
        Ok(Some(
            self.dense(&self.full_name(&bias), self.activation_dtype())?,
        ))
    }

    /// A LayerNorm's weight and bias (`<name>.weight`, `<name>.bias`) as f32.
    pub fn layer_norm(&self, name: &str) -> Result<(Tensor, Tensor)> {
        Ok((
            self.vector(&format!("{name}.weight"))?,
            self.vector(&format!("{name}.bias"))?,
        ))
    }

    /// A one-dimensional weight (norm scales) as f32 on the device.
    pub fn vector(&self, name: &str) -> Result<Tensor> {
        let full = self.full_name(name);
        self.dense(&full, DType::F32)
    }

    /// A Gemma RMSNorm scale, as the factor the normalised input is multiplied by.
    /// Hugging Face stores `w` and computes `x̂·(1 + w)`; llama.cpp's converter already stored `1 + w`.
    pub fn gemma_norm_scale(&self, name: &str) -> Result<Tensor> {
        let w = self.vector(name)?;
        if self.is_gguf() {
            Ok(w)
        } else {
            Ok((w + 1.0)?)
        }
    }

    /// The token-embedding table `<name>.weight` ([vocab, hidden]).
    pub fn embedding(&self, name: &str) -> Result<Embedding> {
        let full = self.full_name(&format!("{name}.weight"));
        let table = self.matrix(&full)?;
        let hidden = match &table {
            Matrix::Quantized(q) => q.shape().dims2()?.1,
            Matrix::Dense(t) => t.dims2()?.1,
        };
        Ok(Embedding { table, hidden })
    }

    /// Quantization type of a GGUF tensor, if any (for reports).
    pub fn ggml_dtype(&self, name: &str) -> Option<GgmlDType> {
        let full = self.full_name(name);
        match &*self.store {
            Store::Gguf { content, names, .. } => names
                .to_gguf(&full)
                .and_then(|n| content.tensor_infos.get(&n))
                .map(|i| i.ggml_dtype),
            Store::Safetensors { .. } => None,
        }
    }
}

/// How a family's Hugging Face tensor names map to llama.cpp's GGUF names: whole-model tensors by
/// full name, block tensors by their module path under the layer prefix (`model.layers.{i}.` ↔
/// `blk.{i}.`). Weights and biases of a module map alike (`.weight`/`.bias` suffixes are kept).
#[derive(Debug)]
pub(crate) struct GgufNames {
    /// A table these names extend: a name not found here is looked up there (so a family that
    /// differs from Llama in a few names lists only those).
    pub base: Option<&'static GgufNames>,
    pub model: &'static [(&'static str, &'static str)],
    pub layers: &'static str,
    pub block: &'static [(&'static str, &'static str)],
}

impl GgufNames {
    /// Translate a Hugging Face tensor name to its llama.cpp GGUF name.
    pub(crate) fn to_gguf(&self, hf: &str) -> Option<String> {
        self.map(hf, true)
    }

    /// Inverse of [`GgufNames::to_gguf`], used when exporting a GGUF file to the Hugging Face layout.
    pub(crate) fn to_hf(&self, gguf: &str) -> Option<String> {
        self.map(gguf, false)
    }

    fn map(&self, name: &str, to_gguf: bool) -> Option<String> {
        self.map_own(name, to_gguf)
            .or_else(|| self.base.and_then(|b| b.map(name, to_gguf)))
    }

    fn map_own(&self, name: &str, to_gguf: bool) -> Option<String> {
        let pick = |pair: &(&'static str, &'static str)| {
            if to_gguf {
                (pair.0, pair.1)
            } else {
                (pair.1, pair.0)
            }
        };
        let (stem, suffix) = name.rsplit_once('.')?;
        if !matches!(suffix, "weight" | "bias") {
            return None;
        }
        if let Some((_, to)) = self.model.iter().map(pick).find(|(from, _)| *from == stem) {
            return Some(format!("{to}.{suffix}"));
        }
        let hf_prefix = format!("{}.", self.layers);
        let (from_prefix, to_prefix) = if to_gguf {
            (hf_prefix.as_str(), "blk.")
        } else {
            ("blk.", hf_prefix.as_str())
        };
        let (layer, tail) = stem.strip_prefix(from_prefix)?.split_once('.')?;
        let layer: usize = layer.parse().ok()?;
        let (_, to) = self
            .block
            .iter()
            .map(pick)
            .find(|(from, _)| *from == tail)?;
        Some(format!("{to_prefix}{layer}.{to}.{suffix}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::families::{self, Family};
    use crate::model::Architecture;

    fn names(arch: Architecture) -> &'static GgufNames {
        families::by_architecture(arch)
            .and_then(|f: &Family| f.gguf_names)
            .unwrap()
    }
    fn gguf_name(arch: Architecture, hf: &str) -> Option<String> {
        names(arch).to_gguf(hf)
    }
    fn hf_name(arch: Architecture, g: &str) -> Option<String> {
        names(arch).to_hf(g)
    }

    #[test]
    fn names_round_trip_for_both_families() {
        for arch in [Architecture::Llama, Architecture::Gemma3] {
            for hf in [
                "model.embed_tokens.weight",
                "model.norm.weight",
                "lm_head.weight",
                "model.layers.7.input_layernorm.weight",
                "model.layers.7.self_attn.q_proj.weight",
                "model.layers.7.self_attn.k_norm.weight",
                "model.layers.7.post_attention_layernorm.weight",
                "model.layers.7.mlp.down_proj.weight",
            ] {
                let g = gguf_name(arch, hf).unwrap();
                assert_eq!(hf_name(arch, &g).unwrap(), hf, "{arch:?} {hf} -> {g}");
            }
        }
        assert_eq!(
            gguf_name(
                Architecture::Gemma3,
                "model.layers.0.post_attention_layernorm.weight"
            )
            .unwrap(),
            "blk.0.post_attention_norm.weight"
        );
        assert_eq!(
            gguf_name(
                Architecture::Llama,
                "model.layers.0.post_attention_layernorm.weight"
            )
            .unwrap(),
            "blk.0.ffn_norm.weight"
        );
        assert!(gguf_name(Architecture::Llama, "model.layers.x.mlp.up_proj.weight").is_none());
        // Gemma's table overrides Llama's: ffn_norm is the norm before the MLP there.
        assert_eq!(
            hf_name(Architecture::Gemma3, "blk.3.ffn_norm.weight").unwrap(),
            "model.layers.3.pre_feedforward_layernorm.weight"
        );
        assert_eq!(
            hf_name(Architecture::Gemma2, "blk.3.post_ffw_norm.weight").unwrap(),
            "model.layers.3.post_feedforward_layernorm.weight"
        );
        assert_eq!(
            gguf_name(
                Architecture::Gemma3,
                "model.layers.3.self_attn.q_norm.weight"
            )
            .unwrap(),
            "blk.3.attn_q_norm.weight"
        );
    }

    #[test]
    fn dtype_parses_and_rejects_unknown() {
        assert_eq!("q".parse::<WeightDType>().unwrap(), WeightDType::Quantized);
        assert_eq!("BF16".parse::<WeightDType>().unwrap(), WeightDType::BF16);
        let err = "int3".parse::<WeightDType>().unwrap_err().to_string();
        assert!(err.contains("int3") && err.contains("f32"), "{err}");
    }
}
