//! Prediction depth ("How do LLMs use their depth?", arXiv 2510.18871): the first point from
//! which the lens's most likely token is the model's own and stays so, per token and summarised
//! over a set of tokens.

use serde::{Deserialize, Serialize};

use super::EntropyProfile;

/// The prediction depth of one position: the smallest 1-based `j` such that `top1[i] ==
/// final_top1` for every 0-based `i ≥ j − 1`, or `top1.len() + 1` when the last entry differs.
///
/// `top1` is the lens's most likely token at each measured point, `final_top1` the model's own
/// (the last block's output).
pub fn prediction_depth(top1: &[u32], final_top1: u32) -> usize {
    let settled = top1.iter().rev().take_while(|&&t| t == final_top1).count();
    top1.len() - settled + 1
}

/// How the prediction depths of a set of measured tokens are spread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DepthSummary {
    /// The set: a class of an experiment, or `all`.
    pub label: String,
    /// Tokens counted (measured positions over the set's profiles).
    pub n: usize,
    /// Mean depth and its population standard deviation over the tokens.
    pub mean: f64,
    pub std: f64,
    /// Entry j: tokens of depth j + 1, for j + 1 = 1 … n_points + 1 (the last entry counts the
    /// tokens whose top-1 at the last measured point is not the model's own).
    pub counts: Vec<usize>,
}

impl DepthSummary {
    /// The depths of every measured position of `profiles`; `None` when there are none, when a
    /// position has no depth (a profile written before depths existed) or when the profiles do
    /// not have the same number of points.
    pub fn of<'a>(
        label: impl Into<String>,
        profiles: impl IntoIterator<Item = &'a EntropyProfile>,
    ) -> Option<Self> {
        let mut counts: Vec<usize> = Vec::new();
        let mut depths: Vec<f64> = Vec::new();
        for p in profiles {
            let n = p.n_points() + 1;
            if counts.is_empty() {
                counts = vec![0; n];
            } else if counts.len() != n {
                return None;
            }
            for pos in &p.positions {
                let d = pos.prediction_depth?;
                *counts.get_mut(d.checked_sub(1)?)? += 1;
                depths.push(d as f64);
            }
        }
        if depths.is_empty() {
            return None;
        }
        let n = depths.len() as f64;
        let mean = depths.iter().sum::<f64>() / n;
        let var = depths.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n;
        Some(Self {
            label: label.into(),
            n: depths.len(),
            mean,
            std: var.sqrt(),
            counts,
        })
    }

    /// Entry j: the share of the tokens whose prediction has settled by point j + 1 (a
    /// cumulative distribution over points 1 … n_points).
    pub fn settled_share(&self) -> Vec<f64> {
        let n = self.n.max(1) as f64;
        let points = self.counts.len().saturating_sub(1);
        self.counts[..points]
            .iter()
            .scan(0usize, |acc, &c| {
                *acc += c;
                Some(*acc as f64 / n)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prediction_depth_is_where_the_final_token_settles() {
        // Settled from the start, at the last point only, back and forth, never.
        assert_eq!(prediction_depth(&[7, 7, 7], 7), 1);
        assert_eq!(prediction_depth(&[1, 2, 7], 7), 3);
        assert_eq!(prediction_depth(&[7, 1, 7, 7], 7), 3);
        assert_eq!(prediction_depth(&[7, 7, 1], 7), 4);
        assert_eq!(prediction_depth(&[], 7), 1);
    }

    fn profile(depths: &[Option<usize>]) -> EntropyProfile {
        let line = serde_json::json!({
            "model": "m", "prompt": "p", "n_layers": 3,
            "prompt_ids": (0..depths.len() as u32).collect::<Vec<_>>(), "generated_ids": [],
            "positions": depths.iter().enumerate().map(|(i, d)| serde_json::json!({
                "position": i, "shannon": [1.0, 1.0, 1.0], "top_p_count": [1, 1, 1],
                "prediction_depth": d,
            })).collect::<Vec<_>>(),
        });
        EntropyProfile::from_json(&line.to_string()).unwrap()
    }

    #[test]
    fn summaries_count_every_token_and_refuse_missing_depths() {
        let a = profile(&[Some(1), Some(3)]);
        let b = profile(&[Some(3), Some(4)]);
        let s = DepthSummary::of("x", [&a, &b]).unwrap();
        assert_eq!(s.counts, vec![1, 0, 2, 1]);
        assert_eq!((s.n, s.mean), (4, 2.75));
        // Population std of 1, 3, 3, 4: sqrt(((1.75)² + 2·0.25² + 1.25²) / 4).
        assert!((s.std - (4.75f64 / 4.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.settled_share(), vec![0.25, 0.25, 0.75]);
        assert!(DepthSummary::of("x", [&a, &profile(&[None])]).is_none());
        assert!(DepthSummary::of("x", std::iter::empty()).is_none());
    }
}
