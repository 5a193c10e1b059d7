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

/// Table 4 (instruction-tuned Llama and Gemma): model, prompt style, LLM accuracy (%), kNN ROC-AUC
/// (%) correct vs wrong, std.
pub const TABLE4_MMLU: [(&str, &str, f64, f64, f64); 6] = [
    ("Llama", "base", 50.89, 73.61, 1.52),
    ("Llama", "humble", 58.51, 69.90, 1.06),
    ("Llama", "instruct", 60.62, 67.23, 1.62),
    ("Gemma", "base", 56.10, 71.88, 1.63),
    ("Gemma", "humble", 54.71, 72.78, 1.15),
    ("Gemma", "instruct", 56.38, 68.36, 1.23),
];

/// Table 6: kNN (k = 3) macro F1 (%) over 10 random 50/50 splits: task, mean, std.
pub const TABLE6_F1: [(&str, f64, f64); 2] =
    [("model family", 97.99, 0.66), ("model size", 96.31, 0.87)];
