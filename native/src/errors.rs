//! Failures as `znippy_sql.errors` classes: the class is looked up by name when an error is
//! raised, so the Python module stays the one definition of the hierarchy.

use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyModule};

/// Which `ZnippyError` subclass a native failure becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Format,
    /// a damaged git pack (`PackError`, a `FormatError`)
    Pack,
    Checksum,
    Codec,
    NotFound,
    Io,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Format => "FormatError",
            Kind::Pack => "PackError",
            Kind::Checksum => "ChecksumError",
            Kind::Codec => "CodecError",
            Kind::NotFound => "NotFoundError",
            Kind::Io => "ZnippyError",
        }
    }
}

/// A native failure: its kind, the file it concerns and a one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: Kind,
    pub path: Option<String>,
    pub message: String,
}

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error {
            kind,
            path: None,
            message: message.into(),
        }
    }

    /// The same failure, naming the file it concerns.
    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{path}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        Python::attach(|py| {
            let made = (|| -> PyResult<PyErr> {
                let cls =
                    PyModule::import(py, "znippy_sql.errors")?.getattr(err.kind.class_name())?;
                let kwargs = [("path", err.path.clone())].into_py_dict(py)?;
                let instance = cls.call((err.message.clone(),), Some(&kwargs))?;
                Ok(PyErr::from_value(instance))
            })();
            made.unwrap_or_else(|e| e)
        })
    }
}

/// Raises `Error(kind, message)`: the boundary test checks each kind arrives as its class.
#[pyfunction]
#[pyo3(signature = (kind, message, path=None))]
fn _raise_for_test(kind: &str, message: &str, path: Option<&str>) -> PyResult<()> {
    let kind = match kind {
        "format" => Kind::Format,
        "checksum" => Kind::Checksum,
        "codec" => Kind::Codec,
        "notfound" => Kind::NotFound,
        _ => Kind::Io,
    };
    let err = Error::new(kind, message);
    Err(match path {
        Some(path) => err.at(path),
        None => err,
    }
    .into())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_raise_for_test, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_the_display() {
        let e = Error::new(Kind::Format, "footer magic is wrong").at("a.znippy");
        assert_eq!(e.to_string(), "a.znippy: footer magic is wrong");
        assert_eq!(e.kind.class_name(), "FormatError");
    }
}
