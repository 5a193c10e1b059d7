//! `entropy-lens demo`: the main job on a fresh machine.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::time::Instant;

use super::{progress_bar, render_table};
use crate::error::{Error, Result};
use crate::fetch;
use crate::lens::StatSpec;
use crate::model::{load, LoadOptions, ModelSource};
use crate::runner::{ProfileRequest, Profiler};

/// The demo's prompt.
pub const DEMO_PROMPT: &str = "The Eiffel Tower is located in the city of";

/// The main job on a fresh machine: fetch both offline models, then profile a prompt and a greedy
/// generation on each, printing the tables and the timings.
pub fn demo(prompt: &str, generate: usize, out: &mut impl Write) -> Result<()> {
    let w = |out: &mut dyn Write, s: String| -> Result<()> {
        writeln!(out, "{s}").map_err(|e| Error::io("<stdout>", e))
    };
    for model in fetch::OFFLINE_MODELS {
        let t0 = Instant::now();
        let path = fetch::fetch_model(&model)?;
        let mut profiler = Profiler::new(
            load(&ModelSource::Gguf(path.clone()), &LoadOptions::cpu())?,
            StatSpec {
                alphas: vec![0.5, 2.0, f64::INFINITY],
                ..Default::default()
            },
        )?;
        let loaded = t0.elapsed();
        let bar = progress_bar(generate as u64, profiler.model.info().name.as_str());
        let t1 = Instant::now();
        let req = ProfileRequest::new(prompt).generate(generate);
        let profile = profiler.run_with_progress(&req, Some(&bar))?;
        bar.finish_and_clear();
        let ran = t1.elapsed();
        w(out, render_table(&profile))?;
        w(
            out,
            format!(
                "{}: load {:.1} s, {} tokens with lens statistics at all {} layers in {:.2} s ({:.1} tokens/s)\n",
                path.display(),
                loaded.as_secs_f64(),
                profile.generated_ids.len(),
                profile.n_blocks,
                ran.as_secs_f64(),
                profile.generated_ids.len() as f64 / ran.as_secs_f64().max(1e-9)
            ),
        )?;
    }
    Ok(())
}
