//! Sampling the next token at a temperature, optionally from the nucleus (top-p) only.
//!
//! The same arithmetic, in the same order, as candle-transformers' `LogitsProcessor` for its
//! `All` and `TopP` modes (a generation sampled with a seed is the same token sequence as before
//! this crate stopped depending on candle-transformers, whose 80,000 lines every notebook's first
//! compile paid for two functions): logits divided by the temperature as a tensor, candle's
//! softmax, the least likely tokens zeroed once the kept mass reaches p (descending order, ties by
//! `total_cmp`), then one draw of rand's `WeightedIndex` from a `StdRng` seeded with the seed.
//! `tests/generation.rs` compares it with `LogitsProcessor` draw for draw.

use candle_core::{Device, Tensor};
use rand::distr::{weighted::WeightedIndex, Distribution};
use rand::SeedableRng;

use crate::error::{Error, Result};

/// Draws tokens from temperature-scaled distributions with a seeded generator.
#[derive(Clone, Debug)]
pub struct TokenSampler {
    rng: rand::rngs::StdRng,
    temperature: f64,
    /// The nucleus mass; `None` (or outside (0, 1)) samples the whole distribution.
    top_p: Option<f64>,
}

impl TokenSampler {
    pub fn new(seed: u64, temperature: f64, top_p: Option<f64>) -> Self {
        Self {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            temperature,
            top_p,
        }
    }

    /// The probabilities of `logits` at the sampler's temperature.
    fn probabilities(&self, logits: &[f32]) -> Result<Vec<f32>> {
        let z = Tensor::from_slice(logits, logits.len(), &Device::Cpu)?;
        let z = (&z / self.temperature)?;
        Ok(candle_nn::ops::softmax_last_dim(&z)?.to_vec1::<f32>()?)
    }

    /// One token id drawn from `logits` (one row, the vocabulary).
    ///
    /// # Errors
    /// [`Error::Candle`] when the probabilities cannot be drawn from (all zero or not finite).
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        let mut probs = self.probabilities(logits)?;
        if let Some(p) = self.top_p.filter(|&p| p > 0.0 && p < 1.0) {
            keep_nucleus(&mut probs, p as f32);
        }
        let weights =
            WeightedIndex::new(&probs).map_err(|e| Error::Candle(candle_core::Error::wrap(e)))?;
        Ok(weights.sample(&mut self.rng) as u32)
    }
}

/// Zeroes every probability after the most likely ones whose running sum first reaches `p`.
fn keep_nucleus(probs: &mut [f32], p: f32) {
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&i, &j| probs[j].total_cmp(&probs[i]));
    let mut kept = 0f32;
    for i in order {
        if kept >= p {
            probs[i] = 0.0;
        } else {
            kept += probs[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nucleus_keeps_the_most_likely_tokens_until_the_mass_is_reached() {
        let mut p = vec![0.1, 0.5, 0.15, 0.25];
        keep_nucleus(&mut p, 0.7);
        assert_eq!(p, vec![0.0, 0.5, 0.0, 0.25]);
        let mut p = vec![0.1, 0.5, 0.15, 0.25];
        keep_nucleus(&mut p, 0.5);
        assert_eq!(p, vec![0.0, 0.5, 0.0, 0.0]);
    }

    #[test]
    fn a_seed_gives_the_same_draws_and_a_peaked_distribution_its_peak() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let draws = |seed| {
            let mut s = TokenSampler::new(seed, 0.8, Some(0.9));
            (0..20)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
        let mut peaked = vec![0f32; 10];
        peaked[3] = 40.0;
        assert_eq!(TokenSampler::new(1, 1.0, None).sample(&peaked).unwrap(), 3);
    }
}
