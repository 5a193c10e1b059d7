//! Chat templates and sampling on the real offline models.

mod common;

use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::runner::{ProfileRequest, Profiler, Sampling};

fn profiler(path: std::path::PathBuf) -> Profiler {
    Profiler::new(
        load(&ModelSource::Gguf(path), &LoadOptions::cpu()).unwrap(),
        StatSpec::default(),
    )
    .unwrap()
}

#[test]
fn chat_templates_wrap_the_prompt_as_a_user_turn() {
    let smol = profiler(common::smollm2());
    let text = smol.tokenizer.apply_chat_template("Hi there").unwrap();
    assert!(text.starts_with("<|im_start|>system\n"), "{text:?}");
    assert!(
        text.ends_with("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"),
        "{text:?}"
    );
    let ids = smol
        .prompt_ids(&ProfileRequest::new("Hi there").chat(true))
        .unwrap();
    // Special tokens are single ids: <|im_start|> = 1, <|im_end|> = 2.
    assert_eq!(ids[0], 1);
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 2);
    assert_eq!(smol.tokenizer.decode(&ids).unwrap(), text);
    // A chat turn ends at <|im_end|>: generation stops there unless told otherwise.
    assert!(smol.tokenizer.eos_token_ids().contains(&2));

    // The Gemma GGUF carries no template: the built-in Gemma turn format, BOS included once.
    let gemma = profiler(common::gemma3());
    let ids = gemma
        .prompt_ids(&ProfileRequest::new("Hi there").chat(true))
        .unwrap();
    let text = gemma.tokenizer.decode(&ids).unwrap();
    assert_eq!(
        text,
        "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n"
    );
    assert_eq!(ids[0], 2);
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 1);
    assert!(
        gemma.tokenizer.eos_token_ids().contains(&106),
        "<end_of_turn> ends a turn"
    );
}

#[test]
fn seeded_sampling_is_reproducible_and_differs_from_greedy() {
    let mut p = profiler(common::smollm2());
    let prompt = "Once upon a time,";
    let sample = |p: &mut Profiler, seed: u64| {
        let s = Sampling {
            temperature: 1.0,
            sample_top_p: Some(0.95),
            seed,
        };
        p.run(
            &ProfileRequest::new(prompt)
                .generate(12)
                .ignore_eos(true)
                .sampling(s),
        )
        .unwrap()
        .generated_ids
    };
    let a = sample(&mut p, 7);
    let b = sample(&mut p, 7);
    let c = sample(&mut p, 8);
    assert_eq!(a, b, "same seed, same tokens");
    assert_ne!(a, c, "another seed, another generation");
    let greedy = p
        .run(&ProfileRequest::new(prompt).generate(12).ignore_eos(true))
        .unwrap()
        .generated_ids;
    assert_ne!(a, greedy);
    let bad = Sampling {
        temperature: -1.0,
        ..Default::default()
    };
    assert!(p
        .run(&ProfileRequest::new(prompt).generate(2).sampling(bad))
        .is_err());
}

#[test]
fn next_token_logits_are_the_profiled_runs_logits() {
    // The skip experiment's trials read the answer from these alone (no lens at every block).
    for path in [common::smollm2(), common::gemma3()] {
        let mut p = profiler(path);
        p.model.set_skipped_blocks(&[2, 5]).unwrap();
        let req = ProfileRequest::new("Question: what is 2 + 2? Answer:");
        let (_, scored) = p.run_scored(&req, None).unwrap();
        let alone = p.next_token_logits(&req).unwrap();
        assert_eq!(scored.len(), alone.len());
        let worst = scored
            .iter()
            .zip(&alone)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-4, "logits differ by {worst}");
        let argmax = |v: &[f32]| entropy_lens::runner::argmax(v);
        assert_eq!(argmax(&scored), argmax(&alone));
        p.model.set_skipped_blocks(&[]).unwrap();
    }
}

/// The crate's own sampler draws what candle-transformers' `LogitsProcessor` draws (the crate used
/// it until it was replaced to spare notebooks its compile): same seed, same logits, same token,
/// draw after draw, over the whole distribution and the nucleus, at several temperatures — on
/// real next-token logits of the offline SmolLM2 and on logits with ties and a -inf.
#[test]
fn the_token_sampler_draws_what_candle_transformers_draws() {
    use candle_transformers::generation::{LogitsProcessor, Sampling as Candle};
    use entropy_lens::runner::TokenSampler;

    let mut smol = profiler(common::smollm2());
    let real = smol
        .next_token_logits(&ProfileRequest::new(
            "The Eiffel Tower is located in the city of",
        ))
        .unwrap();
    let mut tied: Vec<f32> = (0..300).map(|i| ((i % 7) as f32) * 0.5).collect();
    tied[5] = f32::NEG_INFINITY;
    for logits in [real, tied] {
        let mut seen = std::collections::BTreeSet::new();
        let tensor =
            candle_core::Tensor::from_slice(&logits, logits.len(), &candle_core::Device::Cpu)
                .unwrap();
        for (temperature, top_p) in [
            (1.0, None),
            (0.7, Some(0.9)),
            (1.3, Some(0.5)),
            (2.0, Some(1.0)),
            // A nucleus mass of 0 samples the whole distribution, in both.
            (1.0, Some(0.0)),
        ] {
            for seed in [0u64, 42, 12345] {
                let sampling = match top_p {
                    Some(p) if p < 1.0 => Candle::TopP { p, temperature },
                    _ => Candle::All { temperature },
                };
                let mut theirs = LogitsProcessor::from_sampling(seed, sampling);
                let mut ours = TokenSampler::new(seed, temperature, top_p);
                let a: Vec<u32> = (0..64).map(|_| theirs.sample(&tensor).unwrap()).collect();
                let b: Vec<u32> = (0..64).map(|_| ours.sample(&logits).unwrap()).collect();
                assert_eq!(
                    a, b,
                    "temperature {temperature}, top-p {top_p:?}, seed {seed}"
                );
                seen.extend(a);
            }
        }
        // Not a constant: the draws vary.
        assert!(seen.len() > 3, "{seen:?}");
    }
}
