//! One typed error for the whole library.
//!
//! Every variant says what was wrong and, where there is one, what to do about it.
//! Errors from candle, tokenizers, I/O and JSON are wrapped with the context in which
//! they happened, so a user never sees a bare "unexpected EOF".

use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("model file or folder not found: {path}\n  hint: pass a GGUF file, a Hugging Face folder (config.json + *.safetensors + tokenizer.json), a file name in the models folder, an offline model's short name (smollm2, gemma3-270m) or a Hub repo id such as HuggingFaceTB/SmolLM2-135M-Instruct; `entropy-lens fetch-models` downloads the two offline defaults")]
    ModelNotFound { path: PathBuf },

    #[error("the offline model `{name}` is not downloaded yet (expected at {path})\n  hint: run `entropy-lens fetch-models` (from Rust: `entropy_lens::fetch::model_source`, which downloads it)")]
    OfflineModelNotFetched { name: String, path: PathBuf },

    #[error("not a valid GGUF file: {path}: {reason}\n  hint: the file may be truncated or corrupt; download it again (`entropy-lens fetch-models` checks sha256)")]
    CorruptGguf { path: PathBuf, reason: String },

    #[error("unreadable safetensors weights in {folder}: {reason}\n  hint: a file may be truncated or corrupt; download it again")]
    CorruptSafetensors { folder: PathBuf, reason: String },

    #[error("unsupported model architecture `{architecture}` (supported: {supported})")]
    UnknownArchitecture {
        architecture: String,
        supported: String,
    },

    #[error("invalid model configuration: {0}")]
    Config(String),

    #[error("missing weight `{name}` in {source_desc}")]
    MissingWeight { name: String, source_desc: String },

    #[error("tokenizer error: {0}")]
    Tokenizer(String),

    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    #[error("sequence of {requested} tokens exceeds the model's context length of {context_length} tokens (prompt {prompt_tokens} + generate {generate})\n  hint: lower --generate or shorten the prompt")]
    ContextOverflow {
        requested: usize,
        context_length: usize,
        prompt_tokens: usize,
        generate: usize,
    },

    #[error("malformed prompts file {path}, line {line}: {reason}\n  hint: each line must be a JSON object such as {{\"prompt\": \"Once upon a time\"}}")]
    MalformedPrompts {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    #[error("invalid data: {0}")]
    Data(String),

    #[error("cannot read image {}: {reason}\n  hint: pass PNG or JPEG files, or folders of them", shown(.path))]
    BadImage { path: PathBuf, reason: String },

    #[error("download failed: {0}")]
    Download(String),

    #[error("checksum mismatch for {path}: expected sha256 {expected}, got {actual}\n  hint: delete the file and run `entropy-lens fetch-models` again")]
    Checksum {
        path: PathBuf,
        expected: String,
        actual: String,
    },

    #[error("Hugging Face Hub: {0}")]
    Hub(String),

    #[error("device error: {0}")]
    Device(String),

    #[error("tensor computation failed: {0}")]
    Candle(candle_core::Error),

    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),

    #[error("interrupted: {0}")]
    Interrupted(String),
}

impl From<candle_core::Error> for Error {
    /// Drops the backtrace candle attaches when `RUST_BACKTRACE` is set: it would be printed inside
    /// the one-line message.
    fn from(e: candle_core::Error) -> Self {
        let mut e = e;
        while let candle_core::Error::WithBacktrace { inner, .. } = e {
            e = *inner;
        }
        Error::Candle(e)
    }
}

impl Error {
    /// Wrap an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
}

thread_local! {
    /// Set while [`guard_dependency`] runs a dependency on this thread: its panic is expected.
    static SILENCED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a dependency's parser on untrusted input and turns a panic inside it into an error.
///
/// Some parsers panic on malformed input (tokenizers 0.23 unwraps inside its decoder
/// deserialisation, for one); a user's file must still get an `error:`, not exit code 101. The
/// panic message is silenced on this thread only: a hook installed once defers to the previous hook
/// unless the panicking thread is inside a guarded call, so concurrent calls cannot leave it off.
pub(crate) fn guard_dependency<T>(
    f: impl FnOnce() -> Result<T>,
    on_panic: impl FnOnce(String) -> Error,
) -> Result<T> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !SILENCED.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    let was = SILENCED.with(|s| s.replace(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    SILENCED.with(|s| s.set(was));
    outcome.unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_else(|| "no message".into());
        Err(on_panic(msg))
    })
}

/// A path as one line of a message: a newline in a file name would otherwise split the line.
fn shown(path: &std::path::Path) -> String {
    path.display()
        .to_string()
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}
