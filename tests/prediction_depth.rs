//! Prediction depth at every read point and without a top k, against a direct computation from
//! the same run's top-1 tokens. (At the default read point the golden, family, tuned-lens and
//! vision parity tests check it against the depth the references' own top-1 tokens give.)

mod common;

use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource, WeightDType};
use entropy_lens::profile::{EntropyProfile, ReadPoint};
use entropy_lens::runner::{ProfileRequest, Profiler};

fn profiler(top_k: usize) -> Profiler {
    let loaded = load(
        &ModelSource::Gguf(common::smollm2()),
        &LoadOptions::cpu().with_dtype(WeightDType::Quantized),
    )
    .unwrap();
    let spec = StatSpec {
        top_k,
        ..Default::default()
    };
    Profiler::new(loaded, spec).unwrap()
}

/// The first 1-based point from which every top-1 is `last`; one past the end when none is.
fn direct(top1: &[u32], last: u32) -> usize {
    let mut first = top1.len() + 1;
    for j in (0..top1.len()).rev() {
        if top1[j] != last {
            break;
        }
        first = j + 1;
    }
    first
}

fn top1s(p: &EntropyProfile, row: usize) -> Vec<u32> {
    p.positions[row].top_k.iter().map(|k| k[0].0).collect()
}

#[test]
fn depth_at_every_read_point_is_the_direct_computation() {
    let req = ProfileRequest::new("Q: What is the capital of France? A:")
        .generate(6)
        .all_positions(true)
        .ignore_eos(true);
    let mut prof = profiler(1);
    let blocks = prof.run(&req).unwrap();
    let l = blocks.n_blocks;
    // The model's own top-1 at each position: the last block's (the greedy token where generated).
    let finals: Vec<u32> = (0..blocks.len())
        .map(|i| *top1s(&blocks, i).last().unwrap())
        .collect();
    let n = blocks.prompt_ids.len();
    assert_eq!(&finals[n - 1..n + 5], &blocks.generated_ids[..6]);
    let depths: Vec<usize> = blocks
        .positions
        .iter()
        .map(|p| p.prediction_depth.unwrap())
        .collect();
    for (i, &d) in depths.iter().enumerate() {
        assert_eq!(d, direct(&top1s(&blocks, i), finals[i]), "position {i}");
        assert!(
            (1..=l).contains(&d),
            "the last block is the final distribution"
        );
    }
    assert!(
        depths.iter().any(|&d| d > l / 2),
        "a real prompt has late-settling tokens: {depths:?}"
    );

    for point in [ReadPoint::Both, ReadPoint::Attention] {
        prof.set_read_point(point).unwrap();
        let p = prof.run(&req).unwrap();
        assert_eq!(p.generated_ids, blocks.generated_ids, "{point:?}");
        for (i, pos) in p.positions.iter().enumerate() {
            let d = pos.prediction_depth.unwrap();
            assert_eq!(
                d,
                direct(&top1s(&p, i), finals[i]),
                "{point:?} position {i}"
            );
            if point == ReadPoint::Both {
                // Point 2j is block j's output: the depth among blocks alone is that of `blocks`.
                assert!(d <= 2 * l);
                assert_eq!(
                    direct(
                        &top1s(&p, i)[1..]
                            .iter()
                            .step_by(2)
                            .copied()
                            .collect::<Vec<_>>(),
                        finals[i]
                    ),
                    depths[i]
                );
            }
        }
    }

    // Without a top k the most likely token is still found: the same depths.
    let mut bare = profiler(0);
    let p = bare.run(&req).unwrap();
    assert!(p.positions.iter().all(|x| x.top_k.is_empty()));
    let got: Vec<usize> = p
        .positions
        .iter()
        .map(|x| x.prediction_depth.unwrap())
        .collect();
    assert_eq!(got, depths);
}
