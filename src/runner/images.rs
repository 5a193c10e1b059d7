//! Entropy profiles of image classifiers (the paper's Appendix A.4): image files → pixel values →
//! the classifier's head read after every block → one [`EntropyProfile`] per image.
//!
//! The profile has one position (position 0: the class token's prediction) whose per-layer
//! statistics are over the classes; `prompt` holds the image's file name, `generated_ids` the
//! predicted class (the last block's top-1) and `generated_text` its name, so the profile algebra,
//! statistics, charts and the CLI's JSON work unchanged.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use candle_core::Tensor;
use image::DynamicImage;
use indicatif::ProgressBar;

use crate::data::images::read_image;
use crate::error::{Error, Result};
use crate::lens::{Lens, StatSpec};
use crate::model::vision::{is_vision_source, load_vision, VisionModel};
use crate::model::{LoadOptions, ModelSource};
use crate::profile::provenance::{Provenance, CRATE_VERSION};
use crate::profile::{EntropyProfile, PositionProfile};
use crate::runner::device_name;

/// Images per forward pass when none is set.
pub const DEFAULT_IMAGE_BATCH: usize = 16;

/// Runs the lens over images.
pub struct ImageProfiler {
    pub model: VisionModel,
    lens: Lens,
    batch_size: usize,
}

impl ImageProfiler {
    /// Loads a ViT/DeiT classifier (a folder or a Hub id) with the default statistics.
    pub fn load(model: &str, opts: &LoadOptions) -> Result<Self> {
        let source = ModelSource::parse(model)?;
        Self::new(load_vision(&source, opts)?, StatSpec::default())
    }

    pub fn new(model: VisionModel, spec: StatSpec) -> Result<Self> {
        Ok(Self {
            model,
            lens: Lens::new(spec)?,
            batch_size: DEFAULT_IMAGE_BATCH,
        })
    }

    pub fn spec(&self) -> &StatSpec {
        self.lens.spec()
    }

    /// Images per forward pass.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Images per forward pass (profiles do not depend on it).
    pub fn set_batch_size(&mut self, n: usize) -> Result<()> {
        if n == 0 {
            return Err(Error::invalid("the batch size must be at least 1"));
        }
        self.batch_size = n;
        Ok(())
    }

    /// The model input of one image, `[channels, height, width]` as the checkpoint's image
    /// processor makes it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the processor's output is not the model's input size
    /// (a configuration without resizing, given an image of another size).
    pub fn pixel_values(&self, image: &DynamicImage) -> Result<Tensor> {
        let (pixels, h, w) = self.model.processor().pixel_values(image)?;
        let want = self.model.info().image_size;
        if (h, w) != want {
            return Err(Error::invalid(format!(
                "the image becomes a {h}×{w} input but the model takes {}×{} (preprocessor_config.json does not resize it to that size)",
                want.0, want.1
            )));
        }
        Ok(Tensor::from_vec(
            pixels,
            (3, h, w),
            &candle_core::Device::Cpu,
        )?)
    }

    /// The profile of each image file, in order.
    pub fn profile_files(
        &mut self,
        paths: &[PathBuf],
        include_embed: bool,
        progress: Option<&ProgressBar>,
    ) -> Result<Vec<EntropyProfile>> {
        let mut out = Vec::with_capacity(paths.len());
        for group in paths.chunks(self.batch_size) {
            let images = group
                .iter()
                .map(|p| Ok((file_label(p), read_image(p)?)))
                .collect::<Result<Vec<_>>>()?;
            out.extend(self.profile_images(&images, include_embed)?);
            if let Some(bar) = progress {
                bar.inc(group.len() as u64);
            }
        }
        Ok(out)
    }

    /// The profile of each `(name, image)`, computed as one batch.
    pub fn profile_images(
        &mut self,
        images: &[(String, DynamicImage)],
        include_embed: bool,
    ) -> Result<Vec<EntropyProfile>> {
        if images.is_empty() {
            return Ok(Vec::new());
        }
        let pixels = images
            .iter()
            .map(|(name, img)| {
                self.pixel_values(img).map_err(|e| match e {
                    Error::InvalidArgument(m) => Error::invalid(format!("image {name}: {m}")),
                    other => other,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let batch = Tensor::stack(&pixels, 0)?;
        let logits = self.model.lens_logits(&batch, include_embed)?;
        let stats = self.lens.apply_to_logits(&logits)?;
        let b = images.len();
        let n_layers = self.model.info().n_layers;
        let spec = self.lens.spec().clone();
        let labels = self.model.labels();
        let mut out = Vec::with_capacity(b);
        for (i, (name, _)) in images.iter().enumerate() {
            // Rows are layer-major: layer j of image i is row j · b + i.
            let mut per_layer: Vec<_> = stats.iter().skip(i).step_by(b).cloned().collect();
            let embed = if include_embed {
                Some(per_layer.remove(0))
            } else {
                None
            };
            let last = per_layer
                .last()
                .cloned()
                .ok_or_else(|| Error::Data("the classifier returned no layers".into()))?;
            let position =
                PositionProfile::from_stats(0, &spec, embed.as_ref(), &per_layer, &last, None);
            let predicted = top1(
                &logits,
                (per_layer.len() - 1 + usize::from(include_embed)) * b + i,
            )?;
            let label = labels
                .get(predicted as usize)
                .cloned()
                .unwrap_or_else(|| format!("LABEL_{predicted}"));
            out.push(EntropyProfile {
                schema_version: Some(crate::profile::schema::PROFILE_SCHEMA_VERSION),
                model: self.model.info().name.clone(),
                prompt: name.clone(),
                n_blocks: n_layers,
                read_point: crate::profile::ReadPoint::Block,
                prompt_ids: Vec::new(),
                generated_ids: vec![predicted],
                tokens: vec![label.clone()],
                generated_text: label,
                top_p: spec.top_p,
                positions: vec![position],
                provenance: Some(self.provenance()),
            });
        }
        Ok(out)
    }

    fn provenance(&self) -> Provenance {
        let info = self.model.info();
        let spec = self.lens.spec();
        Provenance {
            model: info.name.clone(),
            model_sha256: info.sha256.clone(),
            architecture: info.model_type.clone(),
            dtype: info.dtype.as_str().to_string(),
            device: device_name(self.model.device()),
            skipped_blocks: Vec::new(),
            alphas: spec
                .alphas
                .iter()
                .map(|&a| crate::lens::alpha_key(a))
                .collect(),
            top_p: spec.top_p,
            support_threshold: spec.support_threshold,
            chat_template: false,
            add_bos: false,
            ignore_eos: false,
            temperature: 0.0,
            sample_top_p: None,
            seed: 0,
            crate_version: CRATE_VERSION.to_string(),
            lens: None,
        }
    }
}

/// The class with the largest logit in `row` (the first on ties, as `argmax`).
fn top1(logits: &Tensor, row: usize) -> Result<u32> {
    let v = logits.get(row)?.to_vec1::<f32>()?;
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    Ok(best as u32)
}

/// The name a profile gives an image: its file name.
fn file_label(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Whether `--model` names an image classifier (a ViT/DeiT folder).
pub fn is_vision_model(model: &str) -> bool {
    ModelSource::parse(model).is_ok_and(|s| is_vision_source(&s))
}
