//! The device (tensor-op) reduction of the lens, which GPUs run, against the CPU kernel on the
//! same real residual streams: entropies within 1e-5 nats, equal top-p counts and sets, the same
//! top-k tokens and the same most likely token (with and without a top k).

mod common;

use candle_core::{Device, Tensor};
use entropy_lens::lens::{Lens, StatSpec};
use entropy_lens::model::{load, LoadOptions, ModelSource, Positions, WeightDType};

#[test]
fn device_reduction_matches_cpu_kernel() {
    for path in [common::smollm2(), common::gemma3()] {
        let loaded = load(
            &ModelSource::Gguf(path.clone()),
            &LoadOptions::cpu().with_dtype(WeightDType::Quantized),
        )
        .unwrap();
        let mut model = loaded.model;
        let ids = loaded
            .tokenizer
            .encode(
                "Q: Was Claude Shannon born in an even or odd year? A:",
                true,
            )
            .unwrap();
        let input = Tensor::new(ids.as_slice(), &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let cap = model.forward_capture(&input, Positions::All).unwrap();
        let rows: Vec<Tensor> = cap
            .residuals
            .iter()
            .map(|t| t.squeeze(0).unwrap())
            .collect();
        let rows = Tensor::cat(&rows, 0).unwrap();
        let spec = StatSpec {
            alphas: vec![0.0, 0.5, 2.0, f64::INFINITY],
            top_k: 5,
            top_p_ids: true,
            ..Default::default()
        };
        let cpu = Lens::new(spec.clone())
            .unwrap()
            .apply(&model, &rows)
            .unwrap();
        let dev = Lens::new(spec)
            .unwrap()
            .with_device_path(true)
            .apply(&model, &rows)
            .unwrap();
        assert_eq!(cpu.len(), dev.len());
        let (mut dh, mut topp) = (0f64, 0usize);
        for (a, b) in cpu.iter().zip(&dev) {
            dh = dh.max((a.shannon - b.shannon).abs());
            for (x, y) in a.renyi.iter().zip(&b.renyi) {
                dh = dh.max((x - y).abs());
            }
            topp += usize::from(a.top_p_count != b.top_p_count);
            let (ia, ib) = (a.top_p_ids.clone().unwrap(), b.top_p_ids.clone().unwrap());
            assert_eq!(ia.len(), a.top_p_count as usize);
            assert_eq!(ib.len(), b.top_p_count as usize);
            if a.top_p_count == b.top_p_count {
                let (mut sa, mut sb) = (ia, ib);
                sa.sort_unstable();
                sb.sort_unstable();
                assert_eq!(sa, sb, "top-p sets differ");
            }
            let ka: Vec<u32> = a.top_k.iter().map(|x| x.0).collect();
            let kb: Vec<u32> = b.top_k.iter().map(|x| x.0).collect();
            assert_eq!(ka, kb);
            // The most likely token, which prediction depth follows, is the first of the top k.
            assert_eq!((a.top1, b.top1), (ka[0], kb[0]));
            for (x, y) in a.top_k.iter().zip(&b.top_k) {
                assert!((x.1 - y.1).abs() < 1e-5);
            }
        }
        println!(
            "{}: {} rows, max |ΔH| {dh:.2e}, top-p mismatches {topp}",
            path.display(),
            cpu.len()
        );
        // The device path runs its top-p search to one of the row's values and resolves ties
        // exactly, so the counts are equal (real streams have no ties that f64 sums split).
        assert!(dh < 1e-5, "{dh}");
        assert_eq!(topp, 0, "{topp} of {} top-p counts differ", cpu.len());
        // Without a top k, both paths still find the most likely token.
        let bare = StatSpec {
            top_k: 0,
            ..Default::default()
        };
        let cpu0 = Lens::new(bare.clone())
            .unwrap()
            .apply(&model, &rows)
            .unwrap();
        let dev0 = Lens::new(bare)
            .unwrap()
            .with_device_path(true)
            .apply(&model, &rows)
            .unwrap();
        for ((a, b), c) in cpu0.iter().zip(&dev0).zip(&cpu) {
            assert!(a.top_k.is_empty() && b.top_k.is_empty());
            assert_eq!((a.top1, b.top1), (c.top1, c.top1));
        }
    }
}
