//! What a lens reads through, as the model hands it out for training: the final norm's parameters,
//! the dense unembedding and the final soft-cap. The types live with the model (which builds them);
//! their training arithmetic lives in [`crate::lens::train`].

use candle_core::Tensor;

/// The final norm as training differentiates it.
#[derive(Clone, Debug)]
pub enum NormParams {
    /// `u / sqrt(mean(u²) + eps) · scale` (Gemma's `1 + w` already folded into `scale`).
    Rms { scale: Tensor, eps: f64 },
    /// `(u − mean) / sqrt(var + eps) · weight + bias`.
    Layer {
        weight: Tensor,
        bias: Tensor,
        eps: f64,
    },
}

/// What the lens reads through after a translator: the final norm, the unembedding `E`
/// ([vocab, d], f32) and the model's final soft-cap.
#[derive(Clone, Debug)]
pub struct Readout {
    pub norm: NormParams,
    pub unembedding: Tensor,
    pub softcap: Option<f64>,
}
