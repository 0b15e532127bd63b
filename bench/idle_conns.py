#!/usr/bin/env python3
"""Opens N keep-alive client connections to 127.0.0.1:PORT, sends one request on each and reads
its response, then holds them all open until it is killed (SIGTERM). Used by bench/run.sh
(scenario idle) to measure the proxy's memory per idle connection.

Prints one line on stdout: "ready" (then " retries=K" if some connects had to be retried) once
all N connections are idle, or "failed: REASON" (and exits 1) if they could not all be opened.

Robustness, so that N = 5,000 and more goes through:
- the soft RLIMIT_NOFILE is raised to N + 64 (within the hard limit), or the script says which
  limit is too low instead of failing with EMFILE part way through;
- a connect that is refused or reset (the listener paused, its queue full, a SYN dropped) is
  retried after a short, growing pause, up to 50 times per connection;
- every socket operation has a 10 s timeout, so a proxy that stops accepting (its maxconn
  reached) gives a "failed" line rather than a benchmark that hangs.
"""
import resource
import signal
import socket
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])
REQUEST = b"GET /64 HTTP/1.1\r\nHost: bench\r\n\r\n"
BODY = 64  # bytes of bench's /64 file


def fail(reason):
    print("failed: " + reason.replace("\n", " "), flush=True)
    sys.exit(1)


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = n + 64
if soft != resource.RLIM_INFINITY and soft < want:
    if hard != resource.RLIM_INFINITY and hard < want:
        fail("RLIMIT_NOFILE hard limit %d < %d needed for %d connections" % (hard, want, n))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def open_one():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(REQUEST)
        got = b""
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < BODY:
            chunk = s.recv(4096)
            if not chunk:
                raise ConnectionResetError("connection closed before the whole response")
            got += chunk
        if not got.startswith(b"HTTP/1.1 200"):
            s.close()
            fail("status %r on connection %d" % (got.split(b"\r\n", 1)[0], len(conns) + 1))
    except BaseException:
        s.close()
        raise
    return s


conns = []
retries = 0
for i in range(n):
    for attempt in range(50):
        try:
            conns.append(open_one())
            break
        except (ConnectionRefusedError, ConnectionResetError) as e:
            retries += 1
            last = e
            time.sleep(0.01 * (attempt + 1))
        except OSError as e:
            fail("%s after %d connections" % (e, i))
    else:
        fail("%s after %d connections, 50 retries" % (last, i))
print("ready" + (" retries=%d" % retries if retries else ""), flush=True)
while True:
    signal.pause()
