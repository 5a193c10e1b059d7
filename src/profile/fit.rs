//! How well a lens fits the model on the tokens a run actually profiles: the mean KL from the
//! model's own distribution to the lens's at every block, and the calibration gap.
//!
//! A lens at the KL optimum predicts the expected final distribution given what the block holds,
//! q = E[p | h]; then E[H(q)] = E[H(p)] + E[KL(p ‖ q)] (the cross-entropy of p against q averages
//! to H(q)). The gap E[H(q)] − E[H(p)] − E[KL(p ‖ q)] is therefore 0 for a calibrated lens and
//! negative for an over-confident one, whose entropy profile reads too low.

use serde::{Deserialize, Serialize};

use super::EntropyProfile;

/// The lens's fit per block over a set of profiles (each profile one prompt).
///
/// Means are over prompts of each prompt's mean over its measured tokens (so a long generation
/// does not outweigh a short one), and the 95 % half-widths are 1.96 · s / √n with s the sample
/// standard deviation over the n prompts (tokens of one prompt are not independent).
///
/// # Shapes
/// Every per-block vector has one entry per block (entry j: the residual after block j + 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LensFit {
    /// Prompts (profiles) and measured tokens counted.
    pub n_prompts: usize,
    pub n_tokens: usize,
    /// Mean KL(final ‖ lens) in nats; 0 at the last block, where the lens reads the model's own
    /// distribution.
    pub mean_kl: Vec<f64>,
    /// Mean entropy of the lens's distribution (the entropy profile), in nats.
    pub mean_entropy: Vec<f64>,
    /// Mean entropy of the model's own distribution (the last block's), in nats.
    pub final_entropy: f64,
    /// `mean_entropy − final_entropy − mean_kl` (0 for a calibrated lens, negative for an
    /// over-confident one).
    pub calibration_gap: Vec<f64>,
    /// 95 % half-widths of `mean_kl` and `calibration_gap` over prompts (absent with one prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_ci95: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_ci95: Option<Vec<f64>>,
}

impl LensFit {
    /// The fit over `profiles`; `None` when there are none with measured tokens, when a position
    /// has no KL to the final distribution (not measured: CLI `--kl`) or when the profiles do not
    /// have the same number of blocks.
    pub fn of<'a>(profiles: impl IntoIterator<Item = &'a EntropyProfile>) -> Option<Self> {
        // Per prompt: mean KL, mean lens entropy and mean gap per block.
        let mut kl_rows: Vec<Vec<f64>> = Vec::new();
        let mut h_rows: Vec<Vec<f64>> = Vec::new();
        let mut gap_rows: Vec<Vec<f64>> = Vec::new();
        let mut finals: Vec<f64> = Vec::new();
        let mut n_tokens = 0;
        let mut blocks = None;
        for p in profiles {
            if p.positions.is_empty() {
                continue;
            }
            let l = p.n_points();
            if *blocks.get_or_insert(l) != l || l == 0 {
                return None;
            }
            let (mut kl, mut h, mut fin) = (vec![0.0; l], vec![0.0; l], 0.0);
            for pos in &p.positions {
                let k = pos.kl_to_final.as_ref()?;
                if k.len() != l || pos.shannon.len() != l {
                    return None;
                }
                for j in 0..l {
                    kl[j] += k[j];
                    h[j] += pos.shannon[j];
                }
                fin += pos.shannon[l - 1];
            }
            let m = p.positions.len() as f64;
            kl.iter_mut().chain(h.iter_mut()).for_each(|x| *x /= m);
            fin /= m;
            gap_rows.push((0..l).map(|j| h[j] - fin - kl[j]).collect());
            kl_rows.push(kl);
            h_rows.push(h);
            finals.push(fin);
            n_tokens += p.positions.len();
        }
        if finals.is_empty() {
            return None;
        }
        let (mean_kl, kl_ci95) = mean_and_ci(&kl_rows);
        let (mean_entropy, _) = mean_and_ci(&h_rows);
        let (calibration_gap, gap_ci95) = mean_and_ci(&gap_rows);
        Some(Self {
            n_prompts: finals.len(),
            n_tokens,
            mean_kl,
            mean_entropy,
            final_entropy: finals.iter().sum::<f64>() / finals.len() as f64,
            calibration_gap,
            kl_ci95,
            gap_ci95,
        })
    }
}

/// Column means of `rows` and their 95 % half-widths (normal approximation; `None` for one row).
fn mean_and_ci(rows: &[Vec<f64>]) -> (Vec<f64>, Option<Vec<f64>>) {
    let n = rows.len() as f64;
    let l = rows[0].len();
    let mean: Vec<f64> = (0..l)
        .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n)
        .collect();
    let ci = (rows.len() > 1).then(|| {
        (0..l)
            .map(|j| {
                let var = rows.iter().map(|r| (r[j] - mean[j]).powi(2)).sum::<f64>() / (n - 1.0);
                1.96 * (var / n).sqrt()
            })
            .collect()
    });
    (mean, ci)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile of one prompt: per token, (shannon per block, KL per block).
    fn profile(tokens: &[(Vec<f64>, Option<Vec<f64>>)]) -> EntropyProfile {
        let line = serde_json::json!({
            "model": "m", "prompt": "p", "n_layers": 3,
            "prompt_ids": (0..tokens.len() as u32).collect::<Vec<_>>(), "generated_ids": [],
            "positions": tokens.iter().enumerate().map(|(i, (h, kl))| serde_json::json!({
                "position": i, "shannon": h, "top_p_count": [1, 1, 1], "kl_to_final": kl,
            })).collect::<Vec<_>>(),
        });
        EntropyProfile::from_json(&line.to_string()).unwrap()
    }

    #[test]
    fn fit_is_the_mean_over_prompts_of_each_prompts_token_mean() {
        let a = profile(&[
            (vec![3.0, 2.0, 1.0], Some(vec![2.0, 1.0, 0.0])),
            (vec![5.0, 2.0, 3.0], Some(vec![4.0, 3.0, 0.0])),
        ]);
        let b = profile(&[(vec![1.0, 1.0, 1.0], Some(vec![1.0, 0.5, 0.0]))]);
        let fit = LensFit::of([&a, &b]).unwrap();
        assert_eq!((fit.n_prompts, fit.n_tokens), (2, 3));
        // Prompt a: KL (3, 2, 0), H (4, 2, 2), final 2, gap (−1, −2, 0); prompt b: KL (1, .5, 0),
        // H (1, 1, 1), final 1, gap (−1, −.5, 0).
        assert_eq!(fit.mean_kl, vec![2.0, 1.25, 0.0]);
        assert_eq!(fit.mean_entropy, vec![2.5, 1.5, 1.5]);
        assert_eq!(fit.final_entropy, 1.5);
        assert_eq!(fit.calibration_gap, vec![-1.0, -1.25, 0.0]);
        // Two prompts: s = |x_a − x_b| / √2, half-width 1.96 · s / √2 = 0.98 · |x_a − x_b|.
        let kl_ci = fit.kl_ci95.unwrap();
        let expect = [0.98 * 2.0, 0.98 * 1.5, 0.0];
        for (c, e) in kl_ci.iter().zip(expect) {
            assert!((c - e).abs() < 1e-12, "{kl_ci:?}");
        }
        let gap_ci = fit.gap_ci95.unwrap();
        assert!(gap_ci[0].abs() < 1e-12 && (gap_ci[1] - 0.98 * 1.5).abs() < 1e-12);
    }

    #[test]
    fn one_prompt_has_no_interval_and_missing_kl_gives_none() {
        let a = profile(&[(vec![3.0, 2.0, 1.0], Some(vec![2.0, 1.0, 0.0]))]);
        let fit = LensFit::of([&a]).unwrap();
        assert!(fit.kl_ci95.is_none() && fit.gap_ci95.is_none());
        let no_kl = profile(&[(vec![3.0, 2.0, 1.0], None)]);
        assert!(LensFit::of([&a, &no_kl]).is_none());
        assert!(LensFit::of(std::iter::empty()).is_none());
    }
}
