//! ViT and DeiT against transformers: the fixtures of `tests/fixtures/vision/` (tiny random
//! models made by `make_fixtures.py`) hold, per test image, the pixel values transformers' image
//! processor makes and the lens statistics of every layer computed in float64 from the model's
//! own modules. Preprocessing must match to 1e-5, entropies to 1e-4 nats, top-p counts, top-1
//! classes and the predicted class exactly.

mod common;

use std::path::PathBuf;

use entropy_lens::data::images::{image_files, read_image};
use entropy_lens::lens::StatSpec;
use entropy_lens::model::vision::preprocess::{resize, Resample};
use entropy_lens::model::vision::{is_vision_source, load_vision, ImageProcessor};
use entropy_lens::model::{LoadOptions, ModelSource, WeightDType};
use entropy_lens::runner::ImageProfiler;
use serde_json::Value;
use sha2::{Digest, Sha256};

use common::f64s;
use common::parity::{Report, ALPHAS};

const TOL: f64 = 1e-4;

fn fixtures() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/fixtures/vision")
}

fn reference(model: &str) -> Value {
    let path = fixtures().join(model).join("reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn profiler(model: &str, opts: &LoadOptions) -> ImageProfiler {
    let source = ModelSource::parse(fixtures().join(model).to_str().unwrap()).unwrap();
    assert!(is_vision_source(&source));
    let spec = StatSpec {
        alphas: ALPHAS.iter().map(|a| a.1).collect(),
        top_k: 5,
        ..Default::default()
    };
    ImageProfiler::new(load_vision(&source, opts).unwrap(), spec).unwrap()
}

fn check(model: &str, architecture: &str, n_layers: usize) {
    let gold = reference(model);
    let mut prof = profiler(model, &LoadOptions::cpu());
    assert_eq!(prof.model.info().architecture, architecture);
    assert_eq!(prof.model.info().n_layers, n_layers);
    let images = gold["images"].as_array().unwrap();
    let mut worst_pixel = 0f64;
    let mut report = Report::default();
    let mut files = Vec::new();
    for g in images {
        let path = fixtures().join("images").join(g["file"].as_str().unwrap());
        let img = read_image(&path).unwrap();
        let pixels = prof.pixel_values(&img).unwrap();
        let shape: Vec<usize> = g["pixel_values_shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(pixels.dims(), &shape[..], "{path:?}");
        let ours = pixels.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (a, b) in ours.iter().zip(f64s(&g["pixel_values"])) {
            worst_pixel = worst_pixel.max((*a as f64 - b).abs());
        }
        files.push(path);
    }
    println!("{model}: largest pixel difference {worst_pixel:.2e}");
    assert!(worst_pixel < 1e-5, "pixel values differ by {worst_pixel}");
    // All images in one batch, then one at a time, then without the embedding layer: the same
    // numbers and the same predicted classes.
    let batched = prof.profile_files(&files, true, None).unwrap();
    prof.set_batch_size(1).unwrap();
    let alone = prof.profile_files(&files, true, None).unwrap();
    prof.set_batch_size(2).unwrap();
    let no_embed = prof.profile_files(&files, false, None).unwrap();
    assert_eq!(batched.len(), images.len());
    assert_eq!(alone.len(), images.len());
    assert_eq!(no_embed.len(), images.len());
    for (((profile, single), plain), g) in batched.iter().zip(&alone).zip(&no_embed).zip(images) {
        assert_eq!(plain.generated_ids, profile.generated_ids);
        assert!(plain.positions[0].embed.is_none());
        assert_eq!(plain.positions[0].shannon.len(), n_layers);
        assert_eq!(profile.prompt, g["file"].as_str().unwrap());
        assert_eq!(profile.n_blocks, n_layers);
        assert_eq!(profile.positions.len(), 1);
        report.position(&profile.positions[0], &g["layers"], &g["embed"], 0);
        assert_eq!(
            profile.generated_ids,
            vec![g["predicted"].as_u64().unwrap() as u32],
            "predicted class of {}",
            g["file"]
        );
        let label = prof.model.labels()[profile.generated_ids[0] as usize].clone();
        assert_eq!(profile.generated_text, label);
        for ((a, b), c) in profile.positions[0]
            .shannon
            .iter()
            .zip(&single.positions[0].shannon)
            .zip(&plain.positions[0].shannon)
        {
            assert!((a - b).abs() < 1e-5, "batched {a} vs alone {b}");
            assert!((a - c).abs() < 1e-5, "with embedding {a} vs without {c}");
        }
    }
    println!("{model}: {report:?}");
    assert_eq!(report.entries, images.len() * (n_layers + 1));
    report.assert_within(TOL);
}

#[test]
fn vit_matches_transformers() {
    check("vit", "ViTForImageClassification", 4);
}

#[test]
fn deit_with_teacher_matches_transformers() {
    check("deit", "DeiTForImageClassificationWithTeacher", 3);
}

#[test]
fn preprocessing_matches_transformers_for_every_filter_size_rule_and_crop() {
    // processors.json: transformers' PIL image processor on fixture images under configurations
    // the two models do not use (lanczos, box, hamming; shortest edge; upscaling; a crop larger
    // than the image, padded with zeros; the DeiT class's defaults; no normalisation; 16-bit PNGs,
    // which PIL reduces its own way).
    let path = fixtures().join("processors.json");
    let gold: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = gold["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    let mut worst = 0f64;
    for case in cases {
        let proc = ImageProcessor::from_json(&case["config"]).unwrap();
        let file = case["file"].as_str().unwrap();
        let folder = case["folder"].as_str().unwrap();
        let img = read_image(&fixtures().join(folder).join(file)).unwrap();
        let (pixels, h, w) = proc.pixel_values(&img).unwrap();
        let shape: Vec<u64> = case["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(
            vec![3, h as u64, w as u64],
            shape,
            "{file} under {}",
            case["config"]
        );
        let every = case["every"].as_u64().unwrap() as usize;
        let gold = f64s(&case["pixel_values"]);
        assert_eq!(gold.len(), pixels.len().div_ceil(every));
        for (a, b) in pixels.iter().step_by(every).zip(&gold) {
            let d = (*a as f64 - b).abs();
            assert!(d < 1e-5, "{file} under {}: {a} vs {b}", case["config"]);
            worst = worst.max(d);
        }
    }
    println!("{} cases, largest difference {worst:.1e}", cases.len());
}

/// A copy of the ViT fixture with `edit` applied to its config.json.
fn edited_vit(edit: impl Fn(&mut Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
    ] {
        std::fs::copy(fixtures().join("vit").join(f), dir.path().join(f)).unwrap();
    }
    let path = dir.path().join("config.json");
    let mut cfg: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(&path, cfg.to_string()).unwrap();
    dir
}

#[test]
fn checkpoints_that_do_not_fit_their_config_are_refused() {
    let load = |dir: &tempfile::TempDir| {
        let source = ModelSource::HfFolder(dir.path().to_path_buf());
        load_vision(&source, &LoadOptions::cpu())
            .err()
            .map(|e| e.to_string())
    };
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: [(&str, Edit); 5] = [
        ("hidden_size", Box::new(|c| c["hidden_size"] = 64.into())),
        (
            "id2label",
            Box::new(|c| {
                c["id2label"]["cat"] = "tabby".into();
            }),
        ),
        (
            "has no name",
            Box::new(|c| {
                c["id2label"].as_object_mut().unwrap().remove("11");
            }),
        ),
        ("qkv_bias", Box::new(|c| c["qkv_bias"] = false.into())),
        (
            "intermediate_size",
            Box::new(|c| c["intermediate_size"] = 100.into()),
        ),
    ];
    for (want, edit) in cases {
        let dir = edited_vit(edit);
        let e = load(&dir).unwrap_or_else(|| panic!("{want}: loaded"));
        assert!(e.contains(want), "{want}: {e}");
    }
    // The unedited copy loads.
    assert_eq!(load(&edited_vit(|_| {})), None);
}

#[test]
fn half_precision_weights_stay_close() {
    // bf16 activations: the same predicted class on clear-cut images, entropies within 0.05 nats.
    let gold = reference("vit");
    let mut prof = profiler("vit", &LoadOptions::cpu().with_dtype(WeightDType::BF16));
    let files = image_files(&[fixtures().join("images")]).unwrap();
    let profiles = prof.profile_files(&files, false, None).unwrap();
    let mut worst = 0f64;
    for p in &profiles {
        let g = gold["images"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["file"] == p.prompt.as_str())
            .unwrap();
        for (a, b) in p.positions[0]
            .shannon
            .iter()
            .zip(f64s(&g["layers"]["shannon"][0]))
        {
            worst = worst.max((a - b).abs());
        }
    }
    println!("bf16: largest |ΔH| {worst:.3}");
    assert!(worst < 0.05, "bf16 entropies differ by {worst}");
}

/// The synthetic source image of `resize_grid.json`: pixel (x, y, c) is
/// ((x·7 + y·13 + c·101) XOR (x·y·3 + c·17)) mod 256.
fn grid_source(w: u32, h: u32) -> image::RgbImage {
    image::RgbImage::from_fn(w, h, |x, y| {
        let (x, y) = (x as u64, y as u64);
        image::Rgb(std::array::from_fn(|c| {
            let c = c as u64;
            (((x * 7 + y * 13 + c * 101) ^ (x * y * 3 + c * 17)) & 255) as u8
        }))
    })
}

fn dims(v: &Value) -> (u32, u32) {
    (v[0].as_u64().unwrap() as u32, v[1].as_u64().unwrap() as u32)
}

#[test]
fn resizing_matches_pillow_13_bit_for_bit_over_a_grid_of_shapes() {
    // resize_grid.json (make_resize_grid.py, Pillow 13.0.0): portrait and landscape, shrinking and
    // growing on each axis, odd sizes, extreme aspect ratios, both sides of Pillow's pass-order
    // rule, × the five filters; then transformers' PIL processor over sizes, shortest edges and
    // crops. Outputs are compared by sha256 of their bytes.
    let gold: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("resize_grid.json")).unwrap(),
    )
    .unwrap();
    assert!(gold["pillow"].as_str().unwrap().starts_with("13."));
    let (mut checked, mut vertical) = (0, 0);
    let mut wrong = Vec::new();
    for case in gold["resize"].as_array().unwrap() {
        let (w, h) = dims(&case["source"]);
        let (ow, oh) = dims(&case["target"]);
        let filter = Resample::from_pil(case["filter"].as_i64().unwrap()).unwrap();
        let out = resize(&grid_source(w, h), ow as usize, oh as usize, filter).unwrap();
        let sha = format!("{:x}", Sha256::digest(out.as_raw()));
        if sha != case["sha256"].as_str().unwrap() {
            wrong.push(format!("{w}×{h} → {ow}×{oh} {filter:?}"));
        }
        checked += 1;
        vertical += usize::from(case["vertical_first"].as_bool().unwrap());
    }
    assert!(wrong.is_empty(), "differ from Pillow: {wrong:?}");
    assert!(
        checked >= 100 && vertical >= 40,
        "{checked} cases, {vertical} vertical first"
    );
    for case in gold["processor"].as_array().unwrap() {
        let proc = ImageProcessor::from_json(&case["config"]).unwrap();
        let (w, h) = dims(&case["source"]);
        let img = image::DynamicImage::ImageRgb8(grid_source(w, h));
        let (pixels, ph, pw) = proc.pixel_values(&img).unwrap();
        let shape: Vec<u64> = case["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(
            shape,
            [3, ph as u64, pw as u64],
            "{w}×{h} {}",
            case["config"]
        );
        let bytes: Vec<u8> = pixels.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            format!("{:x}", Sha256::digest(&bytes)),
            case["sha256"].as_str().unwrap(),
            "{w}×{h} under {}",
            case["config"]
        );
        checked += 1;
    }
    println!("{checked} cases equal to Pillow / transformers bit for bit");
}
