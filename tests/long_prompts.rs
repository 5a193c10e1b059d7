//! Long prompts go through the KV cache in chunks (issue 10, item 10): the profiles must not depend
//! on the chunk size, at every position and block, and the greedy continuation must be the same.

mod common;

use entropy_lens::prelude::*;
use entropy_lens::runner::ProfileRequest;

fn long_prompt(stories: usize) -> String {
    entropy_lens::data::tinystories::sample_stories()
        .unwrap()
        .into_iter()
        .take(stories)
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[test]
fn chunked_prefill_gives_the_profiles_of_one_pass() {
    // Every prompt position on SmolLM2; the last one and the generation on Gemma (its 262k-token
    // lens at every position would take minutes on a CPU), with a prompt longer than its 512-token
    // sliding window, so that windowed layers trim their cache and skip the keys they cannot see.
    for (model, all, stories, min_tokens) in [
        (common::smollm2(), true, 2, 200),
        (common::gemma3(), false, 7, 600),
    ] {
        let mut lens = Profiler::load(model.to_str().unwrap(), &LoadOptions::cpu()).unwrap();
        let req = ProfileRequest::new(long_prompt(stories))
            .all_positions(all)
            .generate(4);
        let n = lens.prompt_ids(&req).unwrap().len();
        assert!(n > min_tokens, "{n} tokens");
        lens.model.set_prefill_chunk(n + 1).unwrap();
        let whole = lens.run(&req).unwrap();
        // Chunks that do not divide the prompt.
        for chunk in [97] {
            lens.model.set_prefill_chunk(chunk).unwrap();
            let chunked = lens.run(&req).unwrap();
            assert_eq!(chunked.generated_ids, whole.generated_ids, "chunk {chunk}");
            assert_eq!(chunked.positions.len(), whole.positions.len());
            let mut worst = 0f64;
            for (a, b) in chunked.positions.iter().zip(&whole.positions) {
                assert_eq!(a.position, b.position);
                for (x, y) in a.shannon.iter().zip(&b.shannon) {
                    worst = worst.max((x - y).abs());
                }
            }
            assert!(worst < 1e-3, "{model:?} chunk {chunk}: {worst}");
        }
        let short = ProfileRequest::new("Once upon a time").generate(3);
        lens.model.set_prefill_chunk(1).unwrap();
        let one = lens.run(&short).unwrap();
        lens.model.set_prefill_chunk(512).unwrap();
        let all = lens.run(&short).unwrap();
        assert_eq!(one.generated_ids, all.generated_ids);
        assert!(lens.model.set_prefill_chunk(0).is_err());
    }
}
