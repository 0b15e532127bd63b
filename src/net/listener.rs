//! Listening sockets and connection limits.
//!
//! Each `bind` address becomes one socket, bound once by the process (so bind errors show before
//! it daemonizes) and shared by every worker: each worker registers its own duplicate of the
//! descriptor in its own event loop. One shared socket, rather than one `SO_REUSEPORT` socket per
//! worker, keeps `maxconn` exact: a worker that is at a limit simply does not accept, and the
//! connection waits in the one backlog for whichever worker frees a slot first, instead of being
//! hashed by the kernel to a queue that nobody drains. `SO_REUSEPORT` is still set so that a new
//! process started with `-sf` can bind the same addresses while the old one still listens.
//!
//! A UNIX stream socket (`unix@PATH`, `abns@NAME`) is bound as HAProxy binds it: to a temporary
//! name `PATH.PID.tmp` whose file gets the bind's `mode` and owner, then renamed over `PATH` in
//! one step, so a client never finds the path missing or with the wrong permissions, and a
//! stale socket file left by an earlier process is replaced. The previous file is kept as
//! `PATH.PID.bak` until the rename succeeded and put back if it failed. As with HAProxy, the
//! file stays when the process exits (a process taking over with `-sf` has renamed its own over
//! it by then).
//!
//! Limits are checked before `accept`: a worker waits until the listener is readable, takes a
//! slot from every applicable [`Limit`] (global, frontend, bind), and only then accepts. Over a
//! limit nothing is accepted, so excess connections wait in the kernel's backlog, as with
//! HAProxy, instead of being accepted and dropped.

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::Notify;

use crate::config::model::{Bind, ListenAddr, UnixAddr, UnixPerms};

/// A listening stream socket: TCP, or UNIX (its connections are `net::stream::Stream::Unix`).
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    /// Another descriptor of the same socket (one per worker).
    pub fn try_clone(&self) -> io::Result<Listener> {
        Ok(match self {
            Listener::Tcp(l) => Listener::Tcp(l.try_clone()?),
            Listener::Unix(l) => Listener::Unix(l.try_clone()?),
        })
    }

    /// Whether the connections it accepts are UNIX sockets.
    pub fn is_unix(&self) -> bool {
        matches!(self, Listener::Unix(_))
    }

    /// The listening descriptor, for the reactor.
    pub fn into_fd(self) -> OwnedFd {
        match self {
            Listener::Tcp(l) => l.into(),
            Listener::Unix(l) => l.into(),
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Listener::Tcp(l) => l.as_fd(),
            Listener::Unix(l) => l.as_fd(),
        }
    }
}

/// A bound, listening socket and the frontend it belongs to.
#[derive(Debug)]
pub struct BoundListener {
    pub frontend: usize,
    /// Index of the bind in the frontend's `binds`.
    pub bind: usize,
    pub socket: Listener,
}

/// Binds and listens on `bind.addr`, or adopts the inherited socket of an `fd@N` bind.
/// `default_backlog` applies when the bind sets none.
pub fn bind(bind: &Bind, default_backlog: u32) -> io::Result<Listener> {
    let backlog = bind.backlog.unwrap_or(default_backlog).min(i32::MAX as u32) as i32;
    let addr = match &bind.addr {
        ListenAddr::Inet(addr) => *addr,
        ListenAddr::Fd(fd) => return adopt(*fd, bind.backlog),
        ListenAddr::Unix(u) => return bind_unix(u, bind.unix_perms, backlog).map(Listener::Unix),
    };
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if addr.is_ipv6() {
        // Linux's default (bindv6only=0) lets an IPv6 wildcard take IPv4 too; `v6only` turns that
        // off and `v4v6` forces it on.
        if bind.v6only {
            socket.set_only_v6(true)?;
        } else if bind.v4v6 {
            socket.set_only_v6(false)?;
        }
    }
    if bind.transparent {
        socket.set_ip_transparent(true)?;
    }
    socket.set_nonblocking(true)?;
    // Accepted sockets inherit it: no Nagle delay on client connections (a response goes out
    // in one write), without a system call per connection.
    socket.set_nodelay(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(Listener::Tcp(socket.into()))
}

/// Binds and listens on a UNIX stream socket, HAProxy's way (see the module doc): a path
/// through a temporary name that gets `perms` and is renamed into place; an abstract name
/// directly (padded as HAProxy pads it, and without a file to own).
pub fn bind_unix(addr: &UnixAddr, perms: UnixPerms, backlog: i32) -> io::Result<UnixListener> {
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    socket.set_nonblocking(true)?;
    let path = match addr {
        UnixAddr::Abstract(_) => {
            socket.bind(&crate::net::stream::unix_sockaddr(addr)?)?;
            socket.listen(backlog)?;
            return Ok(UnixListener::from(OwnedFd::from(socket)));
        }
        UnixAddr::Path(p) => p,
    };
    let pid = std::process::id();
    let temp = suffixed(path, &format!(".{pid}.tmp"));
    let back = suffixed(path, &format!(".{pid}.bak"));
    // Bytes for the name and its terminating NUL (`sun_path` is 108 bytes on Linux).
    if temp.as_os_str().len() >= 108 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "name too long for UNIX socket (limit usually 97)",
        ));
    }
    let gone_ok = |r: io::Result<()>| match r {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    gone_ok(std::fs::remove_file(&temp))?;
    gone_ok(std::fs::remove_file(&back))?;
    gone_ok(std::fs::hard_link(path, &back)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot preserve the previous UNIX socket: {e}"),
        )
    })?;
    let cleanup = |also_temp: bool| {
        if also_temp {
            let _ = std::fs::remove_file(&temp);
        }
        let _ = std::fs::remove_file(&back);
    };
    if let Err(e) = socket.bind(&socket2::SockAddr::unix(&temp)?) {
        cleanup(false);
        return Err(e);
    }
    let owned = perms.uid.is_some() || perms.gid.is_some();
    let applied = (|| {
        if owned {
            std::os::unix::fs::chown(&temp, perms.uid, perms.gid)?;
        }
        if let Some(mode) = perms.mode {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(mode))?;
        }
        Ok::<(), io::Error>(())
    })();
    if let Err(e) = applied {
        cleanup(true);
        return Err(io::Error::new(
            e.kind(),
            format!("cannot change UNIX socket ownership ({e})"),
        ));
    }
    if let Err(e) = socket.listen(backlog) {
        cleanup(true);
        return Err(e);
    }
    if let Err(e) = std::fs::rename(&temp, path) {
        // Put the previous socket back where it was.
        if std::fs::rename(&back, path).is_err() {
            let _ = std::fs::remove_file(path);
        }
        cleanup(true);
        return Err(io::Error::new(
            e.kind(),
            format!("cannot switch final and temporary UNIX sockets ({e})"),
        ));
    }
    cleanup(false);
    Ok(UnixListener::from(OwnedFd::from(socket)))
}

/// `path` with `suffix` appended to its last component.
fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Adopts inherited descriptor `fd` as a listener: it must be a stream socket (TCP or UNIX)
/// that listens (the parent bound it). `backlog`, when set, is applied again with listen(2).
pub fn adopt(fd: i32, backlog: Option<u32>) -> io::Result<Listener> {
    let owned = crate::sys::dup_inherited(fd).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("inherited descriptor {fd} is not open: {e}"),
        )
    })?;
    let sock = socket2::SockRef::from(&owned);
    let domain = sock.domain()?;
    let unix = domain == Domain::UNIX;
    if sock.r#type()? != Type::STREAM || !(unix || domain == Domain::IPV4 || domain == Domain::IPV6)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("inherited descriptor {fd} is not a TCP or UNIX stream socket"),
        ));
    }
    if !sock.is_listener()? {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("inherited descriptor {fd} is a socket that does not listen"),
        ));
    }
    sock.set_nonblocking(true)?;
    if !unix {
        sock.set_nodelay(true)?;
    }
    if let Some(b) = backlog {
        sock.listen(b.min(i32::MAX as u32) as i32)?;
    }
    Ok(if unix {
        Listener::Unix(UnixListener::from(owned))
    } else {
        Listener::Tcp(TcpListener::from(owned))
    })
}

/// A concurrency limit shared by every worker: at most `max` slots taken at once.
#[derive(Debug)]
pub struct Limit {
    max: usize,
    /// Slots taken, those reserved for an accept in progress included.
    cur: AtomicUsize,
    /// Of those, reserved by a worker about to accept: not connections yet. Workers race for
    /// a readable listener and the losers give their slots back; a count read meanwhile (a log
    /// line's `%ac`, `show info`) must not see them.
    reserved: AtomicUsize,
    freed: Notify,
}

impl Limit {
    /// A limit of `max` slots; `None` means no limit.
    pub fn new(max: Option<u32>) -> Self {
        Limit {
            max: max.map_or(usize::MAX, |m| m as usize),
            cur: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
            freed: Notify::new(),
        }
    }

    /// The limit (`usize::MAX` when unlimited).
    pub fn max(&self) -> usize {
        self.max
    }

    /// Connections holding a slot now (slots reserved for an accept in progress are not
    /// counted).
    pub fn current(&self) -> usize {
        // `reserved` goes up before `cur` and down after it: the difference never overstates.
        let reserved = self.reserved.load(Ordering::Acquire);
        self.cur.load(Ordering::Acquire).saturating_sub(reserved)
    }

    /// Slots taken, reserved ones included (what the limit is checked against).
    pub fn taken(&self) -> usize {
        self.cur.load(Ordering::Acquire)
    }

    /// Takes a slot if one is free, reserved until [`Limit::confirm`] (or given back with
    /// [`Limit::release_reserved`]).
    pub fn try_take(&self) -> bool {
        self.reserved.fetch_add(1, Ordering::AcqRel);
        let taken = if self.max == usize::MAX {
            self.cur.fetch_add(1, Ordering::AcqRel);
            true
        } else {
            self.cur
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |c| {
                    (c < self.max).then_some(c + 1)
                })
                .is_ok()
        };
        if !taken {
            self.reserved.fetch_sub(1, Ordering::AcqRel);
        }
        taken
    }

    /// A reserved slot now holds a connection.
    pub fn confirm(&self) {
        self.reserved.fetch_sub(1, Ordering::AcqRel);
    }

    /// Gives back a slot that was reserved and never confirmed.
    pub fn release_reserved(&self) {
        self.release();
        self.reserved.fetch_sub(1, Ordering::AcqRel);
    }

    /// Gives a slot back and wakes the workers waiting for one.
    pub fn release(&self) {
        let before = self.cur.fetch_sub(1, Ordering::AcqRel);
        if before >= self.max {
            self.freed.notify_waiters();
        }
    }

    /// Waits until a slot may be free (the caller retries [`Limit::try_take`]).
    pub async fn wait_freed(&self) {
        let freed = self.freed.notified();
        tokio::pin!(freed);
        freed.as_mut().enable();
        if self.taken() < self.max {
            return;
        }
        freed.await;
    }
}

/// Slots held in several limits at once, released together when dropped.
pub struct Slots<'a> {
    limits: [&'a Limit; 3],
}

impl Slots<'_> {
    /// Keeps the slots taken without this guard: the caller hands them to an owner that
    /// releases them itself (a session outlives the borrow this guard holds).
    pub fn transfer(self) {
        std::mem::forget(self);
    }
}

impl Drop for Slots<'_> {
    fn drop(&mut self) {
        for l in self.limits {
            l.release_reserved();
        }
    }
}

/// Takes one slot in each of `limits`, waiting for whichever is full to free one.
pub async fn take_slots(limits: [&Limit; 3]) -> Slots<'_> {
    loop {
        let mut taken = 0;
        for l in limits {
            if !l.try_take() {
                break;
            }
            taken += 1;
        }
        if taken == limits.len() {
            return Slots { limits };
        }
        for l in &limits[..taken] {
            l.release_reserved();
        }
        limits[taken].wait_freed().await;
    }
}

/// The text of a bind error, as HAProxy words it.
pub fn bind_error(addr: &ListenAddr, frontend: &str, location: &str, e: &io::Error) -> String {
    format!("cannot bind socket [{addr}] for frontend '{frontend}' ({location}): {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_counts_and_refuses() {
        let l = Limit::new(Some(2));
        assert!(l.try_take() && l.try_take());
        assert!(!l.try_take());
        // Reserved slots limit as taken ones do, but count no connection until confirmed.
        assert_eq!(l.current(), 0);
        l.confirm();
        assert_eq!(l.current(), 1);
        l.release_reserved();
        assert_eq!(l.current(), 1);
        assert!(l.try_take());
        l.confirm();
        assert_eq!(l.current(), 2);
        l.release();
        assert_eq!(l.current(), 1);
        let unlimited = Limit::new(None);
        for _ in 0..1000 {
            assert!(unlimited.try_take());
        }
    }

    #[tokio::test]
    async fn slots_wait_for_the_full_limit() {
        let a = Limit::new(None);
        let b = Limit::new(Some(1));
        let c = Limit::new(None);
        let first = take_slots([&a, &b, &c]).await;
        let second = take_slots([&a, &b, &c]);
        tokio::pin!(second);
        // The second waits: b is full, and a's slot was given back while waiting.
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), second.as_mut())
                .await
                .is_err()
        );
        assert_eq!(a.taken(), 1);
        drop(first);
        let _second = second.await;
        assert_eq!((a.taken(), b.taken(), c.taken()), (1, 1, 1));
        // Reserved for an accept, not connections yet.
        assert_eq!((a.current(), b.current(), c.current()), (0, 0, 0));
    }

    fn loopback_any_port() -> Bind {
        Bind {
            addr: ListenAddr::Inet("127.0.0.1:0".parse().unwrap()),
            name: None,
            backlog: None,
            maxconn: None,
            v4v6: false,
            v6only: false,
            transparent: false,
            accept_proxy: false,
            unix_perms: UnixPerms::default(),
            location: "t.cfg:1".into(),
            tls: None,
            proto: None,
        }
    }

    fn tcp(l: Listener) -> TcpListener {
        match l {
            Listener::Tcp(l) => l,
            Listener::Unix(_) => panic!("a TCP listener was expected"),
        }
    }

    #[test]
    fn binds_twice_with_reuseport() {
        let b = loopback_any_port();
        let first = tcp(bind(&b, 16).unwrap());
        let again = Bind {
            addr: ListenAddr::Inet(first.local_addr().unwrap()),
            ..b
        };
        assert!(bind(&again, 16).is_ok());
    }

    #[test]
    fn adopts_only_listening_tcp_sockets() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = Bind {
            addr: ListenAddr::Fd(l.as_raw_fd()),
            ..loopback_any_port()
        };
        let adopted = tcp(bind(&b, 16).unwrap());
        assert_eq!(adopted.local_addr().unwrap(), l.local_addr().unwrap());
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let u = std::os::unix::net::UnixDatagram::unbound().unwrap();
        let e = adopt(u.as_raw_fd(), None).unwrap_err();
        assert!(
            e.to_string().contains("not a TCP or UNIX stream socket"),
            "{e}"
        );
        // A listening UNIX stream socket is adopted as one.
        let (dir, path) = temp_path("adopt");
        let ul = UnixListener::bind(&path).unwrap();
        assert!(adopt(ul.as_raw_fd(), None).unwrap().is_unix());
        let _ = std::fs::remove_dir_all(dir);
        let s = socket2::Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let e = adopt(s.as_raw_fd(), None).unwrap_err();
        assert!(e.to_string().contains("does not listen"), "{e}");
        assert!(adopt(100_000, None).is_err());
    }

    #[test]
    fn accepted_sockets_inherit_nodelay() {
        let b = loopback_any_port();
        let l = tcp(bind(&b, 16).unwrap());
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        l.set_nonblocking(false).unwrap();
        let (accepted, _) = l.accept().unwrap();
        assert!(accepted.nodelay().unwrap());
    }

    /// A fresh directory of its own and a socket path in it.
    fn temp_path(tag: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "bascule-listener-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        (dir, path)
    }

    #[test]
    fn unix_binds_replace_a_stale_file_with_the_mode_asked() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let (dir, path) = temp_path("bind");
        // A stale socket file (its listener gone) and a file in the way of the temporary name.
        drop(UnixListener::bind(&path).unwrap());
        let pid = std::process::id();
        std::fs::write(suffixed(&path, &format!(".{pid}.tmp")), b"").unwrap();
        let perms = UnixPerms {
            mode: Some(0o640),
            uid: None,
            gid: None,
        };
        let l = bind_unix(&UnixAddr::Path(path.clone()), perms, 8).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o640);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s.sock"], "no temporary or backup name left");
        let _c = std::os::unix::net::UnixStream::connect(&path).unwrap();
        l.set_nonblocking(false).unwrap();
        assert!(l.accept().is_ok());
        // Bound again (a new process taking over): the path now reaches the new socket.
        let again = bind_unix(&UnixAddr::Path(path.clone()), UnixPerms::default(), 8).unwrap();
        drop(l);
        assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
        drop(again);
        // A name too long for sun_path is refused before anything is touched.
        let long = UnixAddr::Path(dir.join("x".repeat(100)));
        let e = bind_unix(&long, UnixPerms::default(), 8).unwrap_err();
        assert!(e.to_string().contains("name too long"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn abstract_binds_leave_no_file() {
        let name = format!("bascule-listener-{}", std::process::id());
        let addr = UnixAddr::Abstract(name);
        let l = bind_unix(&addr, UnixPerms::default(), 8).unwrap();
        let s = socket2::Socket::new(Domain::UNIX, Type::STREAM, None).unwrap();
        s.connect(&crate::net::stream::unix_sockaddr(&addr).unwrap())
            .unwrap();
        l.set_nonblocking(false).unwrap();
        assert!(l.accept().is_ok());
        // Taken: a second bind of the same name fails, as in HAProxy.
        assert!(bind_unix(&addr, UnixPerms::default(), 8).is_err());
    }
}
