//! The guides stay true to the code: docs/experiments.md lists every registered experiment, its
//! "Adding an experiment" example is `examples/final_entropy.rs` verbatim and runs through the
//! machinery (run, resume, finish) on the offline model, the README shows a command for every
//! experiment, and CONTRIBUTING.md's "Adding a family" shows the Mistral family file as it is.

mod common;

#[allow(dead_code)]
#[path = "../examples/final_entropy.rs"]
mod final_entropy;

use std::path::PathBuf;

use entropy_lens::experiments::{self, finish_with, run_with, Plan, RunOptions};
use final_entropy::{FinalEntropy, FinalEntropyResult};

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
}

fn text(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The body of the first fenced code block after `heading`.
fn code_block_after(doc: &str, heading: &str) -> String {
    let at = doc
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?}"));
    let rest = &doc[at..];
    let open = rest.find("```").expect("a code block");
    let body_start = open + rest[open..].find('\n').expect("fence line") + 1;
    let close = rest[body_start..].find("\n```").expect("closing fence");
    rest[body_start..body_start + close + 1].to_string()
}

#[test]
fn the_experiments_guide_lists_every_registered_experiment() {
    let doc = text("docs/experiments.md");
    let table = &doc[..doc.find("## Flags").unwrap()];
    for kind in experiments::kinds() {
        assert!(
            table.contains(&format!("| `{}` |", kind.name())),
            "docs/experiments.md does not list {kind}"
        );
    }
    let readme = text("README.md");
    for kind in experiments::kinds() {
        assert!(
            readme.contains(&format!("entropy-lens experiment {}", kind.name())),
            "README.md does not show {kind}"
        );
    }
}

#[test]
fn the_adding_an_experiment_example_is_the_example_file_and_runs() {
    let doc = text("docs/experiments.md");
    assert_eq!(
        code_block_after(&doc, "## Adding an experiment"),
        text("examples/final_entropy.rs"),
        "docs/experiments.md's example differs from examples/final_entropy.rs"
    );
    let tmp = tempfile::tempdir().unwrap();
    let model = common::smollm2();
    let plan = Plan::new(FinalEntropy).model(model.to_str().unwrap()).n(2);
    let opts = RunOptions {
        out: Some(tmp.path().to_path_buf()),
        progress: experiments::ProgressMode::Hidden,
        ..Default::default()
    };
    let run = run_with::<FinalEntropy>(&plan, &opts).unwrap();
    assert_eq!((run.ran, run.resumed), (6, 0));
    let outcome = run.outcome.unwrap();
    let result: &FinalEntropyResult = outcome.result().unwrap();
    // The mean is the one the records give.
    let records = experiments::OutputDir::open(tmp.path())
        .unwrap()
        .read_records()
        .unwrap();
    let poems: Vec<f64> = records
        .iter()
        .filter(|r| r.label == "poem")
        .map(|r| *r.profile.positions[0].shannon.last().unwrap())
        .collect();
    let (name, mean) = &result.by_format[0];
    assert_eq!(name, "poem");
    assert!((mean - poems.iter().sum::<f64>() / 2.0).abs() < 1e-12);
    assert!(outcome.to_string().contains("Entropy after the last block"));
    // A second run finds every item done; finishing again gives the same bytes.
    let again = run_with::<FinalEntropy>(&plan, &opts).unwrap();
    assert_eq!((again.ran, again.resumed), (0, 6));
    let before = std::fs::read(tmp.path().join("result.json")).unwrap();
    finish_with::<FinalEntropy>(tmp.path()).unwrap();
    assert_eq!(
        std::fs::read(tmp.path().join("result.json")).unwrap(),
        before
    );
    // Not registered: the name-based entry points say so.
    let err = experiments::finish(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("unknown experiment `final-entropy`"), "{err}");
}

#[test]
fn the_contributing_family_example_is_the_mistral_file() {
    let guide = text("CONTRIBUTING.md");
    let shown = code_block_after(&guide, "## Adding a family");
    let file = text("src/model/families/mistral.rs");
    let from = file.find("pub(crate) const FAMILY").unwrap();
    assert_eq!(
        shown,
        &file[from..],
        "CONTRIBUTING.md's family example differs from mistral.rs"
    );
}

/// The cluster recipes in docs/experiments.md are the scripts `scripts/slurm-check.sh` runs.
#[test]
fn the_cluster_recipes_are_the_checked_scripts() {
    let doc = text("docs/experiments.md");
    for script in [
        "scripts/slurm/shards.sbatch",
        "scripts/slurm/merge.sbatch",
        "scripts/shards-local.sh",
    ] {
        let body = text(script);
        assert!(
            doc.contains(&format!("```bash\n{body}```")),
            "docs/experiments.md does not show {script} as it is"
        );
    }
    let check = text("scripts/slurm-check.sh");
    assert!(check.contains("scripts/slurm/submit.sh") && check.contains("scripts/shards-local.sh"));
    let submit = text("scripts/slurm/submit.sh");
    assert!(
        submit.contains("shards.sbatch") && submit.contains("--dependency=\"afterok:$shards\"")
    );
}
