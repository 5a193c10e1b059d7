//! Batched runs against the same requests run alone: prompts of different lengths (left padding),
//! generations of different lengths (rows leaving the batch), greedy and seeded sampling, every
//! prompt position, layer 0 — on both offline models and on every family fixture (learned
//! positions, sliding windows with soft-caps, partial rotary, fused projections). Same ids, and
//! every statistic within 1e-4 nats.

mod common;

use std::path::{Path, PathBuf};

use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::profile::EntropyProfile;
use entropy_lens::runner::{ProfileRequest, Profiler, Sampling};

const TOL: f64 = 1e-4;

fn profiler(model: &Path) -> Profiler {
    let source = ModelSource::parse(&model.to_string_lossy()).unwrap();
    let loaded = load(&source, &LoadOptions::cpu()).unwrap_or_else(|e| panic!("{e}"));
    let spec = StatSpec {
        alphas: vec![0.5, 2.0, f64::INFINITY],
        top_k: 3,
        ..Default::default()
    };
    Profiler::new(loaded, spec).unwrap()
}

/// Requests of different prompt lengths and generation lengths, greedy and sampled.
fn requests() -> Vec<ProfileRequest> {
    let sampled = Sampling {
        temperature: 0.8,
        sample_top_p: Some(0.9),
        seed: 7,
    };
    vec![
        ProfileRequest::new("Hi").generate(9).ignore_eos(true),
        ProfileRequest::new("The capital of France is a city called")
            .generate(4)
            .ignore_eos(true)
            .all_positions(true),
        ProfileRequest::new("Once upon a time").generate(0),
        ProfileRequest::new("Water boils at")
            .generate(7)
            .ignore_eos(true)
            .sampling(sampled)
            .include_embed(true),
        // Stops at the model's end of sequence if it writes one, as it would alone.
        ProfileRequest::new("1, 2, 3, 4,").generate(6),
    ]
}

fn close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= TOL || (x.is_infinite() && x == y),
            "{what}, layer {i}: batched {x} vs alone {y}"
        );
    }
}

fn compare(batched: &EntropyProfile, alone: &EntropyProfile) {
    let what = format!("{} / {:?}", alone.model, alone.prompt);
    assert_eq!(batched.prompt_ids, alone.prompt_ids, "{what}");
    assert_eq!(batched.generated_ids, alone.generated_ids, "{what}");
    assert_eq!(batched.positions.len(), alone.positions.len(), "{what}");
    for (b, a) in batched.positions.iter().zip(&alone.positions) {
        let at = format!("{what}, position {}", a.position);
        assert_eq!(b.position, a.position, "{at}");
        close(&b.shannon, &a.shannon, &format!("{at}, Shannon"));
        assert_eq!(
            b.renyi.keys().collect::<Vec<_>>(),
            a.renyi.keys().collect::<Vec<_>>()
        );
        for (alpha, values) in &a.renyi {
            close(&b.renyi[alpha], values, &format!("{at}, Rényi {alpha}"));
        }
        assert_eq!(b.top_p_count, a.top_p_count, "{at}: top-p counts");
        let top1 = |p: &entropy_lens::profile::PositionProfile| -> Vec<u32> {
            p.top_k.iter().map(|k| k[0].0).collect()
        };
        assert_eq!(top1(b), top1(a), "{at}: top-1 ids");
        assert_eq!(b.embed.is_some(), a.embed.is_some(), "{at}: layer 0");
        if let (Some(eb), Some(ea)) = (&b.embed, &a.embed) {
            close(&[eb.shannon], &[ea.shannon], &format!("{at}, layer 0"));
        }
    }
}

/// Runs `reqs` alone and as one batch (prefill chunk `chunk`) and compares them.
fn batched_equals_alone(model: &Path, chunk: Option<usize>) {
    let mut prof = profiler(model);
    if let Some(c) = chunk {
        prof.model.set_prefill_chunk(c).unwrap();
    }
    let reqs = requests();
    prof.set_batch_size(1).unwrap();
    let alone = prof.run_batch(&reqs).unwrap();
    prof.set_batch_size(reqs.len()).unwrap();
    let batched = prof.run_batch(&reqs).unwrap();
    assert_eq!(batched.len(), reqs.len());
    for (b, a) in batched.iter().zip(&alone) {
        compare(b, a);
    }
    // The prompts really differ in length, so the batch was padded.
    let lengths: std::collections::BTreeSet<usize> =
        alone.iter().map(|p| p.prompt_ids.len()).collect();
    assert!(lengths.len() > 2, "{lengths:?}");
    // A batch of 2 splits the requests into groups: the same profiles again.
    prof.set_batch_size(2).unwrap();
    for (b, a) in prof.run_batch(&reqs).unwrap().iter().zip(&alone) {
        compare(b, a);
    }
    // Scored as one batch: the same profiles, and each prompt's next-token logits as `run_scored`
    // gives them alone (what MMLU and skip read their answers from).
    prof.set_batch_size(reqs.len()).unwrap();
    let scored = prof.run_batch_scored(&reqs, None).unwrap();
    assert_eq!(scored.len(), reqs.len());
    for ((req, (profile, logits)), a) in reqs.iter().zip(&scored).zip(&alone) {
        compare(profile, a);
        let (_, want) = prof.run_scored(req, None).unwrap();
        assert_eq!(logits.len(), want.len());
        let worst = logits
            .iter()
            .zip(&want)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(
            worst < 1e-3,
            "{:?}: next-token logits differ by {worst}",
            req.prompt
        );
        assert_eq!(
            entropy_lens::runner::argmax(logits),
            entropy_lens::runner::argmax(&want)
        );
    }
}

#[test]
fn smollm2_batched_equals_alone() {
    batched_equals_alone(&common::smollm2(), None);
}

#[test]
fn gemma3_batched_equals_alone() {
    batched_equals_alone(&common::gemma3(), None);
}

#[test]
fn a_batch_streams_long_prompts_chunk_by_chunk() {
    // Chunks of 3 columns: padding spans chunks and some chunks are padding only for a row.
    batched_equals_alone(&common::smollm2(), Some(3));
}

fn family(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/fixtures/families")
        .join(name)
}

#[test]
fn every_family_fixture_batched_equals_alone() {
    // gemma2 (window 5, soft-caps) and mistral (window 6) run past their windows here, with the
    // prefill in chunks of 4 so that windows, padding and chunks cross.
    for name in [
        "gpt2", "gpt_neox", "gemma", "gemma2", "qwen2", "qwen3", "phi3", "mistral",
    ] {
        batched_equals_alone(&family(name), Some(4));
    }
}

#[test]
fn a_zero_batch_size_is_refused() {
    let mut prof = profiler(&family("gpt2"));
    let e = prof.set_batch_size(0).unwrap_err().to_string();
    assert!(e.contains("at least 1"), "{e}");
}

#[test]
fn longrope_chooses_its_frequencies_by_the_whole_prompt_in_chunks_and_in_batches() {
    // The Phi-3 fixture switches to LongRoPE's long factors past 24 positions. A prompt longer
    // than that, fed in chunks of 4 or batched beside a short one, must be rotated as one forward
    // over the whole prompt rotates it (transformers chooses by the length of the forward).
    let long = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen \
                fifteen sixteen seventeen eighteen nineteen twenty";
    let reqs = vec![
        ProfileRequest::new(long)
            .generate(6)
            .ignore_eos(true)
            .all_positions(true),
        ProfileRequest::new("Hi").generate(30).ignore_eos(true),
    ];
    let mut prof = profiler(&family("phi3"));
    prof.set_batch_size(1).unwrap();
    let whole = prof.run_batch(&reqs).unwrap();
    assert!(
        whole[0].prompt_ids.len() > 24,
        "{}",
        whole[0].prompt_ids.len()
    );
    prof.model.set_prefill_chunk(4).unwrap();
    for (c, w) in prof.run_batch(&reqs).unwrap().iter().zip(&whole) {
        compare(c, w);
    }
    prof.set_batch_size(2).unwrap();
    for (b, w) in prof.run_batch(&reqs).unwrap().iter().zip(&whole) {
        compare(b, w);
    }
}

#[test]
fn a_batch_of_prompts_without_generation() {
    let reqs: Vec<ProfileRequest> = ["Hi", "The capital of France is", "Once upon a time"]
        .iter()
        .map(|p| ProfileRequest::new(*p))
        .collect();
    let mut prof = profiler(&family("gpt2"));
    prof.set_batch_size(1).unwrap();
    let alone = prof.run_batch(&reqs).unwrap();
    prof.set_batch_size(3).unwrap();
    for (b, a) in prof.run_batch(&reqs).unwrap().iter().zip(&alone) {
        assert!(b.generated_ids.is_empty());
        compare(b, a);
    }
}
