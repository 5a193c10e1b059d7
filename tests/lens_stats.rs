//! The per-block statistics beyond entropy — KL(final ‖ layer), the log-probability and rank of
//! the next token — and the mid-block read point, against the float64 PyTorch + transformers
//! reference of `tests/fixtures/lens/` (made by its `make_lens_reference.py`), on both offline
//! models: mid-block entropies within 1e-4 nats, KL and log-probabilities within 1e-4 nats below
//! 1 nat in size and 1e-4 relative above, ranks exact wherever no other token's logit is
//! within 1e-4 relative of the target's (elsewhere off by at most the number of such near-ties,
//! which float32 rounding orders).

mod common;

use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use entropy_lens::lens::{GroupTarget, Groups, Lens, StatSpec, TargetToken};
use entropy_lens::model::{load, LoadOptions, ModelSource, Positions, WeightDType};
use entropy_lens::profile::ReadPoint;
use entropy_lens::runner::{ProfileRequest, Profiler};
use serde_json::Value;

use common::{f64s, u32s};

const TOL: f64 = 1e-4;

fn reference() -> Value {
    let path = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/fixtures/lens/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn profiler(path: &Path, spec: StatSpec) -> Profiler {
    let loaded = load(
        &ModelSource::Gguf(path.to_path_buf()),
        &LoadOptions::cpu().with_dtype(WeightDType::Quantized),
    )
    .unwrap();
    Profiler::new(loaded, spec).unwrap()
}

fn extras_spec() -> StatSpec {
    StatSpec {
        kl_to_final: true,
        target: TargetToken::Next,
        top_k: 0,
        ..Default::default()
    }
}

#[derive(Default)]
struct Worst {
    kl: f64,
    logprob: f64,
    mid_shannon: f64,
    mid_kl: f64,
    ranks: usize,
    ranks_tied: usize,
    ranks_equal: usize,
}

fn max_diff(ours: &[f64], theirs: &[f64]) -> f64 {
    assert_eq!(ours.len(), theirs.len());
    ours.iter()
        .zip(theirs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
}

/// KL and log-probabilities are compared relative to max(1, |value|): a float32 forward pass (ours
/// or PyTorch's) moves the final logits by ~1e-5 relative, which shifts a KL of 15 nats by ~1e-4
/// at every layer alike, and a log-probability of −991 nats (Gemma's embedding layer) is a float32
/// logit whose last bit is 6e-5.
fn max_rel_diff(ours: &[f64], theirs: &[f64]) -> f64 {
    assert_eq!(ours.len(), theirs.len());
    ours.iter()
        .zip(theirs)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0, f64::max)
}

fn check_model(path: &Path, refs: &Value) -> Worst {
    let mut w = Worst::default();
    let mut block = profiler(path, extras_spec());
    let mut both = profiler(path, extras_spec());
    both.set_read_point(ReadPoint::Both).unwrap();
    for r in refs.as_array().unwrap() {
        let text = r["prompt"].as_str().unwrap();
        let ids = u32s(&r["ids"]);
        let req = ProfileRequest::new(text)
            .all_positions(true)
            .include_embed(true);
        assert_eq!(
            block.prompt_ids(&req).unwrap(),
            ids,
            "token ids of {text:?}"
        );
        let p = block.run(&req).unwrap();
        let m = both.run(&req).unwrap();
        assert_eq!(m.read_point, ReadPoint::Both);
        assert_eq!(m.n_points(), 2 * p.n_blocks);
        for (pos, want) in r["positions"].as_array().unwrap().iter().enumerate() {
            let got = &p.positions[pos];
            assert_eq!(got.position, pos);
            // Layer 0 (the embedding output) and every block.
            let mut kl = vec![got.embed.as_ref().unwrap().extras.kl_to_final.unwrap()];
            kl.extend(got.kl_to_final.as_ref().unwrap());
            let d = max_rel_diff(&kl, &f64s(&want["kl"]));
            w.kl = w.kl.max(d);
            assert_eq!(*kl.last().unwrap(), 0.0, "KL of the final block to itself");
            match (&got.target, want.get("target")) {
                (Some(t), Some(wt)) => {
                    assert_eq!(t.id as u64, wt["id"].as_u64().unwrap());
                    let e = got.embed.as_ref().unwrap();
                    let mut lp = vec![e.extras.target_logprob.unwrap()];
                    lp.extend(&t.logprob);
                    let tl = f64s(&wt["logprob"]);
                    w.logprob = w.logprob.max(max_rel_diff(&lp, &tl));
                    let mut rank = vec![e.extras.target_rank.unwrap()];
                    rank.extend(&t.rank);
                    for ((ours, theirs), ties) in rank
                        .iter()
                        .zip(u32s(&wt["rank"]))
                        .zip(u32s(&wt["rank_ties"]))
                    {
                        let off = ours.abs_diff(theirs);
                        assert!(
                            off <= ties,
                            "rank {ours} vs {theirs} ({ties} near-ties) at position {pos} of {text:?}"
                        );
                        if ties == 0 {
                            w.ranks += 1;
                        } else {
                            w.ranks_tied += 1;
                        }
                        w.ranks_equal += usize::from(off == 0);
                    }
                }
                // The last prompt position of a profile that generates nothing has no next token.
                (None, None) => assert_eq!(pos + 1, ids.len()),
                (a, b) => panic!("target presence differs at {pos}: {a:?} vs {b:?}"),
            }
            // Mid-block read point: entries 2i (i.a) of the interleaved profile; entries 2i + 1
            // are the block outputs, equal to the block read point's.
            let mid = &m.positions[pos];
            let at_mid = |v: &[f64]| v.iter().step_by(2).copied().collect::<Vec<_>>();
            let at_block = |v: &[f64]| v.iter().skip(1).step_by(2).copied().collect::<Vec<_>>();
            w.mid_shannon = w.mid_shannon.max(max_diff(
                &at_mid(&mid.shannon),
                &f64s(&want["mid"]["shannon"]),
            ));
            let mkl = mid.kl_to_final.as_ref().unwrap();
            w.mid_kl = w
                .mid_kl
                .max(max_rel_diff(&at_mid(mkl), &f64s(&want["mid"]["kl"])));
            assert!(max_diff(&at_block(&mid.shannon), &got.shannon) < 1e-5);
        }
    }
    w
}

#[test]
fn kl_target_and_mid_block_match_transformers_float64() {
    let refs = reference();
    for path in [common::smollm2(), common::gemma3()] {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let w = check_model(&path, &refs["models"][&stem]);
        println!(
            "{stem}: max |ΔKL| {:.2e}, |Δlog p| {:.2e}, mid |ΔH| {:.2e}, mid |ΔKL| {:.2e}, ranks: {} without near-ties (all equal), {} with (within them); {} equal in all",
            w.kl, w.logprob, w.mid_shannon, w.mid_kl, w.ranks, w.ranks_tied, w.ranks_equal
        );
        assert!(w.kl < TOL, "{stem}: KL off by {:.2e}", w.kl);
        assert!(w.logprob < TOL, "{stem}: log p off by {:.2e}", w.logprob);
        assert!(
            w.mid_shannon < TOL,
            "{stem}: mid-block H off by {:.2e}",
            w.mid_shannon
        );
        assert!(
            w.mid_kl < TOL,
            "{stem}: mid-block KL off by {:.2e}",
            w.mid_kl
        );
        assert!(w.ranks > 100, "{stem}: only {} exact ranks", w.ranks);
        // Even among near-ties, float32 orders almost all alike.
        assert!(w.ranks_equal * 50 >= (w.ranks + w.ranks_tied) * 49);
    }
}

/// The tensor-op form of KL, log-probability and rank (what GPUs run) against the CPU kernel on
/// the same residual streams; chunking that splits the rows into many chunks gives the same.
#[test]
fn device_extras_match_cpu_extras() {
    let path = common::smollm2();
    let loaded = load(&ModelSource::Gguf(path), &LoadOptions::cpu()).unwrap();
    let mut model = loaded.model;
    let ids = loaded
        .tokenizer
        .encode("The Eiffel Tower is located in the city of", true)
        .unwrap();
    let input = Tensor::new(ids.as_slice(), &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let cap = model.forward_capture(&input, Positions::All).unwrap();
    // Position-major rows: each position's layers 0..=L, its final block last.
    let stacked = Tensor::stack(&cap.residuals, 2)
        .unwrap()
        .squeeze(0)
        .unwrap();
    let (n, layers, d) = stacked.dims3().unwrap();
    let rows = stacked.reshape((n * layers, d)).unwrap();
    let targets: Vec<GroupTarget> = (0..n)
        .map(|i| match ids.get(i + 1) {
            Some(&t) => GroupTarget::Known(t),
            None => GroupTarget::Choose,
        })
        .collect();
    let spec = extras_spec();
    let run = |lens: Lens| {
        let mut chosen_from = Vec::new();
        let mut choose = |g: usize, z: &[f32]| {
            chosen_from.push(g);
            Ok(entropy_lens::runner::argmax(z))
        };
        let out = lens
            .apply_groups(
                &model,
                &rows,
                Groups {
                    size: layers,
                    kl: true,
                    targets: &targets,
                    choose: &mut choose,
                },
                &[],
            )
            .unwrap();
        assert_eq!(
            chosen_from,
            [n - 1],
            "the chooser runs once, for the last position"
        );
        out
    };
    let cpu = run(Lens::new(spec.clone()).unwrap());
    let dev = run(Lens::new(spec.clone()).unwrap().with_device_path(true));
    // Small chunks: a few groups per chunk.
    let small = run(Lens::new(spec)
        .unwrap()
        .with_max_chunk_bytes(3 * layers * 49152 * 4));
    assert_eq!(cpu.targets, dev.targets);
    assert_eq!(cpu.targets, small.targets);
    assert_eq!(cpu.stats.len(), n * layers);
    let close = |x: Option<f64>, y: Option<f64>| {
        let (x, y) = (x.unwrap(), y.unwrap());
        assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{x} vs {y}");
    };
    for ((a, b), c) in cpu.stats.iter().zip(&dev.stats).zip(&small.stats) {
        close(a.extras.kl_to_final, b.extras.kl_to_final);
        close(a.extras.target_logprob, b.extras.target_logprob);
        assert_eq!(a.extras.target_rank, b.extras.target_rank);
        // Other chunk shapes sum the unembedding in another order.
        close(a.extras.kl_to_final, c.extras.kl_to_final);
        close(a.extras.target_logprob, c.extras.target_logprob);
        close(Some(a.shannon), Some(c.shannon));
    }
}

/// Following the generated token does not change what is generated: the token is chosen inside
/// the lens pass from the same logits, with the same sampler, batched or not.
#[test]
fn following_the_next_token_leaves_generation_unchanged() {
    let path = common::smollm2();
    let mut plain = profiler(&path, StatSpec::default());
    let mut traced = profiler(&path, extras_spec());
    let prompts = ["Once upon a time, there was a", "The capital of France is"];
    let sampling = entropy_lens::runner::Sampling {
        temperature: 0.8,
        sample_top_p: None,
        seed: 7,
    };
    let reqs: Vec<ProfileRequest> = prompts
        .iter()
        .map(|p| {
            ProfileRequest::new(*p)
                .generate(6)
                .sampling(sampling.clone())
        })
        .collect();
    let a = plain.run_batch(&reqs).unwrap();
    let b = traced.run_batch(&reqs).unwrap();
    let single = traced.run(&reqs[0]).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.generated_ids, y.generated_ids);
        // Each measured position follows the token generated after it.
        for (k, pos) in y.positions.iter().enumerate() {
            let t = pos
                .target
                .as_ref()
                .expect("every generated step has a next token");
            assert_eq!(t.id, y.generated_ids[k]);
            assert!(t.logprob.iter().all(|v| v.is_finite() && *v <= 0.0));
        }
    }
    assert_eq!(single.generated_ids, b[0].generated_ids);
    // Greedy: the generated token is the final block's top-1, rank 1.
    let mut greedy = profiler(&path, extras_spec());
    let g = greedy
        .run(&ProfileRequest::new(prompts[1]).generate(4))
        .unwrap();
    for pos in &g.positions {
        assert_eq!(*pos.target.as_ref().unwrap().rank.last().unwrap(), 1);
    }
}

/// A user-given target token, and the errors around these options.
#[test]
fn given_targets_and_bad_options() {
    let path = common::smollm2();
    let mut p = profiler(
        &path,
        StatSpec {
            target: TargetToken::Token(3),
            ..Default::default()
        },
    );
    let prof = p.profile_prompt("Paris is the capital of").unwrap();
    assert!(prof
        .positions
        .iter()
        .all(|x| x.target.as_ref().unwrap().id == 3));
    assert!(prof.kl_matrix().unwrap_err().to_string().contains("--kl"));
    let (ranks, kept) = prof.target_rank_matrix().unwrap();
    assert_eq!(kept.len(), prof.positions.len());
    assert!(ranks.iter().all(|&r| r >= 1.0));

    let mut bad = profiler(
        &path,
        StatSpec {
            target: TargetToken::Token(10_000_000),
            ..Default::default()
        },
    );
    let e = bad.profile_prompt("x").unwrap_err().to_string();
    assert!(e.contains("outside the model's vocabulary"), "{e}");
}
