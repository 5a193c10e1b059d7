//! The baseline both `throughput` and `batch_limits` divide by: the same batch decoded greedily
//! with the model's own logits only, no lens.

use candle_core::{Device, Tensor};
use entropy_lens::runner::{argmax, ProfileRequest, Profiler};

/// Greedy decoding of `reqs` as one left-padded batch with the model's logits only; returns the
/// number of tokens generated.
pub fn decode_without_lens(prof: &mut Profiler, reqs: &[ProfileRequest], tokens: usize) -> usize {
    let prompts: Vec<Vec<u32>> = reqs.iter().map(|r| prof.prompt_ids(r).unwrap()).collect();
    let width = prompts.iter().map(Vec::len).max().unwrap();
    let pads: Vec<usize> = prompts.iter().map(|p| width - p.len()).collect();
    let ids: Vec<u32> = prompts
        .iter()
        .zip(&pads)
        .flat_map(|(p, &pad)| std::iter::repeat_n(0, pad).chain(p.iter().copied()))
        .collect();
    prof.model.reset();
    prof.model.set_left_padding(pads).unwrap();
    let b = prompts.len();
    let input = Tensor::from_vec(ids, (b, width), &Device::Cpu).unwrap();
    let mut logits = prof
        .model
        .logits(&input)
        .unwrap()
        .narrow(1, width - 1, 1)
        .unwrap();
    for step in 0..tokens {
        let next: Vec<u32> = logits
            .squeeze(1)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap()
            .iter()
            .map(|row| argmax(row))
            .collect();
        if step + 1 == tokens {
            break;
        }
        let input = Tensor::from_vec(next, (b, 1), &Device::Cpu).unwrap();
        logits = prof.model.logits(&input).unwrap();
    }
    prof.model.reset();
    b * tokens
}
