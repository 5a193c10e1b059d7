//! The repository stands alone: the data files `data/README.md` lists are here with the sizes and
//! sha256 it states, and no file of the repository points into a folder beside it (a user's
//! clone has nothing there).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
}

#[test]
fn data_files_have_the_sizes_and_digests_the_readme_states() {
    let readme = std::fs::read_to_string(root().join("data/README.md")).unwrap();
    let mut checked = 0;
    for line in readme.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (file, bytes, sha) = (
            cells[1].trim_matches('`'),
            cells[4].replace(',', ""),
            cells[5].trim_matches('`'),
        );
        let data = std::fs::read(root().join("data").join(file))
            .unwrap_or_else(|e| panic!("data/{file}: {e}"));
        assert_eq!(data.len().to_string(), bytes, "data/{file}: size");
        assert_eq!(
            format!("{:x}", Sha256::digest(&data)),
            sha,
            "data/{file}: sha256"
        );
        let lines = std::str::from_utf8(&data).unwrap().lines().count();
        let records = cells[3].replace(',', "");
        assert_eq!(lines.to_string(), records, "data/{file}: records");
        checked += 1;
    }
    assert!(checked >= 6, "{checked} files listed");
}

/// Every text file of the repository (what a clone has), without build outputs and runs.
fn repository_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if ![".git", "target", "runs"].contains(&name.as_str()) {
                repository_files(&p, out);
            }
        } else if [
            "rs", "md", "sh", "py", "ipynb", "toml", "yml", "txt", "json", "html",
        ]
        .iter()
        .any(|x| name.ends_with(&format!(".{x}")))
        {
            out.push(p);
        }
    }
}

#[test]
fn no_file_points_outside_the_repository() {
    // Built at run time, so this file does not match itself.
    let needle = format!("..{}shared", '/');
    let mut files = Vec::new();
    repository_files(&root(), &mut files);
    assert!(files.len() > 100, "{} files", files.len());
    let offenders: Vec<String> = files
        .iter()
        .filter(|p| {
            std::fs::read(p)
                .map(|b| String::from_utf8_lossy(&b).contains(&needle))
                .unwrap_or(false)
        })
        .map(|p| p.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these files refer to {needle}, which a clone does not have: {offenders:?}"
    );
}
