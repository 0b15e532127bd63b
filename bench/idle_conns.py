#!/usr/bin/env python3
"""Opens N keep-alive client connections to 127.0.0.1:PORT, sends one request on each and reads
its response, then holds them all open until stdin closes. Prints "ready" once all are idle.
Used by bench/run.sh (scenario idle) to measure the proxy's memory per idle connection."""
import socket
import sys

port, n = int(sys.argv[1]), int(sys.argv[2])
conns = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /64 HTTP/1.1\r\nHost: bench\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 64:
        chunk = s.recv(4096)
        if not chunk:
            sys.exit("connection closed early")
        got += chunk
    conns.append(s)
print("ready", flush=True)
sys.stdin.read()
