//! How fast each experiment profiles, against `profile` doing the same work in the same process:
//! each experiment runs at smoke scale (batch 8 unless `--batch` says otherwise) into a temporary
//! folder, then its recorded prompts are profiled again with `Profiler::run_batch` at the same batch
//! size — the same prompts, chat template, sampling, tokens generated (past EOS, as many as each
//! item generated), prompt positions measured and Rényi orders — with the model loaded again, as the
//! experiment loads it. Prints a Markdown table (`docs/benchmarks.md`).
//!
//! ```text
//! cargo bench --bench experiment_speed -- [--model FILE] [--batch 8]
//!     [--experiments validate,tasks,formats,mmlu,skip]
//! ```
//!
//! The experiment's time includes what it does beyond the profiles: MMLU reads the answer letters
//! and every experiment writes its records, `profiles.npy` and its result (kNN, validation
//! statistics, report). `skip` re-scores every question with blocks skipped; its `profile` time
//! includes those trials redone as `profile --skip` would (one question at a time, the
//! trial's blocks skipped), and a line after the table splits it.

use std::time::Instant;

use entropy_lens::experiments::{self, ExperimentKind, Plan, ProgressMode, Record, RunOptions};
use entropy_lens::lens::{parse_alpha, StatSpec};
use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::runner::{ProfileRequest, Profiler, Sampling};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The request that redoes `r`'s profile: the same prompt and settings, as many tokens.
fn request(r: &Record) -> ProfileRequest {
    let p = &r.profile;
    let prov = p
        .provenance
        .as_ref()
        .expect("experiments record provenance");
    ProfileRequest {
        prompt: p.prompt.clone(),
        generate: p.generated_ids.len(),
        // Exactly as many tokens as the item generated.
        ignore_eos: true,
        all_positions: p.positions.len() > p.generated_ids.len().max(1),
        add_bos: prov.add_bos,
        chat: prov.chat_template,
        include_embed: p.positions.iter().any(|x| x.embed.is_some()),
        sampling: Sampling {
            temperature: prov.temperature,
            sample_top_p: prov.sample_top_p,
            seed: prov.seed,
        },
        token_ids: None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = arg(&args, "--model").unwrap_or_else(|| {
        entropy_lens::fetch::fetch_model(&entropy_lens::fetch::SMOLLM2)
            .unwrap()
            .display()
            .to_string()
    });
    let batch: usize = arg(&args, "--batch").map_or(8, |b| b.parse().unwrap());
    let kinds = arg(&args, "--experiments").unwrap_or("validate,tasks,formats,mmlu,skip".into());
    let tmp = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    let mut splits = Vec::new();
    for name in kinds.split(',') {
        let kind: ExperimentKind = name.parse().unwrap();
        let out = tmp.path().join(name);
        let t0 = Instant::now();
        experiments::run(
            &Plan::new(kind).model(model.clone()),
            &RunOptions {
                out: Some(out.clone()),
                progress: ProgressMode::Auto,
                batch: Some(batch),
                ..Default::default()
            },
        )
        .unwrap();
        let experiment_s = t0.elapsed().as_secs_f64();
        let records: Vec<Record> = std::fs::read_to_string(out.join("records.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let prov = records[0].profile.provenance.clone().unwrap();
        let spec = StatSpec {
            alphas: prov
                .alphas
                .iter()
                .map(|a| parse_alpha(a).unwrap())
                .collect(),
            top_p: prov.top_p,
            support_threshold: prov.support_threshold,
            ..Default::default()
        };
        let reqs: Vec<ProfileRequest> = records.iter().map(request).collect();
        let t1 = Instant::now();
        let mut profiler = Profiler::new(
            load(&ModelSource::parse(&model).unwrap(), &LoadOptions::cpu()).unwrap(),
            spec,
        )
        .unwrap();
        profiler.set_batch_size(batch).unwrap();
        let profiles = profiler.run_batch(&reqs).unwrap();
        let unskipped_s = t1.elapsed().as_secs_f64();
        // `skip`'s trials, redone as `profile --skip` would: each question alone with the
        // trial's blocks skipped (a batch shares its skipped blocks), no layer 0.
        let t2 = Instant::now();
        let mut trials = 0;
        for (r, req) in records.iter().zip(&reqs) {
            let blind = req.clone().include_embed(false);
            for t in r.answer.iter().flat_map(|a| &a.trials) {
                profiler.model.set_skipped_blocks(&t.skipped).unwrap();
                profiler.run(&blind).unwrap();
                trials += 1;
            }
        }
        profiler.model.set_skipped_blocks(&[]).unwrap();
        let trials_s = t2.elapsed().as_secs_f64();
        if trials > 0 {
            splits.push(format!(
                "{name}'s work redone by `profile`: loading the model and the unskipped pass of its {} questions {unskipped_s:.1} s; \
                 its {trials} trials {trials_s:.1} s ({:.0} ms each).",
                records.len(),
                1000.0 * trials_s / trials as f64
            ));
        }
        let profile_s = unskipped_s + trials_s;
        let tokens: usize = profiles.iter().map(|p| p.generated_ids.len()).sum();
        let positions: usize = profiles.iter().map(|p| p.positions.len()).sum();
        rows.push((
            name.to_string(),
            records.len(),
            tokens,
            positions,
            experiment_s,
            profile_s,
        ));
    }
    let model_name = std::path::Path::new(&model)
        .file_stem()
        .map_or(model.clone(), |s| s.to_string_lossy().into_owned());
    println!(
        "{model_name}, smoke scale, batch {batch}, {} rayon threads",
        rayon::current_num_threads()
    );
    println!();
    println!("| experiment | items | tokens generated | positions measured | experiment (s) | `profile`, same work (s) | experiment ÷ profile speed |");
    println!("|---|---|---|---|---|---|---|");
    for (name, items, tokens, positions, e, p) in rows {
        println!(
            "| {name} | {items} | {tokens} | {positions} | {e:.1} | {p:.1} | {:.0} % |",
            100.0 * p / e
        );
    }
    for line in splits {
        println!();
        println!("{line}");
    }
}
