//! The scripts that check a rerun of `scripts/results.sh` against the page
//! (`scripts/results-rerun.py`, which uses `scripts/results-diff.py`) and print it
//! (`scripts/results-tables.py`), run by python3 on copies of the committed results: an untouched
//! step is identical, an edited value, a different lens file and a missing folder are each
//! reported as what they are, an unfinished step is not compared, and the exit status says whether
//! the rerun reproduced the page. Then the rerun tables the page shows are the ones the script
//! prints from `docs/results/rerun-*/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SMOL: &str = "SmolLM2-135M-Instruct.Q4_1";

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
}

fn python(args: &[&Path]) -> Output {
    Command::new("python3")
        .args(args)
        .current_dir(root())
        .output()
        .expect("python3 runs (the results scripts need only its standard library)")
}

/// `scripts/results-rerun.py RUNS OUT --page docs/results` (the committed results).
fn rerun(runs: &Path, out: &Path) -> Output {
    python(&[
        Path::new("scripts/results-rerun.py"),
        runs,
        out,
        Path::new("--page"),
        &root().join("docs/results"),
    ])
}

/// Copies the committed files of one step (`docs/results/<rel>`) into `runs/<rel>`.
fn copy_step(runs: &Path, rel: &str) -> PathBuf {
    let from = root().join("docs/results").join(rel);
    let to = runs.join(rel);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
    to
}

/// `text` with its one occurrence of `from` replaced (fails if there is not exactly one).
fn edit_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?} once in the file");
    text.replacen(from, to, 1)
}

#[test]
fn results_rerun_tells_identical_moved_different_and_missing_files_apart() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let out = dir.path().join("out");
    let validate = format!("validate-{SMOL}");
    let tasks = format!("tasks-{SMOL}");
    let mmlu = format!("mmlu-{SMOL}");
    let lens = format!("lens-{SMOL}");

    // Untouched: both files identical.
    copy_step(&runs, &validate);
    // One headline value and one value inside a list edited.
    let family = copy_step(&runs, "family").join("result.json");
    let text = std::fs::read_to_string(&family).unwrap();
    let text = edit_once(
        &text,
        "\"f1_family_mean\": 1.0,",
        "\"f1_family_mean\": 0.5,",
    );
    let text = edit_once(&text, "\"n_layers\": 30,", "\"n_layers\": 31,");
    std::fs::write(&family, text).unwrap();
    // A lens whose weights are not the committed ones (compared by the committed sha256).
    let lens_dir = copy_step(&runs, &format!("lenses/{SMOL}"));
    std::fs::remove_file(lens_dir.join("params.pt.sha256")).unwrap();
    std::fs::write(lens_dir.join("params.pt"), b"not the committed lens").unwrap();
    // `tasks` stopped before its `done` (not compared); `mmlu` done but its folder is gone.
    copy_step(&runs, &tasks);
    std::fs::write(
        runs.join("timings.tsv"),
        format!(
            "{validate}\t83\t2026-12-04T13:55:08Z\tdone\n\
             {tasks}\t10\t2026-12-04T13:55:18Z\tinterrupted\n\
             family\t149\t2026-12-04T13:57:47Z\tdone\n\
             {validate}\t1\t2026-12-04T13:57:48Z\tdone\n\
             {lens}\t900\t2026-12-04T14:12:48Z\tdone\n\
             {mmlu}\t275\t2026-12-04T14:17:23Z\tdone\n"
        ),
    )
    .unwrap();
    std::fs::write(
        runs.join("binaries.tsv"),
        "2026-12-04T13:53:45Z\tabc1234\t0123\n",
    )
    .unwrap();

    let run = rerun(&runs, &out);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(1),
        "files differ, so the exit status is 1: {stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let identical = std::fs::read_to_string(out.join("identical.tsv")).unwrap();
    let lines: Vec<Vec<&str>> = identical.lines().map(|l| l.split('\t').collect()).collect();
    // One line per finished step, in the order they first finished; `tasks` never finished.
    let steps: Vec<&str> = lines.iter().map(|l| l[0]).collect();
    assert_eq!(
        steps,
        [validate.as_str(), "family", &lens, &mmlu],
        "{identical}"
    );
    assert_eq!(lines[0][1..], ["2", "2", ""], "{identical}");
    assert_eq!(lines[1][1..3], ["2", "1"], "{identical}");
    let how = lines[1][3];
    assert!(
        how.starts_with("family/result.json (2 of ")
            && how.ends_with(
                " values moved, by at most 1; headline values (outside lists) moved: f1_family_mean)"
            ),
        "{how}"
    );
    assert_eq!(
        lines[2][2],
        (lines[2][1].parse::<usize>().unwrap() - 1).to_string()
    );
    assert_eq!(
        lines[2][3],
        format!("lenses/{SMOL}/params.pt.sha256 (differs)")
    );
    assert_eq!(
        lines[3][1..],
        [
            "2",
            "0",
            &format!("{mmlu}/config.json (missing); {mmlu}/result.json (missing)")
        ]
    );
    // results-diff.py, which results-rerun.py builds on, says the same of the run folders in both.
    let total: usize = how["family/result.json (2 of ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let diff = python(&[
        Path::new("scripts/results-diff.py"),
        &root().join("docs/results"),
        &runs,
    ]);
    assert!(diff.status.success(), "{diff:?}");
    let diff = String::from_utf8(diff.stdout).unwrap();
    let expected = format!(
        "family\n  {} of {total} values identical\n    f1_family_mean: 1 -> 0.5 (change -0.5)\n  \
         1 numbers in lists moved, by at most 1:\n    models[0].n_layers: 30 -> 31\n",
        total - 2
    );
    assert!(diff.starts_with(&expected), "{diff}");
    for step in [&tasks, &validate] {
        let block = diff.split(&format!("{step}\n")).nth(1).unwrap();
        let counts: Vec<&str> = block.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(counts[0], counts[2], "{step} unchanged: {block}");
    }
    // The rerun's own records travel with the comparison.
    for name in ["timings.tsv", "binaries.tsv"] {
        assert_eq!(
            std::fs::read(out.join(name)).unwrap(),
            std::fs::read(runs.join(name)).unwrap(),
            "{name}"
        );
    }

    // Only the untouched step: the rerun reproduces the page, exit 0.
    std::fs::write(
        runs.join("timings.tsv"),
        format!("{validate}\t83\t2026-12-04T13:55:08Z\tdone\n"),
    )
    .unwrap();
    let run = rerun(&runs, &out);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    assert_eq!(
        std::fs::read_to_string(out.join("identical.tsv")).unwrap(),
        format!("{validate}\t2\t2\t\n")
    );

    // Not a RUNS_DIR: a message, no traceback.
    let run = python(&[Path::new("scripts/results-rerun.py"), dir.path(), &out]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("timings.tsv not found") && !stderr.contains("Traceback"),
        "{stderr}"
    );
}

#[test]
fn the_pages_show_the_rerun_tables_the_script_prints() {
    let read = |page: &str| std::fs::read_to_string(root().join(page)).unwrap();
    let (paper, tuned) = (read("docs/results.md"), read("docs/results-tuned-lens.md"));
    let run = python(&[Path::new("scripts/results-tables.py")]);
    assert!(run.status.success(), "{run:?}");
    let printed = String::from_utf8(run.stdout).unwrap();
    let mut sections = 0;
    let mut rows = 0;
    for section in printed.split("\n## ").filter(|s| s.starts_with("rerun-")) {
        sections += 1;
        // Each script's steps on its own page: the header names the script.
        let header = section.lines().next().unwrap_or_default();
        let (name, page) = if header.contains("scripts/results-tuned-lens.sh") {
            ("docs/results-tuned-lens.md", &tuned)
        } else {
            assert!(header.contains("scripts/results.sh"), "{header}");
            ("docs/results.md", &paper)
        };
        for row in section.lines().filter(|l| l.starts_with("| ")) {
            rows += 1;
            assert!(
                page.contains(row),
                "{name} lacks this row of `python3 scripts/results-tables.py`:\n{row}"
            );
        }
    }
    let folders = std::fs::read_dir(root().join("docs/results"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("rerun-")
        })
        .count();
    // One table per script per docs/results/rerun-*/ (the committed rerun ran both scripts).
    assert_eq!(
        sections,
        2 * folders,
        "two tables per docs/results/rerun-*/"
    );
    assert!(rows > 4 * folders, "{rows} rows");
}
