//! Test harness: the real `bascule` binary, real sockets on 127.0.0.1, and small backends on
//! threads that count what they see.
//!
//! Ports come from binding `:0`. Every blocking call has a timeout, so a broken proxy fails a test
//! instead of hanging it, and every process and backend is stopped on drop.
#![allow(dead_code)]
// Test code blocks and locks freely: it is not a worker event loop.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub mod http;
pub mod side;
pub mod tls;

pub const BIN: &str = env!("CARGO_BIN_EXE_bascule");
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Debian's haproxy, the reference the side-by-side tests compare Bascule with.
pub const HAPROXY: &str = "/usr/sbin/haproxy";

/// Whether [`HAPROXY`] is installed. Without it a side-by-side test says "skipped" and returns;
/// under CI (which installs it) its absence fails the test instead.
pub fn have_haproxy(test: &str) -> bool {
    if std::path::Path::new(HAPROXY).exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{HAPROXY} is missing: {test} needs it in CI"
    );
    println!("skipped: {HAPROXY} not installed ({test})");
    false
}

/// A free TCP port on 127.0.0.1 for a proxy to listen on (bound then released).
///
/// Taken below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`, 32768 and up by
/// default), where `bind(:0)` would find one: every outgoing connection of the tests, the
/// proxies and the backends takes its source port from that range, so a port found there
/// could be taken by one of them before the proxy binds it ("Address already in use"). Each
/// test process starts at its own offset in 10000..32000 and never gives a port twice.
pub fn free_port() -> u16 {
    free_ports(1)
}

/// The first of `n` consecutive free ports (see [`free_port`]), all of them reserved.
pub fn free_ports(n: u16) -> u16 {
    const LOW: u32 = 10_000;
    const SPAN: u32 = 22_000;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    static NEXT: AtomicUsize = AtomicUsize::new(usize::MAX);
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    if NEXT.load(Ordering::Relaxed) == usize::MAX {
        // Spread test processes apart: the pid and the clock pick the starting point.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seed = std::process::id().wrapping_mul(7919) ^ nanos;
        NEXT.store((seed % SPAN) as usize, Ordering::Relaxed);
    }
    for _ in 0..SPAN {
        let at = NEXT.fetch_add(usize::from(n), Ordering::Relaxed) as u32 % SPAN;
        if at + u32::from(n) > SPAN {
            continue;
        }
        let first = (LOW + at) as u16;
        let ports = first..first + n;
        let free = ports
            .clone()
            .all(|p| !given.contains(&p) && TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free {
            given.extend(ports);
            return first;
        }
    }
    panic!("no free port in 127.0.0.1:{LOW}..{}", LOW + SPAN);
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "bascule-test-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `bascule` process.
pub struct Proxy {
    pub child: Child,
    pub dir: TempDir,
    pub port: u16,
}

impl Proxy {
    /// Writes `cfg` and runs `bascule -db -f cfg` plus `extra` args; waits until `port` accepts.
    pub fn start(cfg: &str, port: u16, extra: &[&str]) -> Proxy {
        let dir = TempDir::new("proxy");
        let cfg_path = dir.path("bascule.cfg");
        std::fs::write(&cfg_path, cfg).expect("write cfg");
        let child = Command::new(BIN)
            .arg("-db")
            .arg("-f")
            .arg(&cfg_path)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path("stdout")).expect("stdout file"))
            .stderr(std::fs::File::create(dir.path("stderr")).expect("stderr file"))
            .spawn()
            .expect("spawn bascule");
        let mut p = Proxy { child, dir, port };
        p.wait_listening();
        p
    }

    /// Like [`Proxy::start`]; the readiness probe's connection may reach a backend, so tests
    /// that count connections take their baseline after this returns.
    pub fn started(cfg: &str, port: u16) -> Proxy {
        Proxy::start(cfg, port, &[])
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("bascule exited early ({status}):\n{}", self.stderr());
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                // Let the probe's session reach its backend and end, so tests that count
                // connections start from a settled baseline.
                thread::sleep(Duration::from_millis(150));
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "bascule did not listen on {}:\n{}",
            self.port,
            self.stderr()
        );
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path("stderr")).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        signal(self.pid(), sig);
    }

    /// Waits for the process to exit, up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn connect(&self) -> TcpStream {
        connect(self.port)
    }

    /// Whether the process is still running.
    pub fn child_running(&self) -> bool {
        alive(self.pid())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a signal (`-USR1`, `-TERM`) with kill(1).
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill {sig} {pid} failed");
}

/// Runs `cmd` to completion, but gives up after `timeout` (the child is then killed and `None`
/// returned), so a command that should return quickly cannot hang a test.
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> Option<ExitStatus> {
    let mut child = cmd.stdin(Stdio::null()).spawn().expect("spawn a command");
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// A process that is not our child (a daemon): SIGKILLed on drop if still alive, so a failed
/// assertion does not leave it running.
pub struct PidGuard(pub u32);

impl Drop for PidGuard {
    fn drop(&mut self) {
        if alive(self.0) {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(self.0.to_string())
                .status();
        }
    }
}

/// Checks `cfg` with `bascule -c` (written to a file named `b.cfg`): whether it passed, and
/// what it said on stderr.
pub fn check_config(cfg: &str) -> (bool, String) {
    let dir = TempDir::new("check");
    std::fs::write(dir.path("b.cfg"), cfg).unwrap();
    let out = Command::new(BIN)
        .args(["-c", "-f"])
        .arg(dir.path("b.cfg"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Reads a pidfile: one decimal pid and a newline.
pub fn read_pidfile(path: &std::path::Path) -> u32 {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("pidfile {}: {e}", path.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("pidfile {} holds {text:?}: {e}", path.display()))
}

/// Whether a process is alive (and not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Open descriptors of a process.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Pipe descriptors a process opened itself: close-on-exec ones, which it cannot have inherited
/// (the test harness may pass down pipes of its own). The proxy keeps the pipes of spliced
/// transfers for reuse, so a count above 0 shows that splice(2) was used; two per pipe.
pub fn pipe_count(pid: u32) -> usize {
    const O_CLOEXEC: u32 = 0o2000000;
    let cloexec = |fd: &std::ffi::OsStr| {
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.to_string_lossy()));
        info.ok()
            .and_then(|i| {
                let flags = i.lines().find_map(|l| l.strip_prefix("flags:"))?;
                u32::from_str_radix(flags.trim(), 8).ok()
            })
            .is_some_and(|f| f & O_CLOEXEC != 0)
    };
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|t| t.to_string_lossy().starts_with("pipe:"))
                })
                .filter(|e| cloexec(&e.file_name()))
                .count()
        })
        .unwrap_or(0)
}

/// Connects to 127.0.0.1:port with I/O timeouts set.
pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), IO_TIMEOUT)
        .expect("connect to proxy");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Reads until EOF (or the read timeout).
pub fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut v = Vec::new();
    let _ = s.read_to_end(&mut v);
    v
}

/// What a backend does with each connection.
#[derive(Clone)]
pub enum Behaviour {
    /// Writes its name and closes.
    Banner(String),
    /// Echoes everything until EOF, then closes.
    Echo,
    /// Reads until EOF, then writes this many bytes and closes.
    ReplyAfterEof(usize),
    /// Records the first line received, then writes "ok" and closes.
    RecordFirstLine,
    /// Writes "hello", shuts its write side, then records what it reads until EOF.
    HalfCloseThenRead,
    /// Holds the connection open without reading until the test releases it.
    Hold,
}

/// A backend server on its own thread.
pub struct Backend {
    pub port: u16,
    pub accepted: Arc<AtomicUsize>,
    pub open: Arc<AtomicUsize>,
    pub received: Arc<Mutex<Vec<Vec<u8>>>>,
    pub release: Arc<AtomicBool>,
    /// Held connections still allowed to finish one by one ([`Backend::release_one`]).
    release_tokens: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Backend {
    pub fn start(behaviour: Behaviour) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("backend bind");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(AtomicBool::new(false));
        let release_tokens = Arc::new(AtomicUsize::new(0));
        let tokens = release_tokens.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let (a, o, r, rel, st) = (
            accepted.clone(),
            open.clone(),
            received.clone(),
            release.clone(),
            stop.clone(),
        );
        let thread = thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        a.fetch_add(1, Ordering::SeqCst);
                        o.fetch_add(1, Ordering::SeqCst);
                        let (b, o, r) = (behaviour.clone(), o.clone(), r.clone());
                        let release = Release {
                            all: rel.clone(),
                            tokens: tokens.clone(),
                        };
                        thread::spawn(move || {
                            serve(conn, &b, &r, &release);
                            o.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
            // Dropping the listener here closes the port: later connects are refused.
        });
        Backend {
            port,
            accepted,
            open,
            received,
            release,
            release_tokens,
            stop,
            thread: Some(thread),
        }
    }

    /// Echoes everything until EOF.
    pub fn echo() -> Backend {
        Backend::start(Behaviour::Echo)
    }

    /// Writes `name`, then closes.
    pub fn banner(name: &str) -> Backend {
        Backend::start(Behaviour::Banner(name.to_string()))
    }

    /// Reads to EOF (recording what it read), then writes `n` bytes and closes.
    pub fn reply_after_eof(n: usize) -> Backend {
        Backend::start(Behaviour::ReplyAfterEof(n))
    }

    /// Holds each connection open until [`Backend::release_all`] or [`Backend::release_one`] (then
    /// writes `released` and closes).
    pub fn hold() -> Backend {
        Backend::start(Behaviour::Hold)
    }

    /// Lets every held connection (current and future) answer and close.
    pub fn release_all(&self) {
        self.release.store(true, Ordering::SeqCst);
    }

    /// Lets exactly one held connection (whichever notices first) answer and close.
    pub fn release_one(&self) {
        self.release_tokens.fetch_add(1, Ordering::SeqCst);
    }

    /// Connections currently open at this backend.
    pub fn open_now(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// What each connection sent, for the behaviours that record it, in arrival order.
    pub fn received(&self) -> Vec<Vec<u8>> {
        self.received.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Stops accepting and closes the listening socket.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.release.store(true, Ordering::Relaxed);
        self.stop();
    }
}

/// When held connections may finish: all at once, or one per token.
struct Release {
    all: Arc<AtomicBool>,
    tokens: Arc<AtomicUsize>,
}

impl Release {
    fn now(&self) -> bool {
        self.all.load(Ordering::SeqCst)
            || self
                .tokens
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| t.checked_sub(1))
                .is_ok()
    }
}

fn serve(mut conn: TcpStream, b: &Behaviour, rec: &Mutex<Vec<Vec<u8>>>, release: &Release) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    conn.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    match b {
        Behaviour::Banner(name) => {
            let _ = conn.write_all(name.as_bytes());
        }
        Behaviour::Echo => {
            let mut buf = [0u8; 16384];
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 || conn.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
        Behaviour::ReplyAfterEof(n) => {
            let got = read_all(&mut conn);
            rec.lock().unwrap().push(got);
            let _ = conn.write_all(&vec![b'x'; *n]);
        }
        Behaviour::RecordFirstLine => {
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            while let Ok(1) = conn.read(&mut byte) {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    break;
                }
            }
            rec.lock().unwrap().push(line);
            let _ = conn.write_all(b"ok");
        }
        Behaviour::HalfCloseThenRead => {
            let _ = conn.write_all(b"hello");
            let _ = conn.shutdown(Shutdown::Write);
            let got = read_all(&mut conn);
            rec.lock().unwrap().push(got);
        }
        Behaviour::Hold => {
            // Hold until released; a peer that closes first ends the hold.
            conn.set_read_timeout(Some(Duration::from_millis(10)))
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut buf = [0u8; 64];
            while Instant::now() < deadline {
                if release.now() {
                    let _ = conn.write_all(b"released");
                    return;
                }
                match conn.read(&mut buf) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return,
                }
            }
        }
    }
}

/// Waits until `cond` holds, up to `timeout`.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// How long a test waits for log lines its traffic must have produced: long enough for a
/// loaded machine, and only ever spent when a line is missing.
pub const LOG_WAIT: Duration = Duration::from_secs(10);

/// Receives datagrams on `sock` until `n` have arrived or `timeout` has passed (then fewer are
/// returned, for the test's assertion to show), each as text without trailing whitespace. The
/// socket's read timeout is restored.
///
/// Workers flush their log lines independently, so lines of connections served by different
/// workers may arrive in either order: a test compares such lines sorted, or waits for one
/// connection's lines before it opens the next.
pub fn recv_lines(sock: &UdpSocket, n: usize, timeout: Duration) -> Vec<String> {
    let before = sock.read_timeout().ok().flatten();
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while out.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        sock.set_read_timeout(Some(left)).unwrap();
        match sock.recv(&mut buf) {
            Ok(len) => out.push(String::from_utf8_lossy(&buf[..len]).trim_end().to_string()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            Err(e) => panic!("receiving log lines: {e}"),
        }
    }
    sock.set_read_timeout(before).unwrap();
    out
}

/// The usual defaults section for TCP tests.
pub fn tcp_defaults() -> &'static str {
    "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 10s\n    timeout server 10s\n"
}

/// Waits until the proxy whose stats socket is `cli` holds no client connection (`show info`
/// says `CurrConns: 0`), so that a scenario's counters start from zero; false after `timeout`.
pub fn settle(cli: &std::path::Path, timeout: Duration) -> bool {
    eventually(timeout, || {
        let Ok(mut s) = std::os::unix::net::UnixStream::connect(cli) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = s.write_all(b"show info\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.lines().any(|l| l == "CurrConns: 0")
    })
}
