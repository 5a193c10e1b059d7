//! What `cargo package` would upload stays under crates.io's 10 MB limit: the package's file list
//! (Cargo.toml's `include`) is read from cargo itself and its files' sizes are summed, uncompressed
//! (the upload is compressed, so this is the stricter check). The list must hold what the library
//! embeds at compile time and nothing of the repository's bulk (reports, results, test fixtures).

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_crate_package_is_under_the_registry_limit_and_holds_what_the_build_needs() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["package", "--list", "--allow-dirty", "--offline"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8(out.stdout).unwrap();
    let files: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    let mut total = 0u64;
    for f in &files {
        // Files cargo writes itself (the normalised manifest, VCS info) are not in the tree.
        if let Ok(meta) = std::fs::metadata(root.join(f)) {
            total += meta.len();
        }
    }
    println!(
        "{} files, {:.2} MB uncompressed",
        files.len(),
        total as f64 / 1e6
    );
    assert!(total < 10_000_000, "{total} bytes: {files:?}");
    for needed in [
        "src/lib.rs",
        "src/bin/entropy-lens.rs",
        "README.md",
        "vendor/plotly.js-dist-min/plotly.min.js",
        "data/topics.txt",
        "data/tinystories_valid_sample.jsonl",
        "data/mmlu_test_sample.jsonl",
        "src/explore/assets/app.js",
        "examples/quickstart.rs",
    ] {
        assert!(files.contains(&needed), "{needed} missing from {files:?}");
    }
    for f in &files {
        assert!(
            !["reports/", "docs/", "tests/", "notebooks/", "benches/"]
                .iter()
                .any(|d| f.starts_with(d)),
            "{f} should not be packaged"
        );
    }
}
