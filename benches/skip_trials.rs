//! The `skip` experiment's trials read only the answer (next-token logits after the prompt). This
//! times one trial the way it ran before (`run_scored`: the lens at every block of the last
//! position) against `next_token_logits` (the final block only), in the same process, on MMLU
//! prompts of the embedded sample (Base style), both offline models with quantized weights.
//!
//! `cargo bench --bench skip_trials` (add `-- --quick` for fewer prompts). Prints a Markdown table.

use std::time::Instant;

use entropy_lens::data::mmlu_questions::{sample_questions, PromptStyle};
use entropy_lens::fetch;
use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::runner::{ProfileRequest, Profiler};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 4 } else { 16 };
    let questions = sample_questions().unwrap();
    let prompts: Vec<String> = questions
        .iter()
        .step_by(questions.len() / n)
        .take(n)
        .map(|q| PromptStyle::Base.prompt(q))
        .collect();
    println!("| model | trials | lens at every block (median ms/trial) | final block only (median ms/trial) | saving |");
    println!("|---|---|---|---|---|");
    for model in [&fetch::SMOLLM2, &fetch::GEMMA3] {
        let path = fetch::fetch_model(model).unwrap();
        let mut p = Profiler::new(
            load(&ModelSource::Gguf(path), &LoadOptions::cpu()).unwrap(),
            StatSpec::default(),
        )
        .unwrap();
        let reqs: Vec<ProfileRequest> = prompts.iter().map(ProfileRequest::new).collect();
        // Warm up both paths once.
        p.run_scored(&reqs[0], None).unwrap();
        p.next_token_logits(&reqs[0]).unwrap();
        // Interleaved, prompt by prompt, over three rounds: drift in the machine's speed (other
        // load, frequency) falls on both paths alike. Each path's time is its median per trial.
        let (mut full, mut last) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            for r in &reqs {
                let t = Instant::now();
                p.run_scored(r, None).unwrap();
                full.push(t.elapsed().as_secs_f64() * 1000.0);
                let t = Instant::now();
                p.next_token_logits(r).unwrap();
                last.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
        let (full, last) = (median(&mut full), median(&mut last));
        println!(
            "| {} | {n} × 3 | {full:.1} | {last:.1} | {:.0} % |",
            model.file_name,
            100.0 * (1.0 - last / full)
        );
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
