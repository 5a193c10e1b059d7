//! The logit lens's held-out reading is kept in the cache folder (`heldout/<key>.json`) and reused
//! by the next lens trained on the same windows: a second fit reports the cached values (planted
//! ones, to prove it), a corrupt cache file is read again from the model, and other windows get
//! their own entry. Its own test binary: it points `ENTROPY_LENS_CACHE` at a scratch folder.

mod common;

use entropy_lens::lens::heldout::HeldOutKl;
use entropy_lens::lens::shortcut::{train_shortcut, ShortcutOptions};
use entropy_lens::lens::trainer::read_text;
use entropy_lens::model::{load, LoadOptions, ModelSource};

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(1.0))
}

#[test]
fn the_logit_lens_reading_is_cached_and_reused() {
    // The model's path first: the models folder moves with the cache folder.
    let model_path = common::smollm2();
    let cache = tempfile::tempdir().unwrap();
    // SAFETY: this test binary has a single test; nothing else reads the environment meanwhile.
    unsafe { std::env::set_var("ENTROPY_LENS_CACHE", cache.path()) };
    let loaded = load(&ModelSource::Gguf(model_path), &LoadOptions::cpu()).unwrap();
    let (mut model, tokenizer) = (loaded.model, loaded.tokenizer);
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let text: String = read_text(&root.join("data/tinystories/valid.jsonl"))
        .unwrap()
        .chars()
        .take(20_000)
        .collect();
    let opts = ShortcutOptions {
        tokens: 512,
        seq_len: 64,
        holdout_tokens: 256,
        ..Default::default()
    };
    let out = tempfile::tempdir().unwrap();
    let mut fit = |opts: &ShortcutOptions| {
        train_shortcut(
            &mut model,
            &tokenizer,
            &text,
            opts,
            out.path(),
            &mut |_| {},
            None,
        )
        .unwrap()
    };
    let first = fit(&opts);
    let dir = cache.path().join("heldout");
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let cached: HeldOutKl =
        serde_json::from_str(&std::fs::read_to_string(&entries[0]).unwrap()).unwrap();
    assert_eq!(cached.by_window, first.kl_logit_by_window);
    assert_eq!(cached.by_window.len(), 4);
    // Planted values come back: the second fit read the cache, not the model.
    let planted = HeldOutKl {
        by_window: cached
            .by_window
            .iter()
            .map(|w| w.iter().map(|x| x + 1.0).collect())
            .collect(),
    };
    std::fs::write(&entries[0], serde_json::to_vec(&planted).unwrap()).unwrap();
    let second = fit(&opts);
    assert_eq!(second.kl_logit_by_window, planted.by_window);
    // The fit itself is read from the model again: equal up to the order of parallel sums.
    assert!(close(&second.kl_tuned, &first.kl_tuned));
    // A corrupt entry is read again from the model (and rewritten).
    std::fs::write(&entries[0], b"{ not json").unwrap();
    let third = fit(&opts);
    assert!(close(&third.kl_logit, &first.kl_logit));
    assert_ne!(third.kl_logit_by_window, planted.by_window);
    // Other windows, another entry.
    fit(&ShortcutOptions {
        holdout_tokens: 128,
        ..opts.clone()
    });
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
}
