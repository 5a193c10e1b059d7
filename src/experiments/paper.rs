//! The paper's published numbers (arXiv 2502.16570), to show beside ours.

/// Table 1: Spearman ρ between ΔH and the change of the top-p (p = 0.6) candidate count.
pub const TABLE1_C1: [(&str, f64); 4] = [
    ("Llama-3.2-1B", 0.8250),
    ("Llama-3.2-3B", 0.7365),
    ("Gemma-2-2B", 0.8804),
    ("Gemma-2-9B", 0.8540),
];

/// Table 2: task-type kNN ROC-AUC (%, mean ± std over 10 folds): model, size, AUC, std.
pub const TABLE2_TASKS: [(&str, &str, f64, f64); 6] = [
    ("Gemma-2-it", "2.1B", 97.66, 0.47),
    ("Gemma-2-it", "8.9B", 98.38, 0.50),
    ("Llama-3.2-it", "1B", 94.94, 0.79),
    ("Llama-3.2-it", "3B", 94.77, 0.93),
    ("Llama-3-it", "8B", 96.10, 0.67),
    ("Phi-3", "3.6B", 97.07, 0.87),
];

/// Table 3: format kNN ROC-AUC (%) per Rényi order: model, α, AUC, std.
pub const TABLE3_FORMATS: [(&str, f64, f64, f64); 6] = [
    ("Gemma-2-2B-it", 0.5, 97.3, 1.6),
    ("Gemma-2-2B-it", 1.0, 98.7, 1.1),
    ("Gemma-2-2B-it", 5.0, 98.4, 1.7),
    ("Llama-3.2-1B-it", 0.5, 97.8, 1.6),
    ("Llama-3.2-1B-it", 1.0, 97.8, 2.4),
    ("Llama-3.2-1B-it", 5.0, 96.6, 2.6),
];

/// Table 5 (Gemma-2-2B-it, k = 11, sampled generation): layer subset, AUC (%), std.
pub const TABLE5_SUBSETS: [(&str, f64, f64); 5] = [
    ("first-only", 68.34, 2.68),
    ("middle-only", 78.83, 3.07),
    ("last-only", 76.78, 2.36),
    ("first+middle+last", 86.13, 1.41),
    ("all", 90.49, 1.76),
];
