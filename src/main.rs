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
            // As HAProxy reads it: words of a configuration line (quotes, `\`, `${VAR}`),
            // joined by one space.
            let text = match config::lexer::split_words(expr, &env) {
                Ok(words) => words.join(" "),
                Err(e) => {
                    eprintln!("bascule: -cc: syntax error in condition: {e}");
                    return ExitCode::from(2);
                }
            };
            return match config::cond::eval(&text, &env) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("bascule: -cc: {e}");
                    ExitCode::from(2)
                }
            };
        }
        Action::Check | Action::Run | Action::Explain => {}
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
    if opts.action == Action::Explain {
        return explain(loaded.config, &opts.explain);
    }

    match process::run(loaded.config, &opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bascule: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--explain`: runs the request through the configuration and prints the report (exit 0);
/// a request file that cannot be read, or a frontend, backend or server the configuration
/// does not have, is a command-line error (exit 2).
fn explain(config: config::model::Config, args: &cli::ExplainArgs) -> ExitCode {
    use bascule::http;
    use std::io::Read;
    let request = match &args.request {
        Some(cli::RequestSource::Line { line, headers }) => http::head_from_lines(line, headers),
        Some(cli::RequestSource::File(path)) => {
            let mut buf = Vec::new();
            let read = if path.as_os_str() == "-" {
                std::io::stdin().read_to_end(&mut buf).map(|_| buf)
            } else {
                std::fs::read(path)
            };
            match read {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("bascule: --request-file '{}': {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        }
        None => return ExitCode::from(2),
    };
    let input = http::ExplainInput {
        request,
        response: args
            .response
            .as_ref()
            .map(|(line, headers)| http::head_from_lines(line, headers)),
        src: args
            .src
            .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        dst: args.dst,
        frontend: args.frontend.clone(),
        down: args.down.clone(),
    };
    match http::explain(config, &input) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bascule: --explain: {e}");
            ExitCode::from(2)
        }
    }
}

/// The environment the configuration starts from: the process's, plus the variables HAProxy
/// defines for it (`HAPROXY_LOCALPEER`: the `-L` name, else the host name).
fn startup_env(opts: &cli::Options) -> config::lexer::Env {
    let mut env = config::lexer::Env::from_process();
    if let Some(peer) = &opts.local_peer {
        env.set_local_peer_from_cli(peer);
    } else if let Some(host) = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
    {
        env.set("HAPROXY_LOCALPEER", &host);
    }
    env
}
