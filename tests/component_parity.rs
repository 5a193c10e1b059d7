//! The component read points against transformers: what each block's attention and MLP write to
//! the residual stream, decoded by the logit lens (`--read-point attn-out|mlp-out|components`),
//! on four families' tiny random models (a Llama-like with biases, Gemma 2 with post-norms and
//! soft-caps, GPT-NeoX with its parallel residual, GPT-2 with LayerNorm and Conv1D). The
//! references (`tests/fixtures/families/make_components.py`) capture the writes with forward hooks
//! on the model's own modules, in float64: Shannon, Rényi (0.5, 2, 5, ∞) and KL(final ‖ write)
//! within 1e-4 nats, top-1 ids equal.

use std::path::PathBuf;

use entropy_lens::lens::{LensKind, StatSpec, TunedLens};
use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::profile::{EntropyProfile, ReadPoint};
use entropy_lens::runner::{ProfileRequest, Profiler};
use serde_json::Value;

const TOL: f64 = 1e-4;
const ALPHAS: [(&str, f64); 4] = [("0.5", 0.5), ("2", 2.0), ("5", 5.0), ("inf", f64::INFINITY)];

fn folder(family: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/fixtures/families")
        .join(family)
}

fn profiler(family: &str) -> Profiler {
    let loaded = load(&ModelSource::HfFolder(folder(family)), &LoadOptions::cpu())
        .unwrap_or_else(|e| panic!("{family}: {e}"));
    let spec = StatSpec {
        alphas: ALPHAS.iter().map(|a| a.1).collect(),
        top_k: 1,
        kl_to_final: true,
        ..Default::default()
    };
    Profiler::new(loaded, spec).unwrap()
}

fn profile(prof: &mut Profiler, point: ReadPoint, text: &str) -> EntropyProfile {
    prof.set_read_point(point).unwrap();
    prof.run(&ProfileRequest::new(text).all_positions(true))
        .unwrap()
}

/// The largest differences seen, per statistic.
#[derive(Debug, Default)]
struct Worst {
    shannon: f64,
    renyi: f64,
    kl: f64,
    top1_checked: usize,
    entries: usize,
}

/// Compares the points `pick(j)` of `p` (j = block index 0..L) with `gold[pos][j]`.
fn compare(worst: &mut Worst, p: &EntropyProfile, gold: &Value, pick: impl Fn(usize) -> usize) {
    for (pos, entry) in p.positions.iter().enumerate() {
        let blocks = gold["shannon"][pos].as_array().unwrap().len();
        for j in 0..blocks {
            let at = pick(j);
            let g = |key: &str| gold[key][pos][j].as_f64().unwrap();
            worst.shannon = worst.shannon.max((entry.shannon[at] - g("shannon")).abs());
            for (key, _) in ALPHAS {
                let r = entry.renyi[key][at];
                let want = gold["renyi"][key][pos][j].as_f64().unwrap();
                worst.renyi = worst.renyi.max((r - want).abs());
            }
            let kl = entry.kl_to_final.as_ref().expect("KL measured")[at];
            worst.kl = worst.kl.max((kl - g("kl_to_final")).abs());
            // Top-1 ids are compared where transformers' top two logits differ by more than the
            // f32 arithmetic can move them.
            if g("top1_margin") > 1e-4 {
                assert_eq!(
                    entry.top_k[at][0].0 as u64,
                    gold["top1"][pos][j].as_u64().unwrap(),
                    "top-1 at position {pos}, block {}",
                    j + 1
                );
                worst.top1_checked += 1;
            }
            worst.entries += 1;
        }
    }
}

fn check(family: &str) {
    let gold: Value = serde_json::from_str(
        &std::fs::read_to_string(folder(family).join("components.json")).unwrap(),
    )
    .unwrap();
    let blocks_gold: Value = serde_json::from_str(
        &std::fs::read_to_string(folder(family).join("reference.json")).unwrap(),
    )
    .unwrap();
    let mut prof = profiler(family);
    let mut worst = Worst::default();
    for (prompt, block_ref) in gold["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .zip(blocks_gold["prompts"].as_array().unwrap())
    {
        let text = prompt["text"].as_str().unwrap();
        let components = profile(&mut prof, ReadPoint::Components, text);
        assert_eq!(
            components.point_labels()[..3],
            ["1.attn", "1.mlp", "1"],
            "{family}"
        );
        // Interleaved: block j's attention write, its MLP write, then the residual after it.
        compare(&mut worst, &components, &prompt["attn"], |j| 3 * j);
        compare(&mut worst, &components, &prompt["mlp"], |j| 3 * j + 1);
        for (pos, entry) in components.positions.iter().enumerate() {
            for (j, h) in block_ref["layers"]["shannon"][pos]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
            {
                let d = (entry.shannon[3 * j + 2] - h.as_f64().unwrap()).abs();
                assert!(d < TOL, "{family}: block {} residual off by {d}", j + 1);
            }
        }
        // One kind alone reads the same numbers (the final row is measured, then dropped).
        let attn = profile(&mut prof, ReadPoint::AttnOut, text);
        compare(&mut worst, &attn, &prompt["attn"], |j| j);
        let mlp = profile(&mut prof, ReadPoint::MlpOut, text);
        compare(&mut worst, &mlp, &prompt["mlp"], |j| j);
        assert_eq!(
            attn.point_labels().last().unwrap(),
            &format!("{}.attn", attn.n_blocks)
        );
    }
    println!("{family}: {worst:?}");
    assert!(
        worst.entries > 0 && worst.top1_checked > worst.entries / 2,
        "{worst:?}"
    );
    assert!(
        worst.shannon < TOL && worst.renyi < TOL && worst.kl < TOL,
        "{family}: {worst:?}"
    );
}

#[test]
fn qwen2_writes_match_transformers() {
    check("qwen2");
}

#[test]
fn gemma2_writes_after_its_post_norms_match_transformers() {
    check("gemma2");
}

#[test]
fn gpt_neox_parallel_writes_match_transformers() {
    check("gpt_neox");
}

#[test]
fn gpt2_writes_match_transformers() {
    check("gpt2");
}

#[test]
fn a_skipped_block_writes_nothing() {
    // Zero written: the final norm of zero reads every token alike (RMSNorm: all logits 0), so the
    // distribution is uniform over the vocabulary.
    let mut prof = profiler("qwen2");
    prof.model.set_skipped_blocks(&[2]).unwrap();
    let p = profile(&mut prof, ReadPoint::Components, "Once upon a time");
    let uniform = (prof.model.info().vocab_size as f64).ln();
    for entry in &p.positions {
        for at in [3, 4] {
            assert!(
                (entry.shannon[at] - uniform).abs() < 1e-6,
                "{}",
                entry.shannon[at]
            );
        }
        // The residual after the skipped block is the one before it.
        assert_eq!(entry.shannon[5], entry.shannon[2]);
    }
}

#[test]
fn writes_are_refused_through_a_tuned_lens() {
    let mut prof = profiler("qwen2");
    let info = prof.model.info().clone();
    let lens = TunedLens::zeros(&info.name, info.d_model, info.n_layers).unwrap();
    prof.set_lens(LensKind::Tuned(std::sync::Arc::new(lens)))
        .unwrap();
    for point in [ReadPoint::AttnOut, ReadPoint::MlpOut, ReadPoint::Components] {
        let err = prof.set_read_point(point).unwrap_err().to_string();
        assert!(
            err.contains("--lens logit") && err.contains("writes"),
            "{err}"
        );
    }
    // And the other way round: a tuned lens after a write read point.
    let mut prof = profiler("qwen2");
    prof.set_read_point(ReadPoint::MlpOut).unwrap();
    let lens = TunedLens::zeros(&info.name, info.d_model, info.n_layers).unwrap();
    assert!(prof
        .set_lens(LensKind::Tuned(std::sync::Arc::new(lens)))
        .is_err());
}

#[test]
fn read_points_parse_and_name_themselves() {
    for point in [
        ReadPoint::Block,
        ReadPoint::Attention,
        ReadPoint::Both,
        ReadPoint::AttnOut,
        ReadPoint::MlpOut,
        ReadPoint::Components,
    ] {
        assert_eq!(ReadPoint::parse(point.as_str()).unwrap(), point);
        let json = serde_json::to_string(&point).unwrap();
        assert_eq!(json, format!("\"{}\"", point.as_str()));
    }
    let err = ReadPoint::parse("mlp").unwrap_err().to_string();
    assert!(
        err.contains("mlp-out") && err.contains("components"),
        "{err}"
    );
}
