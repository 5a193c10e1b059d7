//! MMLU data on the real files: `data/mmlu/` (JSON Lines; counts from data/README.md),
//! the dev split as the Hub stores `cais/mmlu` (Parquet, `tests/fixtures/mmlu/`, made by the
//! committed script from the same JSON Lines), and the Hub-cache path offline.

use std::collections::BTreeMap;
use std::path::PathBuf;

use entropy_lens::data::mmlu_questions::{self as mmlu, PromptStyle};

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
}

fn mmlu_dir() -> PathBuf {
    root().join("data/mmlu")
}

#[test]
fn the_test_split_has_the_official_counts() {
    let qs = mmlu::load(&mmlu_dir().join("test.jsonl")).unwrap();
    assert_eq!(qs.len(), 14_042);
    let mut per_subject: BTreeMap<&str, usize> = BTreeMap::new();
    let mut answers = [0usize; 4];
    for q in &qs {
        *per_subject.entry(q.subject.as_str()).or_default() += 1;
        answers[q.answer] += 1;
    }
    assert_eq!(per_subject.len(), 57);
    assert_eq!(per_subject["professional_law"], 1534);
    assert_eq!(per_subject["abstract_algebra"], 100);
    assert_eq!(answers, [3222, 3462, 3582, 3776]);
    // A folder holding test.jsonl loads the same.
    assert_eq!(mmlu::load(&mmlu_dir()).unwrap(), qs);
    // Ids are per subject, in file order.
    assert_eq!(qs[0].id, "abstract_algebra/0");
    assert_eq!(qs[99].id, "abstract_algebra/99");

    // A subject-stratified sample: proportional, seeded, every subject of size ≥ 1 / n present.
    let sample = mmlu::stratified_sample(&qs, 570, 42).unwrap();
    assert_eq!(sample.len(), 570);
    assert_eq!(sample, mmlu::stratified_sample(&qs, 570, 42).unwrap());
    let law = sample
        .iter()
        .filter(|q| q.subject == "professional_law")
        .count();
    assert!((62..=63).contains(&law), "{law}"); // 570 × 1534 / 14042 = 62.3
    let subjects: std::collections::BTreeSet<&str> =
        sample.iter().map(|q| q.subject.as_str()).collect();
    assert_eq!(subjects.len(), 57);

    let text = PromptStyle::Instruct.prompt(&qs[0]);
    assert!(text.starts_with(
        "The following is a multiple-choice question about abstract algebra. Reply only with the correct option. Question: "
    ));
    assert!(text.ends_with(" Answer:") && text.contains(" Choices: A. "));
}

#[test]
fn parquet_as_the_hub_stores_it_matches_the_jsonl_and_loads_from_the_hub_cache() {
    let jsonl = mmlu::load(&mmlu_dir().join("dev.jsonl")).unwrap();
    assert_eq!(jsonl.len(), 285);
    let parquet_file = root().join("tests/fixtures/mmlu/dev-00000-of-00001.parquet");
    assert_eq!(mmlu::load(&parquet_file).unwrap(), jsonl);

    // The Hub cache layout of a dataset repository, read offline.
    let home = tempfile::tempdir().unwrap();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let repo = home.path().join("hub/datasets--cais--mmlu");
    let snap = repo.join("snapshots").join(commit).join("all");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    std::fs::copy(&parquet_file, snap.join(mmlu::hub_file("dev"))).unwrap();
    std::env::set_var("HF_HOME", home.path());
    std::env::set_var("HF_HUB_OFFLINE", "1");
    let from_hub = mmlu::load_from_hub("dev");
    let missing = mmlu::load_from_hub("test").unwrap_err().to_string();
    std::env::remove_var("HF_HOME");
    std::env::remove_var("HF_HUB_OFFLINE");
    assert_eq!(from_hub.unwrap(), jsonl);
    assert!(
        missing.contains("HF_HUB_OFFLINE") && missing.contains("--data"),
        "{missing}"
    );
}

#[test]
fn bad_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let e = mmlu::load(&dir.path().join("nope.jsonl"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not found") && e.contains("--data"), "{e}");
    let e = mmlu::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("test.jsonl"), "{e}");
    let not_parquet = dir.path().join("x.parquet");
    std::fs::write(&not_parquet, b"not a parquet file").unwrap();
    let e = mmlu::load(&not_parquet).unwrap_err().to_string();
    assert!(e.contains("x.parquet"), "{e}");
}
