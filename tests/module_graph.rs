//! The crate imports one way, read from the source files so that it holds for code that does not
//! exist yet:
//!
//! - across `src/`: no top-level module (`model`, `lens`, `experiments`, …) reaches one that reaches
//!   it back, and no module outside `src/cli/` and `src/bin/` imports `crate::cli` (the library
//!   logs through the `log` facade; the binary decides where lines go);
//! - inside `src/experiments/`: no module reaches a module that reaches it back (through `use`
//!   lines or inline paths), and `mod.rs` — the registry and the public face — is imported by none
//!   of them: a new experiment that imports the registry fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn folder() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("src/experiments")
}

/// Module name → source text (`mod` for mod.rs).
fn modules() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(folder()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            out.insert(name, std::fs::read_to_string(&p).unwrap());
        }
    }
    out
}

/// Every path segment that follows `prefix` in `text` (`super::store::Record` → `store`), and the
/// names inside a braced group right after it (`super::{store, plan::Plan}` → `store`, `plan`).
fn targets(text: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        // Not the tail of a longer path (`super::super::x` counts from its last `super::`).
        let after = &rest[i + prefix.len()..];
        rest = after;
        if after.starts_with("super::") {
            continue;
        }
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let head: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !head.is_empty() {
                    out.push(head);
                }
            }
        } else {
            let head: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !head.is_empty() {
                out.push(head);
            }
        }
    }
    out
}

/// Module → the modules of the folder it imports (`mod` when it names an item of mod.rs).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let mut g = BTreeMap::new();
    for (name, text) in &mods {
        let mut edges = BTreeSet::new();
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut found = Vec::new();
        if name == "mod" {
            found.extend(targets(&code, "pub use "));
            found.extend(targets(&code, "\nuse "));
        } else {
            found.extend(targets(&code, "super::"));
        }
        found.extend(targets(&code, "crate::experiments::"));
        for t in found {
            if t == "self" || t == "super" {
                continue;
            }
            if mods.contains_key(&t) && t != "mod" {
                if &t != name {
                    edges.insert(t);
                }
            } else if name != "mod"
                && t.chars()
                    .next()
                    .is_some_and(|c| c.is_uppercase() || c.is_lowercase())
            {
                // An item of mod.rs (a re-export or the registry).
                edges.insert("mod".to_string());
            }
        }
        g.insert(name.clone(), edges);
    }
    g
}

fn cycle_from(
    g: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(i) = path.iter().position(|p| p == node) {
        let mut c = path[i..].to_vec();
        c.push(node.to_string());
        return Some(c);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_string());
    for next in g.get(node).into_iter().flatten() {
        if let Some(c) = cycle_from(g, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node.to_string());
    None
}

#[test]
fn no_module_of_the_experiments_folder_imports_one_that_imports_it_back() {
    let g = graph();
    assert!(g.len() >= 20, "{g:?}");
    // The parser sees the imports it should.
    assert!(
        g["tasks"].contains("experiment") && g["tasks"].contains("store"),
        "{g:?}"
    );
    assert!(
        g["mod"].contains("run") && g["mod"].contains("entry"),
        "{g:?}"
    );
    for (m, edges) in &g {
        assert!(
            m == "mod" || !edges.contains("mod"),
            "{m}.rs imports from mod.rs (the registry); import the sibling module instead"
        );
    }
    let mut done = BTreeSet::new();
    for node in g.keys() {
        if let Some(c) = cycle_from(&g, node, &mut Vec::new(), &mut done) {
            panic!("import cycle: {}", c.join(" → "));
        }
    }
}

#[test]
fn the_parser_finds_cycles() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".to_string()].into());
    g.insert("b".into(), ["a".to_string()].into());
    assert!(cycle_from(&g, "a", &mut Vec::new(), &mut BTreeSet::new()).is_some());
    assert_eq!(
        targets(
            "use super::{store::Record, plan};\nlet x = super::run::f();",
            "super::"
        ),
        ["store", "plan", "run"]
    );
}

/// Source text without comment lines (doc links such as `[`crate::lens::Lens`]` are not imports).
fn code_of(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Top-level module of `src/` → the top-level modules it names through `crate::` paths.
fn crate_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = folder().parent().unwrap().to_path_buf();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let tops: BTreeSet<String> = files
        .iter()
        .map(|f| top_module(&src, f))
        .filter(|t| t != "lib")
        .collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let top = top_module(&src, f);
        if top == "lib" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        let edges = g.entry(top.clone()).or_default();
        for t in targets(&code, "crate::") {
            if t != top && tops.contains(&t) {
                edges.insert(t);
            }
        }
    }
    g
}

/// `src/model/load.rs` → `model`; `src/fetch.rs` → `fetch`; `src/bin/x.rs` → `bin`.
fn top_module(src: &std::path::Path, file: &std::path::Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn no_module_below_the_command_line_imports_it_and_the_crate_has_no_import_cycle() {
    let g = crate_graph();
    // The parser sees the imports it should: the runner uses the model and the lens, the
    // command line the experiments.
    assert!(
        g["runner"].contains("model") && g["runner"].contains("lens"),
        "{g:?}"
    );
    assert!(g["cli"].contains("experiments"), "{g:?}");
    for (m, edges) in &g {
        assert!(
            m == "cli" || m == "bin" || !edges.contains("cli"),
            "src/{m} imports crate::cli; log through the `log` facade (see src/logging.rs) instead"
        );
    }
    assert!(
        !g["model"].contains("fetch"),
        "src/model imports crate::fetch; pass the path or the digest down (crate::cache is below both)"
    );
    let mut done = BTreeSet::new();
    for node in g.keys() {
        if let Some(c) = cycle_from(&g, node, &mut Vec::new(), &mut done) {
            panic!("import cycle across src/: {}", c.join(" → "));
        }
    }
}
