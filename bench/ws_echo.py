#!/usr/bin/env python3
"""A plain (no TLS) WebSocket echo server for bench/tls.sh's tls-ws scenario: answers the
upgrade (RFC 6455's Sec-WebSocket-Accept), then sends every data frame back unmasked and answers
a close frame with a close frame. Asyncio, one thread; bench/tls.sh pins it on the load core.

Usage: ws_echo.py PORT
"""
import asyncio
import base64
import hashlib
import sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def serve(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        key = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"sec-websocket-key":
                key = value.strip()
        if key is None:
            writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
            return
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        while True:
            b0, b1 = await reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(await reader.readexactly(2), "big")
            elif n == 127:
                n = int.from_bytes(await reader.readexactly(8), "big")
            mask = await reader.readexactly(4) if b1 & 0x80 else b"\0\0\0\0"
            data = bytearray(await reader.readexactly(n))
            for i in range(n):
                data[i] ^= mask[i % 4]
            op = b0 & 0x0F
            hdr = bytes([0x80 | op])
            hdr += bytes([n]) if n < 126 else (bytes([126]) + n.to_bytes(2, "big"))
            writer.write(hdr + bytes(data))
            await writer.drain()
            if op == 0x8:  # close: answered, then the connection ends
                return
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main(port):
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
