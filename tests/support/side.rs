//! Side-by-side runs: the same configuration and the same traffic through Debian's haproxy
//! (the reference) and through Bascule, each with a UDP log socket of its own, and what each
//! showed compared ([`both`]). `@P1@`/`@P2@` in a configuration become free ports, `@LOG@` the
//! log socket's port, `@CRT@` the directory of the test certificates (`tests/tls`) and `@SOCK@`
//! a stats socket's path.
#![allow(dead_code)]

use std::net::{TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use super::tls::fixture;
use super::{free_port, have_haproxy, TempDir, BIN, HAPROXY};

/// A proxy process (Bascule or haproxy) with its UDP log socket.
pub struct Run {
    child: Child,
    pub dir: TempDir,
    log: UdpSocket,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Run {
    /// Starts `bin` on `cfg`, where `@LOG@` becomes the log socket's port and `@CRT@` the
    /// test certificates' directory; waits until `port` accepts.
    pub fn start(bin: &str, cfg: &str, port: u16) -> Run {
        let log = UdpSocket::bind("127.0.0.1:0").unwrap();
        log.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let dir = TempDir::new("side");
        let cfg = cfg
            .replace("@LOG@", &log.local_addr().unwrap().port().to_string())
            .replace("@CRT@", fixture("").to_str().unwrap().trim_end_matches('/'))
            .replace("@SOCK@", dir.path("stats.sock").to_str().unwrap());
        let path = dir.path("p.cfg");
        std::fs::write(&path, cfg).unwrap();
        let mut child = Command::new(bin)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path("stderr")).unwrap())
            .spawn()
            .unwrap();
        for _ in 0..250 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // The probe itself is a failed handshake on a TLS port: its log line is
                // drained before the test's traffic.
                thread::sleep(Duration::from_millis(100));
                let mut run = Run { child, dir, log };
                run.lines();
                return run;
            }
            if let Ok(Some(st)) = child.try_wait() {
                panic!(
                    "{bin} exited ({st}): {}",
                    std::fs::read_to_string(dir.path("stderr")).unwrap_or_default()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("{bin} did not listen on {port}");
    }

    /// The process id (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A stats socket command's answer (the configuration's `stats socket @SOCK@`).
    pub fn cli(&self, cmd: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(self.dir.path("stats.sock")).unwrap();
        s.set_read_timeout(Some(super::IO_TIMEOUT)).unwrap();
        s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// The log lines received since the last call, once at least `n` have arrived (waiting up
    /// to [`super::LOG_WAIT`]): what the traffic so far must have logged is waited for rather
    /// than a fixed time. Lines that follow within [`Run::lines`]' quiet gap are included, so a
    /// surplus still shows.
    pub fn lines_n(&mut self, n: usize) -> Vec<String> {
        let mut out = super::recv_lines(&self.log, n, super::LOG_WAIT);
        out.extend(self.lines());
        out
    }

    /// The log lines received since the last call (`format raw`: the message alone), until
    /// none has come for 300 ms.
    pub fn lines(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.log.recv(&mut buf) {
            out.push(String::from_utf8_lossy(&buf[..n]).trim_end().to_string());
        }
        out
    }
}

/// `show stat` as read from the stats socket: its header and its lines, split on commas (no
/// field the tests read holds one).
pub struct Stat {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Run {
    /// `show stat` now.
    pub fn show_stat(&self) -> Stat {
        let stat = self.cli("show stat");
        let mut lines = stat.lines().filter(|l| !l.is_empty());
        let header = lines
            .next()
            .unwrap_or("")
            .trim_start_matches("# ")
            .split(',')
            .map(str::to_string)
            .collect();
        let rows = lines
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .filter(|r| r.len() > 2)
            .collect();
        Stat { header, rows }
    }
}

impl Stat {
    /// The value of column `col` on the line of proxy `px` and `sv` (`FRONTEND`, `BACKEND` or
    /// a server's name); empty when there is none.
    pub fn value(&self, px: &str, sv: &str, col: &str) -> String {
        let Some(i) = self.header.iter().position(|c| c == col) else {
            return String::new();
        };
        self.rows
            .iter()
            .find(|r| r[0] == px && r[1] == sv)
            .and_then(|r| r.get(i).cloned())
            .unwrap_or_default()
    }

    /// `px/sv col=value ...` with the columns `cols`, for each line whose proxy and name `keep`
    /// accepts, in `show stat`'s order.
    pub fn lines(&self, cols: &[&str], keep: impl Fn(&str, &str) -> bool) -> Vec<String> {
        self.rows
            .iter()
            .filter(|r| keep(&r[0], &r[1]))
            .map(|r| {
                let mut line = format!("{}/{}", r[0], r[1]);
                for col in cols {
                    let i = self.header.iter().position(|c| c == col);
                    let v = i.and_then(|i| r.get(i)).map_or("", String::as_str);
                    line.push_str(&format!(" {col}={v}"));
                }
                line
            })
            .collect()
    }
}

/// A log line with what legitimately differs masked: dates and client ports.
pub fn mask(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find('[') {
        let Some(j) = rest[i..].find(']') else { break };
        out.push_str(&rest[..i]);
        out.push_str("[DATE]");
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    // `127.0.0.1:PORT ` at the start of a handshake-failure line.
    match out.split_once(' ') {
        Some((addr, tail)) if addr.starts_with("127.0.0.1:") => format!("127.0.0.1:PORT {tail}"),
        _ => out,
    }
}

/// A log line as [`mask`] leaves it, with its timers (the 5th word: `Tw/Tc/Tt` or
/// `TR/Tw/Tc/Tr/Ta`) masked too: a timer that was measured (not -1) becomes `T`.
pub fn mask_timers(line: &str) -> String {
    let line = mask(line);
    let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
    if let Some(timers) = words.get_mut(4) {
        *timers = timers
            .split('/')
            .map(|t| if t == "-1" { "-1" } else { "T" })
            .collect::<Vec<_>>()
            .join("/");
    }
    words.join(" ")
}

/// Runs `cfg` (with `@P1@`, `@P2@` ports) through haproxy and Bascule and gives each to `f`.
pub fn both(test: &str, cfg: &str, mut f: impl FnMut(&str, u16, u16, &mut Run) -> Vec<String>) {
    if !have_haproxy(test) {
        return;
    }
    let mut results = Vec::new();
    for bin in [HAPROXY, BIN] {
        let (p1, p2) = (free_port(), free_port());
        let cfg = cfg
            .replace("@P1@", &p1.to_string())
            .replace("@P2@", &p2.to_string());
        let mut run = Run::start(bin, &cfg, p2);
        let seen = f(bin, p1, p2, &mut run);
        results.push(seen);
    }
    assert_eq!(
        results[0], results[1],
        "{test}: haproxy (left) and Bascule (right) differ"
    );
}
