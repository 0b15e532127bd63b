//! The few system calls that the standard library and tokio do not wrap: daemonizing, file
//! descriptor limits, CPU affinity, dropping privileges, signalling other processes, and pipes
//! with splice(2) for zero-copy forwarding, the epoll set that holds idle connections, and
//! whether an address is this host's (`src_is_local`).
//!
//! This is one of the two modules allowed to use `unsafe` (the crate root denies it). Each block
//! is one libc call on plain values, with a `// SAFETY:` comment saying why it is sound. Every
//! function returns an `io::Error` carrying `errno` so callers can add context.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Current (soft, hard) limits on open file descriptors.
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own and pass by valid pointer.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Sets the soft limit on open file descriptors (raising the hard one too if we may).
pub fn set_nofile_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = nofile_limit()?;
    let lim = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard.max(soft) as libc::rlim_t,
    };
    // SAFETY: setrlimit only reads the struct we pass by valid pointer.
    check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })
}

/// Pins the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is its valid empty value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond this system's CPU set size"),
            ));
        }
        // SAFETY: cpu is below CPU_SETSIZE, checked above, so CPU_SET stays inside the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 means the calling thread; the set pointer and size describe our local set.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })
}

/// What [`fork`] returned, seen from each side.
pub enum Forked {
    Parent { child: i32 },
    Child,
}

/// Forks the process. Must be called while the process has a single thread.
pub fn fork() -> io::Result<Forked> {
    // SAFETY: called before any thread or runtime is started (callers guarantee it), so the
    // child inherits a consistent single-threaded state.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        child => Ok(Forked::Parent { child }),
    }
}

/// Detaches the calling process from its terminal: new session, standard streams on /dev/null.
pub fn detach() -> io::Result<()> {
    // SAFETY: setsid takes no arguments and only changes this process's session.
    if unsafe { libc::setsid() } == -1 {
        return Err(io::Error::last_os_error());
    }
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for fd in 0..=2 {
        // SAFETY: both descriptors are valid: `null` is open and 0..=2 are the standard ones;
        // dup2 atomically replaces the target.
        check(unsafe { libc::dup2(null.as_raw_fd(), fd) })?;
    }
    Ok(())
}

/// Changes the root directory and then the working directory to it.
pub fn chroot(dir: &Path) -> io::Result<()> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    check(unsafe { libc::chroot(c.as_ptr()) })?;
    std::env::set_current_dir("/")
}

/// Drops to `gid` then `uid` (group first: after setuid we could no longer change it).
pub fn drop_privileges(uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    if let Some(gid) = gid {
        // SAFETY: setgroups with a count of 0 and a null list clears the supplementary groups.
        check(unsafe { libc::setgroups(0, std::ptr::null()) })?;
        // SAFETY: plain value argument.
        check(unsafe { libc::setgid(gid) })?;
    }
    if let Some(uid) = uid {
        // SAFETY: plain value argument.
        check(unsafe { libc::setuid(uid) })?;
    }
    Ok(())
}

/// Signals sent to other processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Usr1,
    Term,
}

/// Sends `signal` to process `pid`.
pub fn kill(pid: i32, signal: Signal) -> io::Result<()> {
    let sig = match signal {
        Signal::Usr1 => libc::SIGUSR1,
        Signal::Term => libc::SIGTERM,
    };
    // SAFETY: kill takes plain values; a wrong pid is reported through errno, not UB.
    check(unsafe { libc::kill(pid, sig) })
}

/// Registers a listening socket with the current tokio reactor, so a worker can wait for it to
/// be readable before deciding to accept (see `net::listener`: limits are checked before accept).
/// Must be called inside a runtime.
pub fn watch_listener(socket: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    socket2::SockRef::from(&socket).set_nonblocking(true)?;
    // SAFETY: the AsyncFd takes ownership of `socket`, an open listening socket; it stays open
    // and is the same descriptor until the AsyncFd is dropped, because nothing else holds it
    // and OwnedFd::as_raw_fd always returns its one descriptor.
    unsafe { tokio::io::unix::AsyncFd::register(socket) }.map_err(io::Error::from)
}

/// Takes a socket inherited from the parent process by number (`fd@N` addresses): returns a
/// close-on-exec duplicate that the caller owns, or `EBADF` when `fd` is not open. The inherited
/// number itself stays open (nothing in this process owns it, so closing it here could close a
/// descriptor that something else reuses); callers check with [`socket2::SockRef`] that it is
/// the kind of socket they expect.
pub fn dup_inherited(fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes plain integers and creates a new descriptor (the lowest
    // free one >= 3, so never a standard stream) or fails with EBADF when `fd` is not open; it
    // touches no memory.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` was just created by fcntl above and nothing else holds it.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Sets the limit on the process's data memory (RLIMIT_DATA: heap and private writable
/// mappings), soft and hard, in bytes (`-m`).
pub fn set_data_limit(bytes: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: bytes as libc::rlim_t,
        rlim_max: bytes as libc::rlim_t,
    };
    // SAFETY: setrlimit only reads the struct we pass by valid pointer.
    check(unsafe { libc::setrlimit(libc::RLIMIT_DATA, &lim) })
}

/// Creates a pipe whose two ends are non-blocking and close-on-exec: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own and pass by valid pointer.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: on success both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Asks the kernel to resize a pipe to at least `size` bytes; returns the size it got.
pub fn set_pipe_size(pipe: BorrowedFd<'_>, size: usize) -> io::Result<usize> {
    let size = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: F_SETPIPE_SZ takes a plain integer; the descriptor is borrowed, hence open.
    let got = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, size) };
    if got == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(got as usize)
}

/// Moves up to `len` bytes from `from` to `to` inside the kernel; one of them must be a pipe.
/// Never blocks: `WouldBlock` when nothing can move now. Returns 0 at the end of `from`'s
/// stream.
pub fn splice(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    // SAFETY: both descriptors are borrowed, hence open for the call; null offsets mean "the
    // current file position" (required for pipes and sockets); the flags are plain values.
    let n = unsafe {
        libc::splice(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Accepts a connection on `listener` (TCP or UNIX) as a non-blocking, close-on-exec socket in
/// one system call (std's `accept` needs a second one, `ioctl(FIONBIO)`, to make it
/// non-blocking). Returns the new socket and the peer's address.
pub fn accept_nonblocking(listener: BorrowedFd<'_>) -> io::Result<(OwnedFd, socket2::SockAddr)> {
    let mut fd: libc::c_int = -1;
    // SAFETY: try_init hands accept4 a zeroed sockaddr_storage and its length to fill; accept4
    // writes at most that length. The listener is borrowed, hence open.
    let ((), addr) = unsafe {
        socket2::SockAddr::try_init(|storage, len| {
            fd = libc::accept4(
                listener.as_raw_fd(),
                storage.cast(),
                len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            );
            if fd == -1 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        })
    }?;
    // SAFETY: accept4 succeeded, so `fd` is a new connected socket that nothing else owns.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, addr))
}

/// Copies the next bytes waiting on `socket` into `buf` without taking them and without
/// waiting (`MSG_PEEK | MSG_DONTWAIT`): `WouldBlock` when there are none, 0 at end of stream.
pub fn peek_nonblocking(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recv writes at most `buf.len()` bytes into the buffer we borrow mutably; the
    // socket is borrowed, hence open.
    let n = unsafe {
        libc::recv(
            socket.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Creates an epoll instance (close-on-exec).
pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes a plain flag and returns a new descriptor or -1.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success the descriptor is open and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds `fd` to `epoll`, reporting it readable (or closed) with `token`.
pub fn epoll_add(epoll: BorrowedFd<'_>, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
        u64: token,
    };
    // SAFETY: both descriptors are borrowed, hence open; `ev` is a valid event we own.
    check(unsafe {
        libc::epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            fd.as_raw_fd(),
            &mut ev,
        )
    })
}

/// Removes `fd` from `epoll`.
pub fn epoll_del(epoll: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: both descriptors are borrowed, hence open; a null event is allowed for DEL.
    check(unsafe {
        libc::epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            fd.as_raw_fd(),
            std::ptr::null_mut(),
        )
    })
}

/// The tokens of the descriptors of `epoll` that are ready now (without waiting), at most
/// `tokens.len()` of them; returns how many were written.
pub fn epoll_ready(epoll: BorrowedFd<'_>, tokens: &mut [u64]) -> io::Result<usize> {
    const BATCH: usize = 64;
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
    let max = tokens.len().min(BATCH) as libc::c_int;
    // SAFETY: `events` has room for `max` entries; timeout 0 never blocks.
    let n = unsafe { libc::epoll_wait(epoll.as_raw_fd(), events.as_mut_ptr(), max, 0) };
    if n == -1 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    for (t, e) in tokens.iter_mut().zip(&events[..n]) {
        *t = e.u64;
    }
    Ok(n)
}

/// Registers an epoll instance with the current tokio reactor, to learn when any descriptor in
/// it is ready. Must be called inside a runtime.
pub fn watch_epoll(epoll: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd takes ownership of `epoll`, an open descriptor that nothing else
    // holds; OwnedFd::as_raw_fd always returns that one descriptor, which stays open until the
    // AsyncFd is dropped.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(epoll, tokio::io::Interest::READABLE)
    }
    .map_err(io::Error::from)
}

/// Asks the C allocator to give the free pages it holds back to the kernel, wherever they are
/// in its heaps (a plain `free` only shrinks a heap from its top). Returns whether any memory
/// was released. Only glibc has this call; elsewhere nothing is done and it returns false.
pub fn release_free_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointer; it locks each arena itself, so it may run on
        // any thread while others allocate, and it frees nothing that is in use.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// What the kernel knows of a TCP connection (`getsockopt(TCP_INFO)`): round trip times,
/// segments in flight, lost and retransmitted (the `fc_rtt` family of fetches).
pub fn tcp_info(socket: BorrowedFd<'_>) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain integers, for which all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `info`, writable for its whole size; the kernel
    // writes at most `len` bytes and says how many in `len`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// The system's host name (`gethostname`), empty if it cannot be read.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for writes of its whole length, which is what we pass; the
    // kernel writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A broken-down local time (`localtime_r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalTime {
    pub year: i32,
    /// 0..=11.
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    /// Offset from UTC, seconds east.
    pub gmtoff: i64,
}

/// The local time of `secs` seconds since the Unix epoch, as the TZ environment says.
pub fn local_time(secs: i64) -> LocalTime {
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals for the length of the call; localtime_r is the
    // thread-safe variant that writes only into `tm`.
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    if !ok {
        return LocalTime {
            year: 1970,
            month: 0,
            day: 1,
            hour: 0,
            min: 0,
            sec: 0,
            gmtoff: 0,
        };
    }
    LocalTime {
        year: tm.tm_year + 1900,
        month: tm.tm_mon as u32,
        day: tm.tm_mday as u32,
        hour: tm.tm_hour as u32,
        min: tm.tm_min as u32,
        sec: tm.tm_sec as u32,
        gmtoff: tm.tm_gmtoff,
    }
}

#[link(name = "crypt")]
extern "C" {
    /// libcrypt's reentrant `crypt_r(3)`: `data` is a `struct crypt_data` (32 KiB with
    /// libxcrypt, 131 KiB with old glibc; we pass a buffer large enough for either).
    fn crypt_r(
        key: *const libc::c_char,
        setting: *const libc::c_char,
        data: *mut libc::c_void,
    ) -> *mut libc::c_char;
}

/// Size of the scratch buffer given to `crypt_r`: at least `sizeof(struct crypt_data)` of
/// every libcrypt in use (libxcrypt: 32768; glibc's own before 2.28: 131232).
const CRYPT_DATA_SIZE: usize = 132 * 1024;

/// Hashes `key` with the algorithm and salt of `setting` (a `$6$salt$...` hash or a DES salt),
/// as crypt(3) does. `None` when libcrypt refuses (unknown algorithm, malformed setting, a NUL
/// byte in either input).
pub fn crypt(key: &[u8], setting: &str) -> Option<String> {
    let key = CString::new(key).ok()?;
    let setting = CString::new(setting).ok()?;
    let mut data = vec![0u8; CRYPT_DATA_SIZE];
    // SAFETY: key and setting are NUL-terminated strings that outlive the call; data is a
    // zeroed buffer at least as large as struct crypt_data (a zeroed struct is the documented
    // initial state). The result points into `data` (or is NULL), and is copied out before
    // `data` is dropped.
    let out = unsafe { crypt_r(key.as_ptr(), setting.as_ptr(), data.as_mut_ptr().cast()) };
    if out.is_null() {
        return None;
    }
    // SAFETY: a non-NULL result is a NUL-terminated string inside `data`, still alive here.
    let s = unsafe { std::ffi::CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // libxcrypt reports failure with a string starting with '*' instead of NULL.
    (!s.starts_with('*')).then_some(s)
}

/// Whether `ip` is one of this host's addresses, told as HAProxy's `addr_is_local` tells it: a
/// UDP socket binds to it (and then connects to it); `None` when the test itself fails for
/// another reason than the address (no socket left, for instance). Two system calls and a
/// close, no `unsafe`.
pub fn is_local_address(ip: std::net::IpAddr) -> Option<bool> {
    let addr = std::net::SocketAddr::new(ip, 0);
    match std::net::UdpSocket::bind(addr) {
        Ok(s) => Some(s.connect(addr).is_ok()),
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Some(false),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[test]
    fn splice_moves_bytes_between_a_socket_and_a_pipe() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (r, w) = pipe().unwrap();
        a.write_all(b"through the kernel").unwrap();
        assert_eq!(splice(b.as_fd(), w.as_fd(), 1 << 16).unwrap(), 18);
        // Empty socket: would block rather than wait.
        let e = splice(b.as_fd(), w.as_fd(), 1 << 16).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        let (c, mut d) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(splice(r.as_fd(), c.as_fd(), 1 << 16).unwrap(), 18);
        let mut got = [0u8; 18];
        d.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"through the kernel");
        assert!(set_pipe_size(w.as_fd(), 1 << 17).unwrap() >= 1 << 17);
    }

    #[test]
    fn nofile_limit_reads_and_sets_back() {
        let (soft, hard) = nofile_limit().unwrap();
        assert!(soft <= hard);
        set_nofile_limit(soft).unwrap();
        assert_eq!(nofile_limit().unwrap().0, soft);
    }

    #[test]
    fn inherited_descriptors_are_duplicated_or_refused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dup = dup_inherited(l.as_raw_fd()).unwrap();
        assert_ne!(dup.as_raw_fd(), l.as_raw_fd());
        let again = std::net::TcpListener::from(dup);
        assert_eq!(again.local_addr().unwrap(), l.local_addr().unwrap());
        let e = dup_inherited(100_000).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn pinning_to_an_impossible_cpu_is_an_error() {
        assert!(pin_current_thread(&[100_000]).is_err());
    }
}
