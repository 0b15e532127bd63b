//! Configuration: HAProxy-syntax text in, a validated [`model::Config`] out.
//! (Skeleton: the config branch replaces this file with the real pipeline.)

pub mod model;

use std::fmt;
use std::path::PathBuf;

/// A message about the configuration, naming file:line, section and keyword.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub error: bool,
    pub text: String,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A configuration that loaded, with the warnings it raised.
pub struct Loaded {
    pub config: model::Config,
    pub warnings: Vec<Diagnostic>,
}

/// A configuration that did not load: every error (and warning) found, in file order.
pub struct LoadError {
    pub diagnostics: Vec<Diagnostic>,
}

/// Loads the files (a directory stands for its `*.cfg` files in lexical order).
pub fn load(_paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    Err(LoadError {
        diagnostics: vec![Diagnostic {
            error: true,
            text: "the configuration loader is not written yet".into(),
        }],
    })
}
