//! Device benchmark and CPU-vs-device agreement on synthetic Llama-architecture weights.
//!
//! `cargo bench --bench device -- [--device cuda|cpu] [--tokenizer PATH] [--quick]`
//! (built with `--features cuda` for a GPU; `scripts/build-cuda.sh` cross-builds it here).
//!
//! Real weights cannot travel to the GPU machine, so weights are random (seeded, std 0.02) with
//! real shapes, written in the Hugging Face layout and loaded through the normal path:
//! * agreement: SmolLM2-135M shapes in f32, every position of a prompt and an 8-token greedy
//!   generation on the CPU and on the device (device-side lens statistics) — max |ΔH|, top-p and
//!   top-1 agreement, identical generated ids;
//! * speed: SmolLM2 shapes in f32 and, on a GPU, Llama-3.2-1B shapes (16 blocks, d 2048,
//!   vocabulary 128,256) in bf16 and f32 — 32
//!   generated tokens with the lens at every block vs plain decoding in the same process, and the
//!   lens at every block and position of a 512-token prompt.
//!
//! The tokenizer is any `tokenizer.json` (`entropy-lens export-hf` of SmolLM2 writes one).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, parse_device, LoadOptions, ModelSource, WeightDType};
use entropy_lens::runner::{argmax, ProfileRequest, Profiler};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

struct Shape {
    name: &'static str,
    hidden: usize,
    ffn: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    vocab: usize,
}

const SMOL: Shape = Shape {
    name: "SmolLM2-135M shapes",
    hidden: 576,
    ffn: 1536,
    layers: 30,
    heads: 9,
    kv_heads: 3,
    vocab: 49152,
};
const LLAMA_1B: Shape = Shape {
    name: "Llama-3.2-1B shapes",
    hidden: 2048,
    ffn: 8192,
    layers: 16,
    heads: 32,
    kv_heads: 8,
    vocab: 128256,
};

fn random(rng: &mut ChaCha8Rng, shape: (usize, usize), std: f32) -> Tensor {
    // Uniform with the right variance: fast and good enough for timing and agreement.
    let a = std * 3f32.sqrt();
    let v: Vec<f32> = (0..shape.0 * shape.1)
        .map(|_| rng.random_range(-a..a))
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

/// Writes a Llama-architecture model with random weights in Hugging Face layout.
fn synth_model(dir: &Path, s: &Shape, tokenizer: &Path, dtype: DType) {
    std::fs::create_dir_all(dir).unwrap();
    let hd = s.hidden / s.heads;
    let cfg = json!({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "hidden_size": s.hidden, "intermediate_size": s.ffn, "num_hidden_layers": s.layers,
        "num_attention_heads": s.heads, "num_key_value_heads": s.kv_heads, "head_dim": hd,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 8192,
        "vocab_size": s.vocab, "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2
    });
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    std::fs::copy(tokenizer, dir.join("tokenizer.json")).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut t: HashMap<String, Tensor> = HashMap::new();
    let mut put = |name: String, x: Tensor| {
        t.insert(name, x.to_dtype(dtype).unwrap());
    };
    put(
        "model.embed_tokens.weight".into(),
        random(&mut rng, (s.vocab, s.hidden), 0.02),
    );
    put(
        "model.norm.weight".into(),
        Tensor::ones(s.hidden, DType::F32, &Device::Cpu).unwrap(),
    );
    for l in 0..s.layers {
        let p = format!("model.layers.{l}");
        put(
            format!("{p}.input_layernorm.weight"),
            Tensor::ones(s.hidden, DType::F32, &Device::Cpu).unwrap(),
        );
        put(
            format!("{p}.post_attention_layernorm.weight"),
            Tensor::ones(s.hidden, DType::F32, &Device::Cpu).unwrap(),
        );
        put(
            format!("{p}.self_attn.q_proj.weight"),
            random(&mut rng, (s.heads * hd, s.hidden), 0.02),
        );
        put(
            format!("{p}.self_attn.k_proj.weight"),
            random(&mut rng, (s.kv_heads * hd, s.hidden), 0.02),
        );
        put(
            format!("{p}.self_attn.v_proj.weight"),
            random(&mut rng, (s.kv_heads * hd, s.hidden), 0.02),
        );
        put(
            format!("{p}.self_attn.o_proj.weight"),
            random(&mut rng, (s.hidden, s.heads * hd), 0.02),
        );
        put(
            format!("{p}.mlp.gate_proj.weight"),
            random(&mut rng, (s.ffn, s.hidden), 0.02),
        );
        put(
            format!("{p}.mlp.up_proj.weight"),
            random(&mut rng, (s.ffn, s.hidden), 0.02),
        );
        put(
            format!("{p}.mlp.down_proj.weight"),
            random(&mut rng, (s.hidden, s.ffn), 0.02),
        );
    }
    candle_core::safetensors::save(&t, dir.join("model.safetensors")).unwrap();
}

fn profiler(dir: &Path, device: &Device, dtype: WeightDType) -> Profiler {
    let spec = StatSpec {
        alphas: vec![0.5, 2.0, f64::INFINITY],
        top_k: 5,
        ..Default::default()
    };
    let opts = LoadOptions {
        device: device.clone(),
        dtype: Some(dtype),
    };
    Profiler::new(
        load(&ModelSource::HfFolder(dir.to_path_buf()), &opts).unwrap(),
        spec,
    )
    .unwrap()
}

const PROMPT: &str =
    "The Eiffel Tower is located in the city of Paris, which is the capital of France.";

fn agreement(dir: &Path, device: &Device) {
    let mut cpu = profiler(dir, &Device::Cpu, WeightDType::F32);
    let mut dev = profiler(dir, device, WeightDType::F32);
    let req = ProfileRequest::new(PROMPT)
        .all_positions(true)
        .generate(8)
        .ignore_eos(true);
    let a = cpu.run(&req).unwrap();
    let b = dev.run(&req).unwrap();
    let (mut dh, mut dr, mut topp, mut top1, mut n) = (0f64, 0f64, 0usize, 0usize, 0usize);
    for (x, y) in a.positions.iter().zip(&b.positions) {
        for l in 0..x.shannon.len() {
            dh = dh.max((x.shannon[l] - y.shannon[l]).abs());
            for (k, v) in &x.renyi {
                dr = dr.max((v[l] - y.renyi[k][l]).abs());
            }
            topp += usize::from(x.top_p_count[l] != y.top_p_count[l]);
            top1 += usize::from(x.top_k[l][0].0 != y.top_k[l][0].0);
            n += 1;
        }
    }
    println!(
        "## CPU vs {device:?} on identical weights ({}, f32)\n",
        SMOL.name
    );
    println!("| entries | max |ΔH| Shannon | max |ΔH| Rényi (0.5, 2, ∞) | top-p count mismatches | top-1 mismatches | generated ids equal |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {n} | {dh:.2e} | {dr:.2e} | {topp} | {top1} | {} |\n",
        a.generated_ids == b.generated_ids
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn speed(dir: &Path, shape: &Shape, device: &Device, dtype: WeightDType, reps: usize) -> String {
    let t = Instant::now();
    let mut p = profiler(dir, device, dtype);
    let load_s = t.elapsed().as_secs_f64();
    let gen = 32;
    let req = ProfileRequest::new(PROMPT).generate(gen).ignore_eos(true);
    p.run(&ProfileRequest::new(PROMPT).generate(2).ignore_eos(true))
        .unwrap();
    let lens = median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                let r = p.run(&req).unwrap();
                assert_eq!(r.generated_ids.len(), gen);
                gen as f64 / t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let ids = p.tokenizer.encode(PROMPT, true).unwrap();
    let plain = median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                p.model.reset();
                let input = Tensor::new(ids.as_slice(), device)
                    .unwrap()
                    .unsqueeze(0)
                    .unwrap();
                let logits = p.model.logits(&input).unwrap();
                let mut last: Vec<f32> = logits
                    .get(0)
                    .unwrap()
                    .get(ids.len() - 1)
                    .unwrap()
                    .to_dtype(DType::F32)
                    .unwrap()
                    .to_vec1()
                    .unwrap();
                for _ in 1..gen {
                    let input = Tensor::new(&[argmax(&last)], device)
                        .unwrap()
                        .unsqueeze(0)
                        .unwrap();
                    last = p
                        .model
                        .logits(&input)
                        .unwrap()
                        .flatten_all()
                        .unwrap()
                        .to_dtype(DType::F32)
                        .unwrap()
                        .to_vec1()
                        .unwrap();
                }
                gen as f64 / t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let long: Vec<u32> = (0..512u32).map(|i| 100 + (i * 37) % 40000).collect();
    let text = p.tokenizer.decode(&long).unwrap();
    let preq = ProfileRequest::new(text)
        .all_positions(true)
        .ignore_eos(true);
    let n_pos = p.prompt_ids(&preq).unwrap().len();
    let all = median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                p.run(&preq).unwrap();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let rows = (n_pos * p.model.n_layers()) as f64;
    format!(
        "| {:?} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0}% | {n_pos} | {:.2} | {:.0} |",
        device,
        shape.name,
        dtype.as_str(),
        load_s,
        lens,
        plain,
        100.0 * (plain / lens - 1.0),
        all,
        rows / all
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let device = parse_device(&get("--device").unwrap_or_else(|| "cpu".into())).unwrap();
    let quick = args.iter().any(|a| a == "--quick");
    let reps = if quick { 1 } else { 3 };
    let tokenizer = PathBuf::from(get("--tokenizer").unwrap_or_else(|| "tokenizer.json".into()));
    assert!(
        tokenizer.is_file(),
        "pass --tokenizer PATH (a tokenizer.json)"
    );
    let work = tempfile::tempdir().unwrap();
    let small = work.path().join("smol");
    synth_model(&small, &SMOL, &tokenizer, DType::F32);
    if !matches!(device, Device::Cpu) {
        agreement(&small, &device);
    }
    println!("| device | shapes | weights | load (s) | 32 tokens, lens at every block (tok/s) | no lens (tok/s) | lens cost | prompt tokens | all positions × blocks (s) | lens rows/s |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!("{}", speed(&small, &SMOL, &device, WeightDType::F32, reps));
    if !matches!(device, Device::Cpu) {
        let big = work.path().join("llama1b");
        let t = Instant::now();
        synth_model(&big, &LLAMA_1B, &tokenizer, DType::BF16);
        eprintln!(
            "synthetic 1B model written in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        for dtype in [WeightDType::BF16, WeightDType::F32] {
            println!("{}", speed(&big, &LLAMA_1B, &device, dtype, reps));
        }
    }
    println!("\nthreads (CPU): {}", rayon::current_num_threads());
}
