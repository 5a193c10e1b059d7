//! Statistics of entropy profiles, matching scikit-learn and scipy: the kNN diagnostic with
//! cross-validated ROC-AUC against a dummy baseline, C1/C2 validation, PCA and t-SNE.

pub mod crossval;
pub mod knn;
pub mod metrics;
pub mod numpy_rng;
pub mod projection;
pub mod table;
pub mod validation;

pub use crossval::{
    knn_cross_validate, repeated_split_f1, KnnCvConfig, KnnCvResult, Labels, SplitF1Result,
};
pub use knn::{KnnClassifier, NeighborSearch, Weighting};
pub use projection::{pca, trustworthiness, tsne, Projection, TsneConfig, TsneMethod};
pub use table::Table;
pub use validation::{c1_spearman, c1_table, c2_overlap, c2_table, C1Result, C2Result};
