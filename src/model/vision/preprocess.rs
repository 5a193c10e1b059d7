//! Image preprocessing as a checkpoint's `preprocessor_config.json` asks for it, reproducing
//! transformers' PIL image processors to the bit (Pillow 13): convert to RGB (transparency
//! composited onto white), resize with PIL's 8-bit two-pass convolution (each pass rounded to 8
//! bits, in Pillow's order), centre crop, rescale (in f64, then f32) and normalise (in f32).
//!
//! Bit-exactness matters because one level of an 8-bit pixel is 1/255 ≈ 0.004 before
//! normalisation: a resampler that rounds differently moves pixel values by ~0.008 and the lens
//! by far more than the parity tolerance.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use image::{DynamicImage, RgbImage};
use serde_json::Value;

use crate::error::{Error, Result};

/// PIL's resampling filters (the integers of `PIL.Image.Resampling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resample {
    Lanczos = 1,
    Bilinear = 2,
    Bicubic = 3,
    Box = 4,
    Hamming = 5,
}

impl Resample {
    /// The filter of PIL's integer code (`PIL.Image.Resampling`; nearest, 0, is not supported).
    pub fn from_pil(code: i64) -> Result<Self> {
        Ok(match code {
            1 => Resample::Lanczos,
            2 => Resample::Bilinear,
            3 => Resample::Bicubic,
            4 => Resample::Box,
            5 => Resample::Hamming,
            0 => {
                return Err(Error::Config(
                    "resample 0 (nearest) is not supported; use 2 (bilinear) or 3 (bicubic)".into(),
                ))
            }
            other => {
                return Err(Error::Config(format!(
                    "unknown resample filter {other} (PIL's codes: 1 lanczos, 2 bilinear, 3 bicubic, 4 box, 5 hamming)"
                )))
            }
        })
    }

    /// Half-width of the filter at scale 1.
    fn support(self) -> f64 {
        match self {
            Resample::Box => 0.5,
            Resample::Bilinear => 1.0,
            Resample::Hamming => 1.0,
            Resample::Bicubic => 2.0,
            Resample::Lanczos => 3.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        let sinc = |x: f64| {
            if x == 0.0 {
                1.0
            } else {
                let x = x * std::f64::consts::PI;
                x.sin() / x
            }
        };
        match self {
            Resample::Box => {
                // PIL's box filter covers (−½, ½].
                if x > -0.5 && x <= 0.5 {
                    1.0
                } else {
                    0.0
                }
            }
            Resample::Bilinear => (1.0 - x.abs()).max(0.0),
            Resample::Hamming => {
                let x = x.abs();
                if x == 0.0 {
                    1.0
                } else if x >= 1.0 {
                    0.0
                } else {
                    let xp = x * std::f64::consts::PI;
                    xp.sin() / xp * (0.54 + 0.46 * xp.cos())
                }
            }
            Resample::Bicubic => {
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
            Resample::Lanczos => {
                if (-3.0..3.0).contains(&x) {
                    sinc(x) * sinc(x / 3.0)
                } else {
                    0.0
                }
            }
        }
    }
}

/// How the image is resized before cropping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeTo {
    /// Exactly this height and width (aspect ratio not kept).
    Exact { height: usize, width: usize },
    /// The shorter side to this length, the longer in proportion (truncated, as transformers does).
    ShortestEdge(usize),
}

/// The preprocessing of one checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageProcessor {
    pub resize: Option<ResizeTo>,
    pub resample: Resample,
    /// Centre crop to (height, width).
    pub crop: Option<(usize, usize)>,
    pub rescale: Option<f64>,
    /// Per-channel mean and std, when normalising.
    pub normalize: Option<([f32; 3], [f32; 3])>,
}

/// Fixed-point precision of PIL's 8-bit resampling (`PRECISION_BITS` in `Resample.c`).
const PRECISION_BITS: u32 = 32 - 8 - 2;

impl ImageProcessor {
    /// Reads `preprocessor_config.json`. Keys left out take the defaults of the processor class
    /// it names (`image_processor_type`, or `feature_extractor_type` in older files), as
    /// transformers does: DeiT's resize to 256 × 256, bicubic, then crop 224 × 224; otherwise ViT's
    /// resize to 224 × 224, bilinear, no crop; both rescale by 1/255 and normalise with mean = std
    /// = 0.5. Images are always converted to RGB (transparency onto white).
    ///
    /// # Errors
    /// [`Error::Config`] for a missing file, invalid JSON or invalid values.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::Config(format!(
                "{} is missing: an image classifier needs its preprocessing configuration (the Hub repository has it beside config.json)",
                path.display()
            )),
            _ => Error::io(path, e),
        })?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| Error::Config(format!("{} is not valid JSON: {e}", path.display())))?;
        Self::from_json(&v).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// As [`ImageProcessor::from_file`], from parsed JSON.
    pub fn from_json(v: &Value) -> Result<Self> {
        let class = v["image_processor_type"]
            .as_str()
            .or_else(|| v["feature_extractor_type"].as_str())
            .unwrap_or("ViTImageProcessor");
        // The processor classes whose steps this reproduces (resize, crop, rescale, normalise);
        // others (ConvNeXt's crop_pct, …) preprocess differently.
        if !["ViT", "DeiT", "CLIP"].iter().any(|c| class.starts_with(c)) {
            return Err(Error::Config(format!(
                "image processor `{class}` is not supported (ViTImageProcessor, DeiTImageProcessor, CLIPImageProcessor)"
            )));
        }
        let deit = class.starts_with("DeiT");
        let square = |n: usize| ResizeTo::Exact {
            height: n,
            width: n,
        };
        let (default_size, default_crop, default_resample) = if deit {
            (square(256), Some((224, 224)), Resample::Bicubic)
        } else {
            (square(224), None, Resample::Bilinear)
        };
        let flag = |key: &str, default: bool| -> Result<bool> {
            match &v[key] {
                Value::Null => Ok(default),
                Value::Bool(b) => Ok(*b),
                other => Err(Error::Config(format!(
                    "`{key}` must be true or false, got {other}"
                ))),
            }
        };
        let size = |key: &str| -> Result<Option<ResizeTo>> {
            let s = &v[key];
            let positive = |x: &Value, what: &str| -> Result<usize> {
                match x.as_u64() {
                    Some(n) if n > 0 && n <= 1 << 16 => Ok(n as usize),
                    _ => Err(Error::Config(format!(
                        "`{key}.{what}` must be a pixel count from 1 to 65536, got {x}"
                    ))),
                }
            };
            Ok(match s {
                Value::Null => None,
                Value::Number(_) => {
                    let n = positive(s, "")?;
                    Some(ResizeTo::Exact {
                        height: n,
                        width: n,
                    })
                }
                Value::Object(m) if m.contains_key("height") || m.contains_key("width") => {
                    Some(ResizeTo::Exact {
                        height: positive(&s["height"], "height")?,
                        width: positive(&s["width"], "width")?,
                    })
                }
                Value::Object(m) if m.contains_key("shortest_edge") => {
                    if m.get("longest_edge").is_some_and(|l| !l.is_null()) {
                        return Err(Error::Config(format!(
                            "`{key}` with both shortest_edge and longest_edge is not supported"
                        )));
                    }
                    Some(ResizeTo::ShortestEdge(positive(
                        &s["shortest_edge"],
                        "shortest_edge",
                    )?))
                }
                other => {
                    return Err(Error::Config(format!(
                        "`{key}` must be a number or {{height, width}} or {{shortest_edge}}, got {other}"
                    )))
                }
            })
        };
        let resize = if flag("do_resize", true)? {
            Some(size("size")?.unwrap_or(default_size))
        } else {
            None
        };
        let crop = if flag("do_center_crop", default_crop.is_some())? {
            match size("crop_size")? {
                Some(ResizeTo::Exact { height, width }) => Some((height, width)),
                Some(ResizeTo::ShortestEdge(_)) => {
                    return Err(Error::Config(
                        "`crop_size` must give height and width".into(),
                    ))
                }
                None => Some(default_crop.unwrap_or((224, 224))),
            }
        } else {
            None
        };
        let resample = match &v["resample"] {
            Value::Null => default_resample,
            r => Resample::from_pil(r.as_i64().ok_or_else(|| {
                Error::Config(format!("`resample` must be an integer, got {r}"))
            })?)?,
        };
        let rescale = if flag("do_rescale", true)? {
            let f = match &v["rescale_factor"] {
                Value::Null => 1.0 / 255.0,
                x => x.as_f64().ok_or_else(|| {
                    Error::Config(format!("`rescale_factor` must be a number, got {x}"))
                })?,
            };
            if !(f.is_finite() && f > 0.0) {
                return Err(Error::Config(format!(
                    "`rescale_factor` must be a positive number, got {f}"
                )));
            }
            Some(f)
        } else {
            None
        };
        let triple = |key: &str| -> Result<[f32; 3]> {
            match &v[key] {
                Value::Null => Ok([0.5; 3]),
                Value::Number(n) => Ok([n.as_f64().unwrap_or(0.5) as f32; 3]),
                Value::Array(a) if a.len() == 3 => {
                    let mut out = [0f32; 3];
                    for (o, x) in out.iter_mut().zip(a) {
                        *o = x.as_f64().ok_or_else(|| {
                            Error::Config(format!("`{key}` must hold numbers, got {x}"))
                        })? as f32;
                    }
                    Ok(out)
                }
                other => Err(Error::Config(format!(
                    "`{key}` must be a number or three numbers (one per RGB channel), got {other}"
                ))),
            }
        };
        let normalize = if flag("do_normalize", true)? {
            let (mean, std) = (triple("image_mean")?, triple("image_std")?);
            if std.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                return Err(Error::Config(format!(
                    "`image_std` must be positive, got {std:?}"
                )));
            }
            Some((mean, std))
        } else {
            None
        };
        Ok(Self {
            resize,
            resample,
            crop,
            rescale,
            normalize,
        })
    }

    /// The (height, width) of the model input this processor makes from an image of `size`.
    pub fn output_size(&self, height: usize, width: usize) -> (usize, usize) {
        let (h, w) = match self.resize {
            Some(r) => resize_target(r, height, width),
            None => (height, width),
        };
        self.crop.unwrap_or((h, w))
    }

    /// Pixel values `[3, height, width]` (channels first, as `pixel_values`), row-major.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when resizing would make an image of more than 2²⁶ pixels (a
    /// long thin image under `shortest_edge`).
    pub fn pixel_values(&self, image: &DynamicImage) -> Result<(Vec<f32>, usize, usize)> {
        let rgb = to_rgb(image);
        let (mut w, mut h) = (rgb.width() as usize, rgb.height() as usize);
        let mut data = rgb.into_raw();
        if let Some(r) = self.resize {
            let (th, tw) = resize_target(r, h, w);
            if th.saturating_mul(tw) > MAX_RESIZED_PIXELS || th == 0 || tw == 0 {
                return Err(Error::invalid(format!(
                    "resizing a {h}×{w} (height × width) image as preprocessor_config.json asks would make it {th}×{tw}, more than 2²⁶ pixels"
                )));
            }
            data = resample_rgb(&data, w, h, tw, th, self.resample);
            (w, h) = (tw, th);
        }
        if let Some((ch, cw)) = self.crop {
            if ch.saturating_mul(cw) > MAX_RESIZED_PIXELS {
                return Err(Error::invalid(format!(
                    "the configured {ch}×{cw} crop is larger than any model input (at most 2²⁶ pixels)"
                )));
            }
            data = center_crop(&data, h, w, ch, cw);
            (w, h) = (cw, ch);
        }
        let mut pixels = vec![0f32; 3 * h * w];
        for c in 0..3 {
            for i in 0..h * w {
                let raw = data[i * 3 + c];
                let mut x = match self.rescale {
                    Some(f) => (raw as f64 * f) as f32,
                    None => raw as f32,
                };
                if let Some((mean, std)) = &self.normalize {
                    x = (x - mean[c]) / std[c];
                }
                pixels[c * h * w + i] = x;
            }
        }
        Ok((pixels, h, w))
    }
}

/// Largest image a resize may make (2²⁶ pixels, 192 MiB of RGB).
const MAX_RESIZED_PIXELS: usize = 1 << 26;

/// transformers' `center_crop` on 8-bit RGB: the centre `ch × cw` window (top and left rounded
/// down); where the image is smaller than the crop it is first padded with zeros, centred (the
/// padding before it rounded up).
fn center_crop(data: &[u8], h: usize, w: usize, ch: usize, cw: usize) -> Vec<u8> {
    // Python's floor division, on possibly negative differences.
    let floor_half = |d: i64| d.div_euclid(2);
    let (nh, nw) = (h.max(ch), w.max(cw));
    let (top_pad, left_pad) = ((nh - h).div_ceil(2), (nw - w).div_ceil(2));
    let top = (floor_half(h as i64 - ch as i64) + top_pad as i64).max(0) as usize;
    let left = (floor_half(w as i64 - cw as i64) + left_pad as i64).max(0) as usize;
    let mut out = vec![0u8; ch * cw * 3];
    for y in 0..ch {
        // Row y of the crop is row top + y of the padded image, row top + y − top_pad of the image.
        let Some(src_y) = (top + y).checked_sub(top_pad).filter(|&r| r < h) else {
            continue;
        };
        for x in 0..cw {
            let Some(src_x) = (left + x).checked_sub(left_pad).filter(|&c| c < w) else {
                continue;
            };
            let (o, i) = ((y * cw + x) * 3, (src_y * w + src_x) * 3);
            out[o..o + 3].copy_from_slice(&data[i..i + 3]);
        }
    }
    out
}

fn resize_target(r: ResizeTo, height: usize, width: usize) -> (usize, usize) {
    match r {
        ResizeTo::Exact { height, width } => (height, width),
        ResizeTo::ShortestEdge(s) => {
            let (short, long) = (height.min(width), height.max(width));
            let long = (s as f64 * long as f64 / short.max(1) as f64) as usize;
            if height <= width {
                (s, long)
            } else {
                (long, s)
            }
        }
    }
}

/// RGB with 8 bits per channel; transparency is composited onto white with PIL's
/// `alpha_composite` arithmetic (as transformers' `convert_to_rgb`).
pub fn to_rgb(image: &DynamicImage) -> RgbImage {
    // 16 bits per channel as PIL reads them: RGB keeps the high byte; grey becomes PIL's 32-bit
    // "I" mode, which converts to 8 bits by clipping at 255.
    match image {
        DynamicImage::ImageRgb16(img) => {
            let (w, h) = img.dimensions();
            let raw = img.as_raw().iter().map(|&v| (v >> 8) as u8).collect();
            if let Some(out) = RgbImage::from_raw(w, h, raw) {
                return out;
            }
        }
        DynamicImage::ImageLuma16(img) => {
            let (w, h) = img.dimensions();
            let raw = img
                .as_raw()
                .iter()
                .flat_map(|&v| [v.min(255) as u8; 3])
                .collect();
            if let Some(out) = RgbImage::from_raw(w, h, raw) {
                return out;
            }
        }
        _ => {}
    }
    if !image.color().has_alpha() {
        return image.to_rgb8();
    }
    let rgba = image.to_rgba8();
    let (w, h) = rgba.dimensions();
    let mut out = RgbImage::new(w, h);
    for (o, p) in out.pixels_mut().zip(rgba.pixels()) {
        let a = p[3] as u32;
        for c in 0..3 {
            o[c] = if a == 0 {
                255
            } else {
                // PIL: coef1 = a·255·255·2^7 / (255·255), coef2 = 255·2^7 − coef1, then a rounded
                // division by 255 done with shifts.
                let coef1 = a << 7;
                let coef2 = (255 << 7) - coef1;
                let t = p[c] as u32 * coef1 + 255 * coef2 + (0x80 << 7);
                ((((t >> 8) + t) >> 8) >> 7) as u8
            };
        }
    }
    out
}

/// Per output pixel: the first input pixel and the fixed-point weights (PIL's
/// `precompute_coeffs` then `normalize_coeffs_8bpc`).
fn coefficients(in_size: usize, out_size: usize, filter: Resample) -> Vec<(usize, Vec<i32>)> {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = filter.support() * filterscale;
    (0..out_size)
        .map(|xx| {
            let center = (xx as f64 + 0.5) * scale;
            let ss = 1.0 / filterscale;
            // C's (int) truncates toward zero; the values here are ≥ −support.
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let n = xmax.saturating_sub(xmin);
            let mut k: Vec<f64> = (0..n)
                .map(|x| filter.weight((x as f64 + xmin as f64 - center + 0.5) * ss))
                .collect();
            let total: f64 = k.iter().sum();
            if total != 0.0 {
                k.iter_mut().for_each(|w| *w /= total);
            }
            let one = (1u32 << PRECISION_BITS) as f64;
            let fixed = k
                .iter()
                .map(|&w| {
                    if w < 0.0 {
                        (-0.5 + w * one) as i32
                    } else {
                        (0.5 + w * one) as i32
                    }
                })
                .collect();
            (xmin, fixed)
        })
        .collect()
}

fn clip8(v: i64) -> u8 {
    if v >= (1i64 << PRECISION_BITS << 8) {
        255
    } else if v <= 0 {
        0
    } else {
        (v >> PRECISION_BITS) as u8
    }
}

/// `image` resized to `width × height` with `filter` exactly as Pillow's `Image.resize` does it.
///
/// # Errors
/// [`Error::InvalidArgument`] for a zero target size or one of more than 2²⁶ pixels.
pub fn resize(image: &RgbImage, width: usize, height: usize, filter: Resample) -> Result<RgbImage> {
    if width == 0 || height == 0 || width.saturating_mul(height) > MAX_RESIZED_PIXELS {
        return Err(Error::invalid(format!(
            "cannot resize to {width}×{height} (width × height): at least 1 and at most 2²⁶ pixels"
        )));
    }
    let (w, h) = (image.width() as usize, image.height() as usize);
    let data = resample_rgb(image.as_raw(), w, h, width, height, filter);
    RgbImage::from_raw(width as u32, height as u32, data)
        .ok_or_else(|| Error::invalid("resized image has the wrong size"))
}

/// PIL's `ImagingResample` on an RGB image: two separable passes, each rounded to 8 bits. Pillow
/// (13) runs the vertical pass first when the height shrinks by more than twice as many pixels as
/// the width (`ImagingResampleInner`: `ysize_in − ysize > 0 && ysize_in − ysize > 2 (xsize_in −
/// xsize)`), to make the horizontal pass cheaper; otherwise the horizontal one. The rounding
/// between the passes makes the order visible in the last bit.
fn resample_rgb(
    data: &[u8],
    w: usize,
    h: usize,
    out_w: usize,
    out_h: usize,
    filter: Resample,
) -> Vec<u8> {
    if vertical_first(w, h, out_w, out_h) {
        let tall = vertical_pass(data, w, h, out_h, filter);
        horizontal_pass(&tall, w, out_h, out_w, filter)
    } else {
        let wide = horizontal_pass(data, w, h, out_w, filter);
        vertical_pass(&wide, out_w, h, out_h, filter)
    }
}

/// Pillow's choice of pass order (see [`resample_rgb`]).
fn vertical_first(w: usize, h: usize, out_w: usize, out_h: usize) -> bool {
    let dh = h as i64 - out_h as i64;
    let dw = w as i64 - out_w as i64;
    dh > 0 && dh > 2 * dw
}

/// Resamples each row of a `w × h` RGB image to `out_w` pixels (a copy when the width stays).
fn horizontal_pass(data: &[u8], w: usize, h: usize, out_w: usize, filter: Resample) -> Vec<u8> {
    if out_w == w {
        return data.to_vec();
    }
    let kx = coefficients(w, out_w, filter);
    let mut next = vec![0u8; out_w * h * 3];
    for y in 0..h {
        for (xx, (xmin, k)) in kx.iter().enumerate() {
            for c in 0..3 {
                let mut ss: i64 = 1 << (PRECISION_BITS - 1);
                for (x, &wgt) in k.iter().enumerate() {
                    ss += data[(y * w + xmin + x) * 3 + c] as i64 * wgt as i64;
                }
                next[(y * out_w + xx) * 3 + c] = clip8(ss);
            }
        }
    }
    next
}

/// Resamples each column of a `w × h` RGB image to `out_h` pixels (a copy when the height stays).
fn vertical_pass(data: &[u8], w: usize, h: usize, out_h: usize, filter: Resample) -> Vec<u8> {
    if out_h == h {
        return data.to_vec();
    }
    let ky = coefficients(h, out_h, filter);
    let mut next = vec![0u8; w * out_h * 3];
    for (yy, (ymin, k)) in ky.iter().enumerate() {
        for x in 0..w {
            for c in 0..3 {
                let mut ss: i64 = 1 << (PRECISION_BITS - 1);
                for (y, &wgt) in k.iter().enumerate() {
                    ss += data[((ymin + y) * w + x) * 3 + c] as i64 * wgt as i64;
                }
                next[(yy * w + x) * 3 + c] = clip8(ss);
            }
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_size_is_identity_and_weights_sum_to_one() {
        let data: Vec<u8> = (0..5 * 4 * 3).map(|i| (i * 7 % 256) as u8).collect();
        assert_eq!(resample_rgb(&data, 5, 4, 5, 4, Resample::Bicubic), data);
        for f in [Resample::Bilinear, Resample::Bicubic, Resample::Lanczos] {
            for (_, k) in coefficients(37, 16, f) {
                let s: i64 = k.iter().map(|&x| x as i64).sum();
                assert!(
                    (s - (1 << PRECISION_BITS)).abs() <= k.len() as i64,
                    "{f:?}: {s}"
                );
            }
        }
        // A constant image stays constant through any filter.
        let flat = vec![77u8; 9 * 7 * 3];
        assert!(resample_rgb(&flat, 9, 7, 4, 11, Resample::Bicubic)
            .iter()
            .all(|&v| v == 77));
    }

    #[test]
    fn a_long_thin_image_is_refused_before_resizing() {
        let p = ImageProcessor::from_json(&serde_json::json!({"size": {"shortest_edge": 224}}))
            .unwrap();
        let thin = DynamicImage::ImageRgb8(RgbImage::new(1, 60_000));
        let e = p.pixel_values(&thin).unwrap_err();
        assert!(e.to_string().contains("more than 2²⁶ pixels"), "{e}");
        let huge_crop = serde_json::json!({"do_resize": false, "do_center_crop": true,
            "crop_size": {"height": 65536, "width": 65536}});
        let p = ImageProcessor::from_json(&huge_crop).unwrap();
        let e = p
            .pixel_values(&DynamicImage::ImageRgb8(RgbImage::new(4, 4)))
            .unwrap_err();
        assert!(e.to_string().contains("crop"), "{e}");
    }

    #[test]
    fn config_values_are_checked() {
        let v = serde_json::json!({"size": 224, "resample": 3, "do_center_crop": true, "crop_size": 200});
        let p = ImageProcessor::from_json(&v).unwrap();
        assert_eq!(p.output_size(480, 640), (200, 200));
        assert_eq!(p.resample, Resample::Bicubic);
        let short = serde_json::json!({"size": {"shortest_edge": 32}});
        let p = ImageProcessor::from_json(&short).unwrap();
        assert_eq!(p.output_size(40, 100), (32, 80));
        for bad in [
            serde_json::json!({"resample": 0}),
            serde_json::json!({"size": -3}),
            serde_json::json!({"image_std": [0.5, 0.0, 0.5]}),
            serde_json::json!({"image_mean": [0.5, 0.5]}),
            serde_json::json!({"do_resize": "yes"}),
            serde_json::json!({"rescale_factor": "1/255"}),
        ] {
            let e = ImageProcessor::from_json(&bad).unwrap_err();
            assert!(matches!(e, Error::Config(_)), "{bad}: {e}");
        }
    }
}
