//! Process life: signals, pidfile, daemon mode, and starting the worker threads.
//! (Placeholder signature for the runtime branch to fill; replaced before anything lands.)

use crate::cli::Options;
use crate::config::model::Config;

/// Why the process could not run.
#[derive(Debug)]
pub struct RunError(pub String);

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Binds every listener, starts the workers, and blocks until the process is told to stop.
pub fn run(_config: Config, _opts: &Options) -> Result<(), RunError> {
    Err(RunError("the runtime is not written yet".into()))
}
