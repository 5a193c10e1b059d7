//! Data: feature/label files for the statistics, and the paper's prompt sets.

pub mod features;
pub mod images;
pub mod mmlu_questions;
pub mod tinystories;
pub mod topics;

pub use features::{read_features, read_labels, write_csv};
