//! The `bascule` binary: read the command line, load the configuration, run.
//!
//! Everything lives in the library; this file only turns outcomes into messages and exit codes
//! (0: ran and stopped cleanly, or the check passed; 1: the configuration or the start failed;
//! 2: the command line was wrong).

use std::process::ExitCode;

use bascule::cli::{self, Action};
use bascule::config;
use bascule::runtime::process;

fn main() -> ExitCode {
    let opts = match cli::parse(std::env::args_os().skip(1)) {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("bascule: {e}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    match &opts.action {
        Action::Help => {
            print!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Action::Version { verbose } => {
            print!("{}", bascule::version_text(*verbose));
            return ExitCode::SUCCESS;
        }
        Action::CheckCondition(expr) => {
            let env = startup_env(&opts);
            return match config::cond::eval(expr, &env) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("bascule: -cc: {e}");
                    ExitCode::from(2)
                }
            };
        }
        Action::Check | Action::Run => {}
    }
    if let Some(dir) = &opts.chdir {
        if let Err(e) = std::env::set_current_dir(dir) {
            eprintln!(
                "bascule: cannot change to directory '{}': {e}",
                dir.display()
            );
            return ExitCode::FAILURE;
        }
    }

    let mut loaded = match config::load_with_env(&opts.config_files, startup_env(&opts)) {
        Ok(loaded) => loaded,
        Err(e) => {
            for d in &e.diagnostics {
                if d.is_error() || !opts.quiet {
                    eprintln!("{d}");
                }
            }
            eprintln!("bascule: configuration has errors, exiting.");
            return ExitCode::FAILURE;
        }
    };
    if !opts.quiet {
        for w in &loaded.warnings {
            eprintln!("{w}");
        }
    }
    if opts.zero_warning && loaded.warnings.iter().any(config::Diagnostic::is_warning) {
        eprintln!("bascule: warnings emitted while -dW (zero-warning mode) is set, exiting.");
        return ExitCode::FAILURE;
    }
    if let Some(n) = opts.maxconn {
        loaded.config.global.maxconn = Some(n);
    }

    if opts.action == Action::Check {
        println!("Configuration file is valid");
        return ExitCode::SUCCESS;
    }

    match process::run(loaded.config, &opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bascule: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The environment the configuration starts from: the process's, plus the variables HAProxy
/// defines for it (`HAPROXY_LOCALPEER`: the `-L` name, else the host name).
fn startup_env(opts: &cli::Options) -> config::lexer::Env {
    let mut env = config::lexer::Env::from_process();
    let peer = opts.local_peer.clone().or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
    });
    if let Some(peer) = peer {
        env.set("HAPROXY_LOCALPEER", &peer);
    }
    env
}
