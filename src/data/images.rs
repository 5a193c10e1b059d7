//! Image files for the vision transformers: single files, folders of them, and labelled sets laid
//! out as ImageNet's (`root/<class>/<file>.png`) or listed in a text file.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use image::DynamicImage;

use crate::error::{Error, Result};

/// File extensions read as images (PNG and JPEG decoders are built in).
pub const IMAGE_EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

fn is_image_name(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Largest image decoded: this many pixels a side, and this many bytes of decoded pixels (a
/// small compressed file may claim a huge image).
const MAX_SIDE: u32 = 16384;
const MAX_DECODED_BYTES: u64 = 256 << 20;

/// Why `path` is not a readable regular file, for messages.
fn not_a_file(path: &Path) -> String {
    match std::fs::symlink_metadata(path) {
        Err(_) => "no such file or folder".into(),
        Ok(m) if m.file_type().is_symlink() => {
            "a symbolic link that leads nowhere (or to itself)".into()
        }
        Ok(m) if m.is_dir() => "is a folder, not an image file".into(),
        Ok(_) => "not a regular file (a device, pipe or socket)".into(),
    }
}

/// Decodes an image file (the format is read from its first bytes, not its name).
///
/// # Errors
/// [`Error::BadImage`] for a missing, unreadable, truncated, oversized or non-image file.
pub fn read_image(path: &Path) -> Result<DynamicImage> {
    if !path.is_file() {
        return Err(Error::BadImage {
            path: path.to_path_buf(),
            reason: not_a_file(path),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| Error::BadImage {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    decode_image(&bytes, path)
}

/// Decodes the bytes of an image file; `path` names it in errors.
///
/// # Errors
/// As [`read_image`].
pub fn decode_image(bytes: &[u8], path: &Path) -> Result<DynamicImage> {
    let bad = |reason: String| Error::BadImage {
        path: path.to_path_buf(),
        reason,
    };
    if !cfg!(feature = "images") {
        return Err(bad(
            "decoding image files needs entropy-lens built with its `images` feature (on for the command; in a notebook `:dep entropy-lens = { ..., features = [\"images\"] }`)".into(),
        ));
    }
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| bad(e.to_string()))?;
    match reader.format() {
        None => {
            return Err(bad(
                "not a PNG or JPEG image (its first bytes name no known format)".into(),
            ))
        }
        // The JPEG decoder fills a cut-off scan with grey and carries on; PIL (and so
        // transformers) refuses such a file, and so does this.
        Some(image::ImageFormat::Jpeg) if !jpeg_complete(bytes) => {
            return Err(bad(
                "the JPEG data ends before its end-of-image marker (the file is truncated)".into(),
            ))
        }
        _ => {}
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODED_BYTES);
    reader.limits(limits);
    let image = reader.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => bad(format!(
            "larger than entropy-lens decodes (at most {MAX_SIDE} pixels a side and {} MiB of pixels): {e}",
            MAX_DECODED_BYTES >> 20
        )),
        e => bad(format!("{e} (the file may be truncated or not an image)")),
    })?;
    if image.width() == 0 || image.height() == 0 {
        return Err(bad("has no pixels".into()));
    }
    Ok(image)
}

/// Whether a JPEG's last scan is followed by an end-of-image marker (`FF D9`; entropy-coded
/// data cannot hold it, and an embedded thumbnail's comes before the main scans).
fn jpeg_complete(bytes: &[u8]) -> bool {
    let last_scan = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]);
    last_scan.is_some_and(|i| bytes[i..].windows(2).any(|w| w == [0xFF, 0xD9]))
}

/// The image files named by `paths`: files as given, folders expanded to the image files they
/// hold (by extension, sorted by name, not recursive).
///
/// # Errors
/// [`Error::BadImage`] for a path that does not exist or a folder without image files;
/// [`Error::InvalidArgument`] when `paths` is empty.
pub fn image_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    if paths.is_empty() {
        return Err(Error::invalid("no image files given"));
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let files = images_in(p)?;
            if files.is_empty() {
                return Err(Error::BadImage {
                    path: p.clone(),
                    reason: format!(
                        "the folder holds no image files ({})",
                        IMAGE_EXTENSIONS.join(", ")
                    ),
                });
            }
            out.extend(files);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(Error::BadImage {
                path: p.clone(),
                reason: not_a_file(p),
            });
        }
    }
    Ok(out)
}

fn images_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && is_image_name(p))
        .collect();
    files.sort();
    Ok(files)
}

/// An image with its class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabeledImage {
    pub path: PathBuf,
    pub label: String,
}

/// A labelled image set: a folder of class folders (`root/<class>/<file>`, ImageNet's layout;
/// classes and files sorted by name), or a text file with one `path label` per line (the path
/// relative to the file's folder, separated from the label by a tab or the last space; without a
/// label the image's folder name is its class; `#` starts a comment).
///
/// # Errors
/// [`Error::BadImage`] for a missing root, a listed file that does not exist, or a set without
/// images; [`Error::Data`] for a root folder with images but no class folders.
pub fn labeled_images(root: &Path) -> Result<Vec<LabeledImage>> {
    let set = if root.is_dir() {
        let mut classes: Vec<PathBuf> = std::fs::read_dir(root)
            .map_err(|e| Error::io(root, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        classes.sort();
        if classes.is_empty() && !images_in(root)?.is_empty() {
            return Err(Error::Data(format!(
                "{} holds images but no class folders; arrange them as {}/<class>/<image> or list them in a file of `path label` lines",
                root.display(),
                root.display()
            )));
        }
        let mut out = Vec::new();
        for class in classes {
            let label = class
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            for path in images_in(&class)? {
                out.push(LabeledImage {
                    path,
                    label: label.clone(),
                });
            }
        }
        out
    } else if root.is_file() {
        read_list(root)?
    } else {
        return Err(Error::BadImage {
            path: root.to_path_buf(),
            reason: "no such folder or list file".into(),
        });
    };
    if set.is_empty() {
        return Err(Error::BadImage {
            path: root.to_path_buf(),
            reason: format!(
                "holds no image files ({}) in class folders",
                IMAGE_EXTENSIONS.join(", ")
            ),
        });
    }
    Ok(set)
}

fn read_list(file: &Path) -> Result<Vec<LabeledImage>> {
    let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
    let base = file.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    let mut seen: std::collections::HashMap<PathBuf, usize> = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The whole line is a path (file names may hold spaces), else path, tab or last space,
        // label.
        let (path, label) = if base.join(line).is_file() {
            (line, None)
        } else {
            match line.rsplit_once('\t').or_else(|| line.rsplit_once(' ')) {
                Some((p, l)) => (p.trim(), Some(l.trim())),
                None => (line, None),
            }
        };
        let full = base.join(path);
        if !full.is_file() {
            return Err(Error::BadImage {
                path: full,
                reason: format!(
                    "listed on line {} of {}, but not a file",
                    i + 1,
                    file.display()
                ),
            });
        }
        if let Some(first) = seen.insert(full.clone(), i + 1) {
            return Err(Error::Data(format!(
                "{} lists {} twice (lines {first} and {})",
                file.display(),
                path,
                i + 1
            )));
        }
        let label = match label {
            Some(l) => l.to_string(),
            None => full
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        out.push(LabeledImage { path: full, label });
    }
    Ok(out)
}

/// The kinds of synthetic images, cycled by index.
pub const SYNTHETIC_KINDS: [&str; 3] = ["noise", "stripes", "discs"];

/// A seeded synthetic RGB image (48 × 40) and its kind, for runs without an image set (smoke
/// scale offline): uniform noise, stripes of random colour and period, or discs on a plain
/// background. The same `(index, seed)` always gives the same pixels.
pub fn synthetic_image(index: usize, seed: u64) -> (String, DynamicImage) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
        seed.wrapping_mul(0x9E37_79B9).wrapping_add(index as u64),
    );
    let (w, h) = (48u32, 40u32);
    let kind = SYNTHETIC_KINDS[index % SYNTHETIC_KINDS.len()];
    let mut img = image::RgbImage::new(w, h);
    let colour = |rng: &mut rand_chacha::ChaCha8Rng| -> [u8; 3] {
        [rng.random(), rng.random(), rng.random()]
    };
    match kind {
        "noise" => img.pixels_mut().for_each(|p| p.0 = colour(&mut rng)),
        "stripes" => {
            let (a, b) = (colour(&mut rng), colour(&mut rng));
            let period = rng.random_range(3..12u32);
            let vertical = rng.random_bool(0.5);
            for (x, y, p) in img.enumerate_pixels_mut() {
                let t = if vertical { x } else { y };
                p.0 = if (t / period) % 2 == 0 { a } else { b };
            }
        }
        _ => {
            let back = colour(&mut rng);
            img.pixels_mut().for_each(|p| p.0 = back);
            for _ in 0..rng.random_range(1..4) {
                let (cx, cy) = (rng.random_range(0..w) as i64, rng.random_range(0..h) as i64);
                let r = rng.random_range(4..14i64);
                let c = colour(&mut rng);
                for (x, y, p) in img.enumerate_pixels_mut() {
                    let (dx, dy) = (x as i64 - cx, y as i64 - cy);
                    if dx * dx + dy * dy <= r * r {
                        p.0 = c;
                    }
                }
            }
        }
    }
    (kind.to_string(), DynamicImage::ImageRgb8(img))
}
