//! The command line, in HAProxy's style.
//!
//! HAProxy's flags are not POSIX-shaped: `-sf` and `-st` are two-letter flags that take every
//! following word that does not start with `-`, `-vv` is not `-v -v`, and `-db` is not `-d -b`.
//! A derive-based parser (clap) would need a pre-pass to rewrite them, so this small module reads
//! the words itself. It only turns words into [`Options`]; it opens no file.

use std::ffi::OsString;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Load the configuration and run the load balancer.
    Run,
    /// `-c`: check the configuration and exit.
    Check,
    /// `-v` / `-vv`: print the version (with build details for `-vv`) and exit.
    Version { verbose: bool },
    /// `-h`: print the usage and exit.
    Help,
    /// `-cc EXPR`: evaluate a condition (the `.if` language) and exit 0 if true, 1 if false, 2
    /// if it cannot be evaluated.
    CheckCondition(String),
    /// `--explain`: load the configuration, run one request through the frontend's rules
    /// (described by [`Options::explain`]) without opening a socket, print every rule
    /// evaluated and the outcome, and exit.
    Explain,
}

/// Where `--explain` reads the request from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestSource {
    /// `--request 'METHOD TARGET HTTP/1.x'` and its `-H 'Name: value'` lines.
    Line { line: String, headers: Vec<String> },
    /// `--request-file PATH` (`-`: standard input): a raw request head.
    File(PathBuf),
}

/// What `--explain` runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExplainArgs {
    pub request: Option<RequestSource>,
    /// `--response 'HTTP/1.1 200 OK'` and the `-H` lines after it: a server's answer for the
    /// `http-response` and `http-after-response` rules.
    pub response: Option<(String, Vec<String>)>,
    /// `--src ADDR[:PORT]`: the client (default 127.0.0.1, port 0).
    pub src: Option<SocketAddr>,
    /// `--dst ADDR:PORT`: the address the client connected to (default: the frontend's first
    /// `bind` address).
    pub dst: Option<SocketAddr>,
    /// `--frontend NAME` (default: the first HTTP frontend).
    pub frontend: Option<String>,
    /// `--down BACKEND/SERVER`, repeatable: servers taken as DOWN (the others are UP).
    pub down: Vec<(String, String)>,
}

/// Which signal `-sf` / `-st` sends to the older processes once we listen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldProcessSignal {
    /// `-sf`: SIGUSR1, finish the live connections and exit.
    Finish,
    /// `-st`: SIGTERM, exit now.
    Terminate,
}

/// Everything the command line says, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub action: Action,
    /// `-f FILE|DIR`, repeatable, and the words after `--`, in order.
    pub config_files: Vec<PathBuf>,
    /// `-d`: foreground, debug output on stderr.
    pub debug: bool,
    /// `-db`: foreground, no debug output.
    pub foreground: bool,
    /// `-D`: run as a daemon.
    pub daemon: bool,
    /// `-p FILE`: write the PID there.
    pub pidfile: Option<PathBuf>,
    /// `-q`: no warnings or informational messages.
    pub quiet: bool,
    /// `-dW`: turn configuration warnings into a failure.
    pub zero_warning: bool,
    /// `-n N`: global maxconn, overrides the configuration.
    pub maxconn: Option<u32>,
    /// `-C DIR`: change to this directory before loading the files.
    pub chdir: Option<PathBuf>,
    /// `-sf PID...` / `-st PID...`.
    pub old_pids: Option<(OldProcessSignal, Vec<i32>)>,
    /// `-L NAME`: the local peer name, exported to the configuration as `${HAPROXY_LOCALPEER}`
    /// (the host name when not given). Bascule has no `peers` sections yet, so that variable is
    /// its only use.
    pub local_peer: Option<String>,
    /// `-m MB`: cap on the process's data memory, applied as RLIMIT_DATA at start.
    pub memory_limit_mb: Option<u64>,
    /// `-dM[...]`: HAProxy's memory-pool debugging (poisoning). Accepted for compatibility; it
    /// has no effect because Bascule has no memory pools to poison.
    pub debug_memory: bool,
    /// `-dI`: HAProxy's "insecure fork wanted". Accepted for compatibility; it has no effect
    /// because Bascule never forks once it runs (no external checks, no Lua).
    pub insecure_fork: bool,
    /// `--explain` and its flags.
    pub explain: ExplainArgs,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            action: Action::Run,
            config_files: Vec::new(),
            debug: false,
            foreground: false,
            daemon: false,
            pidfile: None,
            quiet: false,
            zero_warning: false,
            maxconn: None,
            chdir: None,
            old_pids: None,
            local_peer: None,
            memory_limit_mb: None,
            debug_memory: false,
            insecure_fork: false,
            explain: ExplainArgs::default(),
        }
    }
}

/// A command line Bascule cannot act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The text printed by `-h` and after a usage error.
pub const USAGE: &str = "\
Usage : bascule [-f <cfgfile|cfgdir>]* [ -vdVD ] [ -n <maxconn> ] [ -p <pidfile> ]
        [ -m <max megs> ] [ -L <name> ] [ -sf <pid>* ] [ -st <pid>* ] [ -C <dir> ]
        [ -cc <condition> ] [-- <cfgfile>*]
        bascule --explain -f <cfgfile> --request '<METHOD> <TARGET> HTTP/1.1' [-H '<Name: value>']*
        [ --request-file <file|-> ] [ --src <addr[:port]> ] [ --dst <addr:port> ]
        [ --frontend <name> ] [ --down <backend/server> ]*
        [ --response 'HTTP/1.1 <status> <reason>' [-H '<Name: value>']* ]
        -v displays version ; -vv shows build options and the feature list.
        -h displays this help
        -d enters debug mode (foreground, traces on stderr; never forks) ; -db only disables
           background mode.
        -dW fails if any warning is emitted
        -dM[<byte>][,...] accepted for HAProxy compatibility; no effect (no memory pools here)
        -dI accepted for HAProxy compatibility; no effect (Bascule never forks once running)
        -D goes daemon ; -C changes to <dir> before loading files.
        -p writes the pid to <pidfile>
        -q quiet mode : don't display messages
        -c check mode : only check config files and exit
        -cc check condition : evaluate a '.if' condition and exit (0 true, 1 false, 2 error)
        -n sets the maximum total # of connections (uses ulimit -n)
        -m caps the process's data memory at <max megs> MB (RLIMIT_DATA; past it, an
           allocation aborts the process)
        -L sets the local peer name (default: host name), seen as ${HAPROXY_LOCALPEER}
        -sf/-st [pid ]* finishes/terminates old pids once listening.
        -- ends options; the remaining words are configuration files.
        --explain runs one request through the rules (no socket is opened) and prints each
           rule evaluated, its condition's value and effect, the backend and server chosen.
";

/// `--src 10.0.0.1`, `--src 10.0.0.1:4000`, `--dst [::1]:80`.
fn addr_value(v: &str, flag: &str, port_needed: bool) -> Result<SocketAddr, UsageError> {
    if let Ok(a) = v.parse::<SocketAddr>() {
        return Ok(a);
    }
    match v.parse::<IpAddr>() {
        Ok(ip) if !port_needed => Ok(SocketAddr::new(ip, 0)),
        _ => Err(UsageError(format!(
            "option '{flag}' expects an address{}, got '{v}'",
            if port_needed { " and port" } else { "" }
        ))),
    }
}

fn take_value(
    words: &mut std::iter::Peekable<impl Iterator<Item = String>>,
    flag: &str,
) -> Result<String, UsageError> {
    words
        .next()
        .ok_or_else(|| UsageError(format!("option '{flag}' needs an argument")))
}

/// Reads the words after the program name.
pub fn parse<I>(args: I) -> Result<Options, UsageError>
where
    I: IntoIterator<Item = OsString>,
{
    let words: Vec<String> = args
        .into_iter()
        .map(|w| {
            w.into_string()
                .map_err(|w| UsageError(format!("argument {w:?} is not valid UTF-8")))
        })
        .collect::<Result<_, _>>()?;
    let mut words = words.into_iter().peekable();
    let mut opts = Options::default();
    let mut version = None;
    // A flag that only `--explain` reads was given.
    let mut explain_flag = false;

    while let Some(word) = words.next() {
        match word.as_str() {
            "--" => {
                opts.config_files.extend(words.by_ref().map(PathBuf::from));
            }
            "-f" => opts
                .config_files
                .push(PathBuf::from(take_value(&mut words, "-f")?)),
            "-c" => opts.action = Action::Check,
            "-d" => opts.debug = true,
            "-db" => opts.foreground = true,
            "-dW" => opts.zero_warning = true,
            "-D" => opts.daemon = true,
            "-q" => opts.quiet = true,
            "-V" => opts.quiet = false,
            "-v" => version = Some(false),
            "-vv" => version = Some(true),
            "-h" | "--help" => opts.action = Action::Help,
            "-p" => opts.pidfile = Some(PathBuf::from(take_value(&mut words, "-p")?)),
            "-C" => opts.chdir = Some(PathBuf::from(take_value(&mut words, "-C")?)),
            "-n" => {
                let v = take_value(&mut words, "-n")?;
                let n = v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    UsageError(format!("option '-n' expects a positive integer, got '{v}'"))
                })?;
                opts.maxconn = Some(n);
            }
            "-sf" | "-st" => {
                let signal = if word == "-sf" {
                    OldProcessSignal::Finish
                } else {
                    OldProcessSignal::Terminate
                };
                let mut pids = Vec::new();
                while let Some(next) = words.next_if(|w| !w.starts_with('-')) {
                    // HAProxy accepts the pids as several words or one word with spaces
                    // (`-sf $(cat pidfile)` with several lines).
                    for p in next.split_whitespace() {
                        let pid = p.parse::<i32>().ok().filter(|p| *p > 0).ok_or_else(|| {
                            UsageError(format!("option '{word}' expects process ids, got '{p}'"))
                        })?;
                        pids.push(pid);
                    }
                }
                opts.old_pids = Some((signal, pids));
            }
            "-cc" => opts.action = Action::CheckCondition(take_value(&mut words, "-cc")?),
            "-L" => {
                let v = take_value(&mut words, "-L")?;
                if v.is_empty() {
                    return Err(UsageError("option '-L' expects a non-empty name".into()));
                }
                opts.local_peer = Some(v);
            }
            "-m" => {
                let v = take_value(&mut words, "-m")?;
                let n = v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    UsageError(format!(
                        "option '-m' expects a positive number of megabytes, got '{v}'"
                    ))
                })?;
                opts.memory_limit_mb = Some(n);
            }
            "--explain" => opts.action = Action::Explain,
            "--request" => {
                let line = take_value(&mut words, "--request")?;
                let x = &mut opts.explain;
                if x.request.is_some() {
                    return Err(UsageError("only one --request or --request-file".into()));
                }
                x.request = Some(RequestSource::Line {
                    line,
                    headers: Vec::new(),
                });
                explain_flag = true;
            }
            "--request-file" => {
                let path = PathBuf::from(take_value(&mut words, "--request-file")?);
                if opts.explain.request.is_some() {
                    return Err(UsageError("only one --request or --request-file".into()));
                }
                opts.explain.request = Some(RequestSource::File(path));
                explain_flag = true;
            }
            "--response" => {
                let line = take_value(&mut words, "--response")?;
                opts.explain.response = Some((line, Vec::new()));
                explain_flag = true;
            }
            "-H" => {
                let h = take_value(&mut words, "-H")?;
                if !h.contains(':') {
                    return Err(UsageError(format!(
                        "option '-H' expects 'Name: value', got '{h}'"
                    )));
                }
                let x = &mut opts.explain;
                match (&mut x.response, &mut x.request) {
                    (Some((_, headers)), _) | (None, Some(RequestSource::Line { headers, .. })) => {
                        headers.push(h)
                    }
                    _ => {
                        return Err(UsageError(
                            "option '-H' follows --request or --response".into(),
                        ))
                    }
                }
            }
            "--src" => {
                let v = take_value(&mut words, "--src")?;
                opts.explain.src = Some(addr_value(&v, "--src", false)?);
                explain_flag = true;
            }
            "--dst" => {
                let v = take_value(&mut words, "--dst")?;
                opts.explain.dst = Some(addr_value(&v, "--dst", true)?);
                explain_flag = true;
            }
            "--frontend" => {
                opts.explain.frontend = Some(take_value(&mut words, "--frontend")?);
                explain_flag = true;
            }
            "--down" => {
                let v = take_value(&mut words, "--down")?;
                let Some((be, srv)) = v
                    .split_once('/')
                    .filter(|(b, s)| !b.is_empty() && !s.is_empty())
                else {
                    return Err(UsageError(format!(
                        "option '--down' expects BACKEND/SERVER, got '{v}'"
                    )));
                };
                opts.explain.down.push((be.to_string(), srv.to_string()));
                explain_flag = true;
            }
            "-dI" => opts.insecure_fork = true,
            dm if dm.starts_with("-dM") => opts.debug_memory = true,
            "-W" | "-Ws" | "-S" | "-x" | "-N" => {
                return Err(UsageError(format!(
                    "option '{word}' is a HAProxy option that Bascule does not support yet"
                )));
            }
            other if other.starts_with('-') => {
                return Err(UsageError(format!("unknown option '{other}'")));
            }
            // HAProxy takes a bare word after the options as a configuration file too.
            other => opts.config_files.push(PathBuf::from(other)),
        }
    }

    if let Some(verbose) = version {
        if !matches!(opts.action, Action::CheckCondition(_)) {
            opts.action = Action::Version { verbose };
        }
    }
    if opts.action == Action::Explain && opts.explain.request.is_none() {
        return Err(UsageError(
            "--explain needs a request: --request 'GET / HTTP/1.1' or --request-file".into(),
        ));
    }
    if explain_flag && opts.action != Action::Explain {
        return Err(UsageError(
            "--request, --src, --dst, --frontend, --down and --response go with --explain".into(),
        ));
    }
    if matches!(opts.action, Action::Run | Action::Check | Action::Explain)
        && opts.config_files.is_empty()
    {
        return Err(UsageError(
            "no configuration file given: use -f <cfgfile|cfgdir>".to_string(),
        ));
    }
    Ok(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(line: &str) -> Result<Options, UsageError> {
        parse(line.split_whitespace().map(OsString::from))
    }

    #[test]
    fn files_and_check() {
        let o = parse_str("-c -f a.cfg -f dir -- b.cfg c.cfg").unwrap();
        assert_eq!(o.action, Action::Check);
        assert_eq!(
            o.config_files,
            ["a.cfg", "dir", "b.cfg", "c.cfg"]
                .iter()
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn soft_finish_takes_pids_until_next_flag() {
        let o = parse_str("-f x.cfg -sf 10 11 -p /tmp/p -d").unwrap();
        assert_eq!(o.old_pids, Some((OldProcessSignal::Finish, vec![10, 11])));
        assert_eq!(o.pidfile, Some(PathBuf::from("/tmp/p")));
        assert!(o.debug);
        let o = parse_str("-f x.cfg -st 7").unwrap();
        assert_eq!(o.old_pids, Some((OldProcessSignal::Terminate, vec![7])));
    }

    #[test]
    fn two_letter_flags_are_not_bundles() {
        let o = parse_str("-f x.cfg -db -dW").unwrap();
        assert!(o.foreground && o.zero_warning && !o.debug);
        assert_eq!(
            parse_str("-vv").unwrap().action,
            Action::Version { verbose: true }
        );
        assert_eq!(
            parse_str("-v").unwrap().action,
            Action::Version { verbose: false }
        );
    }

    #[test]
    fn harness_flags() {
        let o = parse_str("-d -L A -m 512 -dM -dM0x55,no-merge -dI -f x.cfg").unwrap();
        assert!(o.debug && o.debug_memory && o.insecure_fork);
        assert_eq!(o.local_peer.as_deref(), Some("A"));
        assert_eq!(o.memory_limit_mb, Some(512));
        // -cc needs no configuration file.
        let o = parse_str("-cc version_atleast(2.5-dev0)").unwrap();
        assert_eq!(
            o.action,
            Action::CheckCondition("version_atleast(2.5-dev0)".into())
        );
        assert!(parse_str("-cc").unwrap_err().0.contains("'-cc' needs"));
        assert!(parse_str("-f x -m 0").unwrap_err().0.contains("megabytes"));
        assert!(parse_str("-f x -m lots").unwrap_err().0.contains("'lots'"));
        assert!(parse_str("-f x -L").unwrap_err().0.contains("'-L' needs"));
    }

    #[test]
    fn explain_flags() {
        let o = parse(
            [
                "--explain",
                "-f",
                "x.cfg",
                "--request",
                "GET /a HTTP/1.1",
                "-H",
                "Host: x",
                "--src",
                "10.0.0.1",
                "--dst",
                "127.0.0.1:80",
                "--down",
                "be/s1",
                "--response",
                "HTTP/1.1 200 OK",
                "-H",
                "Server: y",
                "--frontend",
                "web",
            ]
            .map(OsString::from),
        )
        .unwrap();
        assert_eq!(o.action, Action::Explain);
        let x = &o.explain;
        assert_eq!(
            x.request,
            Some(RequestSource::Line {
                line: "GET /a HTTP/1.1".into(),
                headers: vec!["Host: x".into()]
            })
        );
        assert_eq!(
            x.response,
            Some(("HTTP/1.1 200 OK".into(), vec!["Server: y".into()]))
        );
        assert_eq!(x.src, Some("10.0.0.1:0".parse().unwrap()));
        assert_eq!(x.dst, Some("127.0.0.1:80".parse().unwrap()));
        assert_eq!(x.down, [("be".to_string(), "s1".to_string())]);
        assert_eq!(x.frontend.as_deref(), Some("web"));
        assert!(parse_str("--explain -f x")
            .unwrap_err()
            .0
            .contains("needs a request"));
        assert!(parse_str("-f x --src 1.2.3.4")
            .unwrap_err()
            .0
            .contains("go with --explain"));
        assert!(parse_str("--explain -f x --request-file r --dst 1.2.3.4")
            .unwrap_err()
            .0
            .contains("address and port"));
        assert!(parse_str("--explain -f x --request-file r -H a:b")
            .unwrap_err()
            .0
            .contains("follows --request"));
        assert!(parse_str("--explain -f x --request-file r --down be")
            .unwrap_err()
            .0
            .contains("BACKEND/SERVER"));
    }

    #[test]
    fn errors_are_named() {
        assert!(parse_str("-c")
            .unwrap_err()
            .0
            .contains("no configuration file"));
        assert!(parse_str("-f")
            .unwrap_err()
            .0
            .contains("'-f' needs an argument"));
        assert!(parse_str("-f x -sf abc").unwrap_err().0.contains("abc"));
        assert!(parse_str("-f x -W")
            .unwrap_err()
            .0
            .contains("does not support yet"));
        assert!(parse_str("-f x --bogus")
            .unwrap_err()
            .0
            .contains("unknown option"));
        assert!(parse_str("-f x -n 0").unwrap_err().0.contains("positive"));
    }
}
