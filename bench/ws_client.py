#!/usr/bin/env python3
"""The tls-ws client of bench/tls.sh: N WebSocket connections over TLS (wss) to 127.0.0.1:PORT,
CONCURRENCY at a time (as one ends, the next starts), each: connect, full TLS handshake (a fresh
SSL session per connection: Python resumes only when given a session), the upgrade request and
its 101, one 32-byte masked text message and its echo, then a close frame and its answer.

Usage: ws_client.py PORT N CONCURRENCY CAFILE

Prints one line: "HANDSHAKE_MS MESSAGE_MS TOTAL_S ok=K errors=E[,first error]": the mean time
from connect() to the 101 (TCP + TLS + upgrade), the mean time from sending the message to
reading its echo, and the wall time of the whole run.
"""
import asyncio
import os
import ssl
import sys
import time

port, n, conc, cafile = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ctx = ssl.create_default_context(cafile=cafile)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
UPGRADE = (b"GET /ws HTTP/1.1\r\nHost: www.example.com\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           b"Sec-WebSocket-Version: 13\r\n\r\n")
PAYLOAD = b"x" * 32


def frame(op, payload):
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | op, 0x80 | len(payload)]) + mask + masked


async def read_frame(reader):
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(await reader.readexactly(2), "big")
    return b0 & 0x0F, await reader.readexactly(n)


hs_total = msg_total = 0.0
ok = 0
errors = []
left = n


async def one():
    global hs_total, msg_total, ok
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                   server_hostname="www.example.com")
    try:
        writer.write(UPGRADE)
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError("status " + head.split(b"\r\n", 1)[0].decode(errors="replace"))
        t1 = time.perf_counter()
        writer.write(frame(0x1, PAYLOAD))
        op, data = await read_frame(reader)
        t2 = time.perf_counter()
        if op != 0x1 or data != PAYLOAD:
            raise RuntimeError("bad echo")
        writer.write(frame(0x8, b"\x03\xe8"))
        await read_frame(reader)
        hs_total += t1 - t0
        msg_total += t2 - t1
        ok += 1
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, ssl.SSLError):
            pass


async def worker():
    global left
    while left > 0:
        left -= 1
        try:
            await asyncio.wait_for(one(), 30)
        except Exception as e:  # counted and reported, the run goes on
            errors.append(type(e).__name__ + ":" + str(e).replace(" ", "_")[:80])


async def main():
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    total = time.perf_counter() - t0
    note = "errors=%d" % len(errors) + ("," + errors[0] if errors else "")
    print("%.3f %.3f %.2f ok=%d %s" % (hs_total / max(ok, 1) * 1e3, msg_total / max(ok, 1) * 1e3,
                                       total, ok, note), flush=True)


asyncio.run(main())
