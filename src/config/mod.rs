//! Configuration: HAProxy-syntax text in, a validated [`model::Config`] out.
//!
//! The pipeline has two stages, as the style guide asks: [`lexer`] and [`parser`] stay close to
//! the text (words, sections, spans) and apply each line through the keyword registry in
//! [`keywords`] to drafts; [`validate`] then resolves names and builds the typed model, the only
//! configuration type the runtime sees. Every stage reports into one list of [`Diagnostic`]s and
//! keeps going, so a single run shows every problem of every file, in file order.

pub mod cond;
pub mod diag;
pub mod keywords;
pub mod lexer;
pub mod model;
pub mod parser;
pub mod rawbytes;
pub mod validate;
pub mod values;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use diag::{Diagnostic, Severity, Span};

/// A configuration that loaded, with the warnings it raised.
#[derive(Debug)]
pub struct Loaded {
    pub config: model::Config,
    pub warnings: Vec<Diagnostic>,
}

/// A configuration that did not load: every error and warning found, in file order.
#[derive(Debug)]
pub struct LoadError {
    pub diagnostics: Vec<Diagnostic>,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for d in &self.diagnostics {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// Lists the files a `-f` path stands for: the file itself, or a directory's non-hidden `*.cfg`
/// files in byte order of their names.
fn expand_path(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let name = entry.file_name();
        let bytes = name.as_encoded_bytes();
        if bytes.starts_with(b".") || !bytes.ends_with(b".cfg") {
            continue;
        }
        if entry.path().is_file() {
            names.push(name);
        }
    }
    names.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
    Ok(names.into_iter().map(|n| path.join(n)).collect())
}

/// Loads the files (a directory stands for its `*.cfg` files in lexical order); several files
/// concatenate, each starting on a section boundary.
pub fn load(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    load_with_env(paths, lexer::Env::from_process())
}

/// [`load`], with `env` as the environment the files' `"${VAR}"` and `.if` conditions read at
/// the start (`setenv` lines change it from there).
pub fn load_with_env(paths: &[PathBuf], env: lexer::Env) -> Result<Loaded, LoadError> {
    let mut diags = Vec::new();
    if paths.is_empty() {
        diags.push(Diagnostic::alert(
            None,
            None,
            "no configuration file given (use -f FILE or -f DIRECTORY)",
        ));
    }
    let mut texts = Vec::new();
    for path in paths {
        let files = match expand_path(path) {
            Ok(files) => files,
            Err(e) => {
                diags.push(Diagnostic::alert(
                    None,
                    None,
                    format!(
                        "cannot read configuration directory '{}': {e}",
                        path.display()
                    ),
                ));
                continue;
            }
        };
        for file in files {
            match std::fs::read(&file) {
                Ok(bytes) => texts.push((file.display().to_string(), rawbytes::from_file(&bytes))),
                Err(e) => diags.push(Diagnostic::alert(
                    None,
                    None,
                    format!("cannot read configuration file '{}': {e}", file.display()),
                )),
            }
        }
    }
    load_texts(&texts, env, diags)
}

/// Loads one configuration given as text, named `name` in diagnostics (for tests and tools).
pub fn load_str(name: &str, text: &str) -> Result<Loaded, LoadError> {
    load_texts(
        &[(name.to_string(), text.to_string())],
        lexer::Env::from_process(),
        Vec::new(),
    )
}

/// Runs the whole pipeline over `(file name, text)` pairs in order, expanding variables from
/// `env` as `setenv` lines change it.
pub fn load_texts(
    texts: &[(String, String)],
    env: lexer::Env,
    mut diags: Vec<Diagnostic>,
) -> Result<Loaded, LoadError> {
    let mut parser = parser::Parser::new(env);
    for (i, (name, text)) in texts.iter().enumerate() {
        let file: Arc<str> = Arc::from(name.as_str());
        let mut lexer = lexer::Lexer::new(&file, i);
        parser.start_file();
        for (n, raw) in text.split('\n').enumerate() {
            if let Some(line) = lexer.line(n + 1, raw, parser.env(), &mut diags) {
                parser.feed(line, &mut diags);
            }
        }
        lexer.finish(&mut diags);
    }
    let parsed = parser.finish();
    let config = validate::build(parsed, &mut diags);
    diag::sort(&mut diags);
    if diags.iter().any(Diagnostic::is_error) {
        Err(LoadError { diagnostics: diags })
    } else {
        Ok(Loaded {
            config,
            warnings: diags,
        })
    }
}

#[cfg(test)]
mod tests;
