#!/usr/bin/env python3
"""Opens N keep-alive client connections to 127.0.0.1:PORT, sends one request on each and reads
its response, then holds them all open until it is killed (SIGTERM). Used by bench/run.sh
(scenario idle) to measure the proxy's memory per idle connection.

Usage: idle_conns.py PORT N [--burst K | --tls]

Two arrival patterns:
- one by one (the default): connect, request, read the response, then the next connection. A
  session is live from its accept until it idles, so only the few whose response came in the
  last moments are live at once;
- --burst K: K connections at once, as a crowd of real clients arrives: connect all K, then
  send a request on each, then read the K responses (in whatever order they come), then the
  next K. All K sessions are live together, and the proxy sees N/K such bursts back to back.

--tls (bench/tls.sh, scenario tls-idle): each connection is a TLS 1.3 client (SNI
www.example.com, the certificate not verified, a full handshake: no session is reused), opened one
by one: connect, handshake, request, response. --tls and --burst do not go together.

Prints one line on stdout: "ready" (then " retries=K" if some connects had to be retried) once
all N connections have had their response and sit idle, or "failed: REASON" (and exits 1) if
they could not all be opened.

Robustness, so that N = 5,000 and more goes through:
- the soft RLIMIT_NOFILE is raised to N + 64 (within the hard limit), or the script says which
  limit is too low instead of failing with EMFILE part way through;
- a connect that is refused or reset (the listener paused, its queue full, a SYN dropped) is
  retried after a short, growing pause, up to 50 times per connection (in a burst, such a
  connection is retried alone, one by one, after the rest of its burst);
- every socket operation has a 10 s timeout, so a proxy that stops accepting (its maxconn
  reached) gives a "failed" line rather than a benchmark that hangs.
"""
import argparse
import resource
import selectors
import signal
import socket
import ssl
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("port", type=int)
ap.add_argument("n", type=int)
ap.add_argument("--burst", type=int, default=1, metavar="K",
                help="open K connections at once (default 1: one by one)")
ap.add_argument("--tls", action="store_true",
                help="TLS 1.3 clients (one by one; not with --burst)")
args = ap.parse_args()
port, n, burst = args.port, args.n, max(1, args.burst)
if args.tls and burst > 1:
    ap.error("--tls opens its connections one by one: --burst does not apply")
TLS = None
if args.tls:
    TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    TLS.minimum_version = ssl.TLSVersion.TLSv1_3
    TLS.check_hostname = False
    TLS.verify_mode = ssl.CERT_NONE
REQUEST = b"GET /64 HTTP/1.1\r\nHost: bench\r\n\r\n"
BODY = 64  # bytes of bench's /64 file
TIMEOUT = 10


def fail(reason):
    print("failed: " + reason.replace("\n", " "), flush=True)
    sys.exit(1)


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = n + 64
if soft != resource.RLIM_INFINITY and soft < want:
    if hard != resource.RLIM_INFINITY and hard < want:
        fail("RLIMIT_NOFILE hard limit %d < %d needed for %d connections" % (hard, want, n))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def complete(got):
    """Whether `got` holds a whole response to REQUEST."""
    return b"\r\n\r\n" in got and len(got.split(b"\r\n\r\n", 1)[1]) >= BODY


def check(got):
    if not got.startswith(b"HTTP/1.1 200"):
        fail("status %r on connection %d" % (got.split(b"\r\n", 1)[0], len(conns) + 1))


def open_one():
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    try:
        if TLS is not None:
            s = TLS.wrap_socket(s, server_hostname="www.example.com")
        s.sendall(REQUEST)
        got = b""
        while not complete(got):
            chunk = s.recv(4096)
            if not chunk:
                raise ConnectionResetError("connection closed before the whole response")
            got += chunk
        if not got.startswith(b"HTTP/1.1 200"):
            s.close()
            check(got)
    except BaseException:
        s.close()
        raise
    return s


def open_burst(k):
    """Opens k connections at once; returns them and how many failed (to be opened one by one)."""
    socks = []
    failed = 0
    for _ in range(k):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT))
        except (ConnectionRefusedError, ConnectionResetError):
            failed += 1
    sent = []
    for s in socks:
        try:
            s.sendall(REQUEST)
            sent.append(s)
        except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
            s.close()
            failed += 1
    sel = selectors.DefaultSelector()
    got = {}
    for s in sent:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        got[s] = b""
    done = []
    deadline = time.monotonic() + TIMEOUT
    while got:
        left = deadline - time.monotonic()
        if left <= 0:
            fail("timed out waiting for %d responses of a burst after %d connections"
                 % (len(got), len(conns)))
        for key, _ in sel.select(left):
            s = key.fileobj
            try:
                chunk = s.recv(4096)
            except BlockingIOError:
                continue
            except (ConnectionResetError, ConnectionRefusedError):
                chunk = b""
            if not chunk:
                sel.unregister(s)
                del got[s]
                s.close()
                failed += 1
                continue
            got[s] += chunk
            if complete(got[s]):
                sel.unregister(s)
                check(got.pop(s))
                s.setblocking(True)
                s.settimeout(TIMEOUT)
                done.append(s)
    sel.close()
    return done, failed


conns = []
retries = 0


def one_by_one(count):
    global retries
    for _ in range(count):
        for attempt in range(50):
            try:
                conns.append(open_one())
                break
            except (ConnectionRefusedError, ConnectionResetError) as e:
                retries += 1
                last = e
                time.sleep(0.01 * (attempt + 1))
            except OSError as e:
                fail("%s after %d connections" % (e, len(conns)))
        else:
            fail("%s after %d connections, 50 retries" % (last, len(conns)))


try:
    if burst == 1:
        one_by_one(n)
    else:
        while len(conns) < n:
            opened, failed = open_burst(min(burst, n - len(conns)))
            conns.extend(opened)
            retries += failed
            one_by_one(failed)
except OSError as e:
    fail("%s after %d connections" % (e, len(conns)))
print("ready" + (" retries=%d" % retries if retries else ""), flush=True)
while True:
    signal.pause()
