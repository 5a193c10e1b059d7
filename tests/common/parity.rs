//! Comparison of our lens statistics with a reference in the golden schema
//! (`tests/golden/README.md`): per position and layer, Shannon, Rényi, top-p counts, top-1; per
//! position, the prediction depth against the one the reference's own top-1 tokens give.

use entropy_lens::profile::{EntropyProfile, PositionProfile};
use entropy_lens::runner::{ProfileRequest, Profiler};
use serde_json::Value;

use super::{f64s, u32s};

pub const ALPHAS: [(&str, f64); 4] = [("0.5", 0.5), ("2", 2.0), ("5", 5.0), ("inf", f64::INFINITY)];

#[derive(Default, Debug)]
pub struct Report {
    pub entries: usize,
    pub max_shannon: f64,
    pub max_renyi: f64,
    pub topp_checked: usize,
    pub topp_mismatch: usize,
    pub top1_mismatch: usize,
    pub depths_checked: usize,
    pub depth_mismatch: usize,
}

impl Report {
    /// Entropies within `tol` nats, some top-p counts checked and all equal, top-1 all equal.
    pub fn assert_within(&self, tol: f64) {
        assert!(self.topp_checked > 0, "no top-p count was checked");
        assert!(
            self.max_shannon < tol,
            "Shannon differs by {}",
            self.max_shannon
        );
        assert!(self.max_renyi < tol, "Rényi differs by {}", self.max_renyi);
        assert_eq!(self.topp_mismatch, 0, "top-p counts differ");
        assert_eq!(self.top1_mismatch, 0, "top-1 ids differ");
        self.assert_depths();
    }

    /// Every position's prediction depth is the reference's.
    pub fn assert_depths(&self) {
        assert!(self.depths_checked > 0, "no prediction depth was checked");
        assert_eq!(self.depth_mismatch, 0, "prediction depths differ");
    }

    /// Compares one distribution (our per-layer values vs the reference at that layer).
    fn compare(
        &mut self,
        ours: (f64, &[(String, f64)], u32, u32),
        gold: &Value,
        pos: usize,
        layer: Option<usize>,
    ) {
        let at = |v: &Value| -> Value {
            let v = &v[pos];
            match layer {
                Some(l) => v[l].clone(),
                None => v.clone(),
            }
        };
        let (shannon, renyi, topp, top1) = ours;
        self.entries += 1;
        self.max_shannon = self
            .max_shannon
            .max((shannon - at(&gold["shannon"]).as_f64().unwrap()).abs());
        for (key, value) in renyi {
            let g = at(&gold["renyi"][key.as_str()]).as_f64().unwrap();
            self.max_renyi = self.max_renyi.max((value - g).abs());
        }
        let margin = at(&gold["topp_margin"]).as_f64().unwrap();
        if margin >= 1e-5 {
            self.topp_checked += 1;
            if topp as u64 != at(&gold["topp_size"]).as_u64().unwrap() {
                self.topp_mismatch += 1;
            }
        }
        if top1 as u64 != at(&gold["top5_ids"])[0].as_u64().unwrap() {
            self.top1_mismatch += 1;
        }
    }

    pub fn position(
        &mut self,
        p: &PositionProfile,
        gold_layers: &Value,
        gold_embed: &Value,
        pos: usize,
    ) {
        for l in 0..p.shannon.len() {
            let renyi: Vec<(String, f64)> = ALPHAS
                .iter()
                .map(|(k, _)| (k.to_string(), p.renyi[*k][l]))
                .collect();
            self.compare(
                (p.shannon[l], &renyi, p.top_p_count[l], p.top_k[l][0].0),
                gold_layers,
                pos,
                Some(l),
            );
        }
        // The depth the reference's top-1 tokens give, computed here without the library: the
        // first block from which every later block's top-1 is the last block's.
        let theirs: Vec<u64> = (0..p.shannon.len())
            .map(|l| gold_layers["top5_ids"][pos][l][0].as_u64().unwrap())
            .collect();
        let last = *theirs.last().unwrap();
        let mut depth = theirs.len();
        while depth > 1 && theirs[depth - 2] == last {
            depth -= 1;
        }
        self.depths_checked += 1;
        if p.prediction_depth != Some(depth) {
            self.depth_mismatch += 1;
        }
        let e = p.embed.as_ref().expect("embedding layer requested");
        let renyi: Vec<(String, f64)> = ALPHAS
            .iter()
            .map(|(k, _)| (k.to_string(), e.renyi[*k]))
            .collect();
        self.compare(
            (e.shannon, &renyi, e.top_p_count, e.top_k[0].0),
            gold_embed,
            pos,
            None,
        );
    }
}

pub fn generation_check(prof: &mut Profiler, gold: &Value, n: usize, tol: f64) {
    for g in gold["generation"].as_array().unwrap() {
        let req = ProfileRequest::new(g["prompt"].as_str().unwrap())
            .generate(n)
            .ignore_eos(true);
        let profile: EntropyProfile = prof.run(&req).unwrap();
        assert_eq!(profile.prompt_ids, u32s(&g["prompt_token_ids"]));
        assert_eq!(
            profile.generated_ids,
            u32s(&g["generated_ids"]),
            "greedy ids for {:?}",
            g["prompt"]
        );
        assert_eq!(profile.positions.len(), n);
        let n = profile.prompt_ids.len();
        let mut worst = 0f64;
        for (t, p) in profile.positions.iter().enumerate() {
            assert_eq!(p.position, n - 1 + t);
            for (ours, theirs) in p.shannon.iter().zip(f64s(&g["layers_shannon"][t])) {
                worst = worst.max((ours - theirs).abs());
            }
        }
        println!("generation {:?}: max |ΔH| = {worst:.2e}", g["prompt"]);
        assert!(worst < tol, "generation profile differs by {worst}");
    }
}
