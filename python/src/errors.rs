//! The library's errors as Python exceptions, each with the CLI's message.

use entropy_lens::Error;
use pyo3::exceptions::{
    PyConnectionError, PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyRuntimeError,
    PyValueError,
};
use pyo3::PyErr;

/// The exception a Python caller expects for `e`: a missing file is `FileNotFoundError`, bad input
/// `ValueError`, a stop on Ctrl-C `KeyboardInterrupt`, a failed download `ConnectionError`, the
/// model's own failures `RuntimeError`.
pub fn to_py_err(e: Error) -> PyErr {
    let message = e.to_string();
    match &e {
        Error::ModelNotFound { .. } | Error::OfflineModelNotFetched { .. } => {
            PyFileNotFoundError::new_err(message)
        }
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(message)
        }
        Error::Io { .. } => PyOSError::new_err(message),
        Error::Interrupted(_) => PyKeyboardInterrupt::new_err(message),
        Error::Download(_) | Error::Hub(_) => PyConnectionError::new_err(message),
        Error::Device(_) | Error::Candle(_) => PyRuntimeError::new_err(message),
        Error::CorruptGguf { .. }
        | Error::CorruptSafetensors { .. }
        | Error::UnknownArchitecture { .. }
        | Error::Config(_)
        | Error::MissingWeight { .. }
        | Error::Tokenizer(_)
        | Error::InvalidArgument(_)
        | Error::ContextOverflow { .. }
        | Error::MalformedPrompts { .. }
        | Error::Data(_)
        | Error::BadImage { .. }
        | Error::Checksum { .. }
        | Error::Json(_) => PyValueError::new_err(message),
        // A variant added to the library later: its message says what went wrong.
        _ => PyRuntimeError::new_err(message),
    }
}

/// `Result<T, entropy_lens::Error>` → `PyResult<T>`.
pub trait IntoPy<T> {
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPy<T> for entropy_lens::Result<T> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(to_py_err)
    }
}
