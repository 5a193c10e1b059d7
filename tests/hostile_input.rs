//! Inputs a hostile or careless user gives (issue 10's list): each must end in a clear `error:`
//! with exit code 1, or in a correct answer; never a panic (101), an abort (134) or a wrong number.

mod common;

use common::OutputBounded;

use common::{fails_with, run};

use std::process::Command;

use serde_json::Value;

fn smollm2() -> String {
    common::smollm2().to_string_lossy().into_owned()
}

/// The tiny GPT-2 of the family fixtures (384-token vocabulary, 3 blocks, context 128).
fn tiny() -> String {
    std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap())
        .join("tests/fixtures/families/gpt2")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn classify_with_zero_neighbours_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let feats = dir.path().join("f.csv");
    let labels = dir.path().join("y.txt");
    std::fs::write(
        &feats,
        (0..40)
            .map(|i| format!("{},{}\n", i % 7, i % 5))
            .collect::<String>(),
    )
    .unwrap();
    std::fs::write(
        &labels,
        (0..40)
            .map(|i| if i % 2 == 0 { "a\n" } else { "b\n" })
            .collect::<String>(),
    )
    .unwrap();
    for search in ["brute", "kd_tree"] {
        fails_with(
            &[
                "classify",
                "--features",
                feats.to_str().unwrap(),
                "--labels",
                labels.to_str().unwrap(),
                "--k",
                "0",
                "--search",
                search,
            ],
            "k must be at least 1",
        );
    }
}

#[test]
fn huge_generate_is_a_context_error_not_an_overflow() {
    let model = tiny();
    for n in ["18446744073709551615", "9223372036854775807"] {
        fails_with(
            &[
                "profile",
                "--model",
                &model,
                "--prompt",
                "x",
                "--generate",
                n,
            ],
            "context length",
        );
    }
}

#[test]
fn top_k_beyond_the_vocabulary_is_the_vocabulary() {
    let out = run(&[
        "profile",
        "--model",
        &tiny(),
        "--prompt",
        "Hello",
        "--top-k",
        "1000000000000",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let top = v["positions"][0]["top_k"][0].as_array().unwrap();
    assert_eq!(top.len(), 384, "the whole vocabulary");
}

#[test]
fn enormous_alpha_converges_to_min_entropy() {
    let out = run(&[
        "profile",
        "--model",
        &tiny(),
        "--prompt",
        "Hello",
        "--alpha",
        "1e308",
        "--alpha",
        "inf",
        "--alpha",
        "1e30",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let renyi = &v["positions"][0]["renyi"];
    let inf = common::f64s(&renyi["inf"]);
    for alpha in [1e308, 1e30] {
        let key = entropy_lens::lens::alpha_key(alpha);
        let big = common::f64s(&renyi[key.as_str()]);
        assert_eq!(big.len(), inf.len(), "{key}: {renyi}");
        for (a, b) in big.iter().zip(&inf) {
            assert!(
                a.is_finite() && (a - b).abs() < 1e-6,
                "{key}: {a} vs H_inf {b}"
            );
            assert!(*b > 0.0);
        }
    }
}

#[test]
fn export_refuses_more_shards_than_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hf");
    fails_with(
        &[
            "export-hf",
            "--model",
            &smollm2(),
            "--out",
            out.to_str().unwrap(),
            "--shards",
            "1000000000",
        ],
        "at most one shard per tensor",
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn prompts_files_with_a_bom_load_and_arrays_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bom = dir.path().join("bom.jsonl");
    std::fs::write(&bom, "\u{feff}{\"prompt\": \"Hello\"}\n").unwrap();
    let out = run(&[
        "profile",
        "--model",
        &tiny(),
        "--prompts",
        bom.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let array = dir.path().join("array.jsonl");
    std::fs::write(&array, "[\"array\"]\n").unwrap();
    fails_with(
        &[
            "profile",
            "--model",
            &tiny(),
            "--prompts",
            array.to_str().unwrap(),
        ],
        "expected a JSON object",
    );
}

/// A GGUF v3 file with no tensors and the given metadata (key, value type, value bytes).
fn gguf_bytes(kvs: &[(&str, u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend((kvs.len() as u64).to_le_bytes());
    for (k, t, v) in kvs {
        b.extend((k.len() as u64).to_le_bytes());
        b.extend(k.as_bytes());
        b.extend(t.to_le_bytes());
        b.extend(v);
    }
    b
}

fn gguf_string(s: &str) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend(s.as_bytes());
    v
}

#[test]
fn gguf_alignment_zero_and_lying_lengths_are_corrupt_files_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let arch = ("general.architecture", 8, gguf_string("llama"));
    // An array of strings before the alignment: the walk has to step over it.
    let mut vocab = 8u32.to_le_bytes().to_vec();
    vocab.extend(2u64.to_le_bytes());
    vocab.extend(gguf_string("a"));
    vocab.extend(gguf_string("bc"));
    let tokens = ("tokenizer.ggml.tokens", 9, vocab);
    for (name, t, value, needle) in [
        (
            "u32-zero",
            4u32,
            0u32.to_le_bytes().to_vec(),
            "general.alignment is 0",
        ),
        ("u8-zero", 0, vec![0u8], "general.alignment is 0"),
        (
            "i32-odd",
            5,
            12i32.to_le_bytes().to_vec(),
            "general.alignment is 12",
        ),
    ] {
        let path = dir.path().join(format!("{name}.gguf"));
        let kvs = [
            arch.clone(),
            tokens.clone(),
            ("general.alignment", t, value),
        ];
        std::fs::write(&path, gguf_bytes(&kvs)).unwrap();
        let p = path.to_str().unwrap();
        fails_with(&["profile", "--model", p, "--prompt", "a"], needle);
        let out = dir.path().join(format!("{name}-hf"));
        fails_with(
            &["export-hf", "--model", p, "--out", out.to_str().unwrap()],
            needle,
        );
    }
    // A string that claims more bytes than the file has.
    let mut lying = gguf_bytes(std::slice::from_ref(&arch));
    let at = 4 + 4 + 8 + 8 + 8 + "general.architecture".len() + 4;
    lying[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let path = dir.path().join("lying.gguf");
    std::fs::write(&path, lying).unwrap();
    fails_with(
        &[
            "profile",
            "--model",
            path.to_str().unwrap(),
            "--prompt",
            "a",
        ],
        "corrupt",
    );
    // A valid alignment passes the check and fails later, for what is really missing.
    let path = dir.path().join("ok.gguf");
    let kvs = [arch, ("general.alignment", 4, 32u32.to_le_bytes().to_vec())];
    std::fs::write(&path, gguf_bytes(&kvs)).unwrap();
    let out = run(&[
        "profile",
        "--model",
        path.to_str().unwrap(),
        "--prompt",
        "a",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        !stderr.contains("alignment") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[test]
fn an_empty_prompt_without_bos_is_refused_not_run_on_bos() {
    fails_with(
        &["profile", "--model", &tiny(), "--prompt", "", "--no-bos"],
        "--no-bos",
    );
    // With BOS the empty prompt runs on BOS alone, as documented.
    let out = run(&["profile", "--model", &tiny(), "--prompt", "", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn escape_codes_in_a_model_name_are_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let evil = dir.path().join("evil\u{1b}[2J\u{7}model");
    std::fs::create_dir(&evil).unwrap();
    for e in std::fs::read_dir(tiny()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), evil.join(e.file_name())).unwrap();
    }
    let out = run(&[
        "profile",
        "--model",
        evil.to_str().unwrap(),
        "--prompt",
        "Hi",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    assert!(stdout.contains("evil\\u{1b}[2J\\u{7}model"), "{stdout}");
    // Errors that quote a path are escaped too.
    let missing = dir.path().join("gone\u{1b}[31m.gguf");
    let out = run(&[
        "profile",
        "--model",
        missing.to_str().unwrap(),
        "--prompt",
        "Hi",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}') && stderr.contains("gone\\u{1b}[31m"),
        "{stderr:?}"
    );
}

#[test]
fn an_unwritable_stderr_or_a_closed_stdout_is_exit_1_not_a_panic_or_lost_output() {
    // stderr to /dev/full: the error cannot be printed, the exit code still says it.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(common::cli())
        .args(["profile", "--model", "/nonexistent.gguf", "--prompt", "a"])
        .stderr(full)
        .output_bounded()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // A closed stdout (`>&-`): the results would be lost, so it is refused.
    let out = Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" profile --model \"$1\" --prompt Hi >&-")
        .arg(common::cli())
        .arg(tiny())
        .output_bounded()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("standard output is closed"), "{stderr}");
    // Discarding the output on purpose is fine: write-only as a shell's `>/dev/null` opens it,
    // and read-write as Python's `subprocess.DEVNULL` and daemon(3) do (`1<>/dev/null`).
    let out = Command::new(common::cli())
        .args(["profile", "--model", &tiny(), "--prompt", "Hi"])
        .stdout(std::process::Stdio::null())
        .output_bounded()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" profile --model \"$1\" --prompt Hi 1<>/dev/null")
        .arg(common::cli())
        .arg(tiny())
        .output_bounded()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // A reader that stops early (`| head -c 1`) is not an error.
    let out = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" profile --model \"$1\" --prompt Hi --generate 30 --all-positions | head -c 1 >/dev/null; exit ${PIPESTATUS:-0}")
        .arg(common::cli())
        .arg(tiny())
        .output_bounded()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
}

#[test]
fn without_a_home_folder_the_cache_is_refused_not_shared() {
    let out = Command::new(common::cli())
        .args(["profile", "--prompt", "a"])
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("ENTROPY_LENS_CACHE")
        .env_remove("ENTROPY_LENS_MODELS")
        .env_remove("ENTROPY_LENS_MODEL")
        .output_bounded()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no cache folder"), "{stderr}");
}

#[test]
fn a_corrupted_cached_default_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    // The default model's file name, with one byte changed in the middle of its weights.
    let mut bytes = std::fs::read(smollm2()).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    let cached = models.join(entropy_lens::fetch::SMOLLM2.file_name);
    std::fs::write(&cached, &bytes).unwrap();
    drop(bytes);
    let run_default = || {
        Command::new(common::cli())
            .args(["profile", "--prompt", "a"])
            .env("ENTROPY_LENS_MODELS", &models)
            .env("ENTROPY_LENS_CACHE", dir.path().join("cache"))
            .env_remove("ENTROPY_LENS_MODEL")
            .output_bounded()
            .unwrap()
    };
    let out = run_default();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    // The verdict is remembered by size and modification time: the second refusal is the same.
    assert!(dir.path().join("cache/hashes.json").is_file());
    let again = run_default();
    assert_eq!(again.status.code(), Some(1));
    // The genuine file passes.
    std::fs::copy(smollm2(), &cached).unwrap();
    let out = run_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn candle_errors_carry_no_backtrace_into_the_error_line() {
    let dir = tempfile::tempdir().unwrap();
    // A GGUF whose tensor count cannot fit in the file: candle's reader refuses it (with a
    // backtrace attached when RUST_BACKTRACE is set).
    let mut b = gguf_bytes(&[("general.architecture", 8, gguf_string("llama"))]);
    b[8..16].copy_from_slice(&1000u64.to_le_bytes());
    let path = dir.path().join("short.gguf");
    std::fs::write(&path, b).unwrap();
    let out = Command::new(common::cli())
        .args([
            "profile",
            "--model",
            path.to_str().unwrap(),
            "--prompt",
            "a",
        ])
        .env("RUST_BACKTRACE", "1")
        .output_bounded()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        !stderr.contains("backtrace") && stderr.lines().count() <= 3,
        "{stderr}"
    );
}

#[test]
fn npy_and_csv_errors_name_the_file_and_count_from_one() {
    let dir = tempfile::tempdir().unwrap();
    // A shape whose element count overflows.
    let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend((header.len() as u16).to_le_bytes());
    npy.extend(header.as_bytes());
    npy.extend(0f64.to_le_bytes());
    let feats = dir.path().join("huge.npy");
    std::fs::write(&feats, npy).unwrap();
    let labels = dir.path().join("y.txt");
    std::fs::write(&labels, "a\nb\n").unwrap();
    let l = labels.to_str().unwrap();
    fails_with(
        &[
            "classify",
            "--features",
            feats.to_str().unwrap(),
            "--labels",
            l,
        ],
        "huge.npy",
    );
    let csv = dir.path().join("inf.csv");
    std::fs::write(&csv, "1,2\n3,inf\n").unwrap();
    fails_with(
        &[
            "classify",
            "--features",
            csv.to_str().unwrap(),
            "--labels",
            l,
        ],
        "inf.csv: row 2 column 2 (counting from 1)",
    );
}
