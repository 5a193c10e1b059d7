//! `entropy-lens explore`: starts [`crate::explore::Explorer`] and serves until Ctrl-C.

// User input reaches this module: no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use super::args::ExploreArgs;
use super::note;
use crate::error::{Error, Result};
use crate::explore::{ExploreConfig, Explorer, Limits};

impl ExploreArgs {
    /// The configuration these flags ask for.
    pub fn to_config(&self) -> Result<ExploreConfig> {
        let positive = |name: &str, v: usize| {
            if v == 0 {
                Err(Error::invalid(format!("--{name} must be at least 1")))
            } else {
                Ok(v)
            }
        };
        Ok(ExploreConfig {
            models: self.models.clone(),
            tuned_lenses: self.tuned_lenses.clone(),
            host: self.host.clone(),
            port: self.port,
            token: self.token.clone(),
            device: self.device.clone(),
            dtype: self.dtype.as_deref().map(str::parse).transpose()?,
            limits: Limits {
                max_prompt_tokens: positive("max-prompt-tokens", self.max_prompt_tokens)?,
                max_generate: self.max_generate,
                max_queue: positive("max-queue", self.max_queue)?,
                max_batch: positive("max-batch", self.max_batch)?,
                ..Limits::default()
            },
            stop_on_ctrl_c: true,
        })
    }
}

/// Starts the explorer, prints its URL on `out` (the first line, for scripts), and serves until
/// Ctrl-C.
pub fn explore(args: &ExploreArgs, out: &mut impl Write) -> Result<()> {
    let config = args.to_config()?;
    let asked_token = config.token.is_some();
    let explorer = Explorer::start(config)?;
    let network = !explorer.addr().ip().is_loopback();
    let generated = explorer.token().is_some() && !asked_token;
    if network {
        note(&format!(
            "warning: the explorer listens on {} — anyone on this network who has the URL can use it{}",
            args.host,
            if generated {
                "; a token was generated: share the URL, with its ?token=…"
            } else {
                ""
            }
        ));
        if let Some(url) = explorer.network_url() {
            note(&format!("other machines on this network open {url}"));
        }
    }
    // The URL last: whoever reads it has the warning already.
    writeln!(out, "{}", explorer.url()).map_err(|e| Error::io("<stdout>", e))?;
    out.flush().map_err(|e| Error::io("<stdout>", e))?;
    note(&format!(
        "entropy-lens explore: serving {} at {} (Ctrl-C to stop)",
        explorer.model_names().join(", "),
        explorer.url()
    ));
    explorer.wait();
    Ok(())
}
