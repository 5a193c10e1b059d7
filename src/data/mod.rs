//! Data: feature/label files for the statistics, and the paper's prompt sets.

pub mod features;
pub mod formats;
pub mod images;
pub mod mmlu;
pub mod tinystories;

pub use features::{read_features, read_labels, write_csv};
