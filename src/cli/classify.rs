//! `entropy-lens classify`: the paper's kNN diagnostic on a features file.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use crate::analysis::{knn_cross_validate, KnnCvConfig, KnnCvResult, Labels, NeighborSearch};
use crate::data::{read_features, read_labels};
use crate::error::{Error, Result};

/// Runs `entropy-lens classify`: reads features and labels and cross-validates a kNN.
pub fn classify(features: &Path, labels: &Path, cfg: &KnnCvConfig) -> Result<KnnCvResult> {
    let x = read_features(features)?;
    let labels = Labels::encode(&read_labels(labels)?);
    knn_cross_validate(x.view(), &labels, cfg)
}

/// Parses `--search`.
pub fn parse_search(s: &str) -> Result<NeighborSearch> {
    match s {
        "brute" => Ok(NeighborSearch::Brute),
        "kd_tree" | "kdtree" => Ok(NeighborSearch::KdTree),
        "ball_tree" | "balltree" => Ok(NeighborSearch::BallTree),
        o => Err(Error::invalid(format!(
            "unknown neighbour search `{o}` (expected brute, kd_tree or ball_tree)"
        ))),
    }
}
