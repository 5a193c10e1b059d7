//! The smallest complete experiment (docs/experiments.md, "Adding an experiment"): the entropy
//! after the last block, per output format, run through the experiment machinery without being
//! registered. `cargo run --release --example final_entropy` (the offline SmolLM2 by default).

use entropy_lens::analysis::Table;
use entropy_lens::experiments::inputs::Topics;
use entropy_lens::experiments::outputs::{check_depths, FeatureLayout, Features};
use entropy_lens::experiments::{
    run_with, Experiment, ExperimentConfig, Plan, PlanOption, Record, RunOptions, WorkItem,
};
use entropy_lens::plots::Chart;
use entropy_lens::profile::Aggregation;
use entropy_lens::runner::Profiler;
use entropy_lens::Result;
use serde::{Deserialize, Serialize};

pub struct FinalEntropy;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinalEntropySpec {
    pub topics: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinalEntropyResult {
    /// Mean Shannon entropy (nats) after the last block, per format.
    pub by_format: Vec<(String, f64)>,
}

impl Experiment for FinalEntropy {
    const NAME: &'static str = "final-entropy";
    const PAPER: &'static str = "—";
    const SUMMARY: &'static str = "entropy after the last block, per output format";
    const OPTIONS: &'static [PlanOption] = &[PlanOption::Data];
    type Spec = FinalEntropySpec;
    type Result = FinalEntropyResult;
    type Input = Topics;
    type Instrument = Profiler;

    fn spec(plan: &Plan) -> Result<FinalEntropySpec> {
        Ok(FinalEntropySpec {
            topics: plan.n.unwrap_or(10),
        })
    }

    fn tokens(_: &FinalEntropySpec) -> usize {
        1
    }

    fn items(
        _: &ExperimentConfig,
        spec: &FinalEntropySpec,
        topics: &Topics,
    ) -> Result<Vec<WorkItem>> {
        topics.format_items(spec.topics)
    }

    fn finish(
        cfg: &ExperimentConfig,
        _: &FinalEntropySpec,
        records: &[Record],
    ) -> Result<(FinalEntropyResult, Features)> {
        let l = check_depths(cfg, 1, records)?;
        let mut features = Features::new(FeatureLayout::tokens_by_layers(
            1,
            l,
            "shannon",
            Aggregation::Mean,
        ));
        let mut sums: Vec<(String, f64, usize)> = Vec::new();
        for r in records {
            let h = &r.profile.positions[0].shannon;
            features.push(r, h.clone())?;
            match sums.iter_mut().find(|(label, _, _)| *label == r.label) {
                Some(s) => (s.1, s.2) = (s.1 + h[l - 1], s.2 + 1),
                None => sums.push((r.label.clone(), h[l - 1], 1)),
            }
        }
        let by_format = sums
            .into_iter()
            .map(|(f, s, n)| (f, s / n as f64))
            .collect();
        Ok((FinalEntropyResult { by_format }, features))
    }

    fn comparison(results: &[&FinalEntropyResult]) -> Vec<Table> {
        let mut t = Table::new(
            "Entropy after the last block (nats)",
            &["format", "mean H_L"],
        );
        for r in results {
            for (format, h) in &r.by_format {
                t.row(vec![format.clone(), format!("{h:.3}")]);
            }
        }
        vec![t]
    }

    fn tables(_: &FinalEntropyResult) -> Vec<Table> {
        Vec::new()
    }

    fn charts(_: &FinalEntropyResult) -> Result<Vec<Chart>> {
        Ok(Vec::new())
    }
}

fn main() -> Result<()> {
    let plan = Plan::new(FinalEntropy).n(4);
    let summary = run_with::<FinalEntropy>(&plan, &RunOptions::default())?;
    println!("{}", summary.outcome.expect("an unsharded run finishes"));
    Ok(())
}
