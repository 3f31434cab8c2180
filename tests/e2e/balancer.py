"""A round-robin HTTP balancer for the replica tests: every request goes to
the next backend on a fresh connection (``Connection: close`` both ways), the
way a Kubernetes Service spreads requests over pods, so consecutive requests
of one MCP session land on different replicas. A backend that refuses the
connection is skipped, as a Service skips a terminated pod.

    python balancer.py LISTEN_PORT BACKEND_PORT...
Loopback only."""

from __future__ import annotations

import asyncio
import itertools
import sys


async def relay(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while chunk := await src.read(65536):
            dst.write(chunk)
            await dst.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass


def with_close(head: bytes) -> bytes:
    lines = [l for l in head.split(b"\r\n") if l and not l.lower().startswith(b"connection:")]
    return b"\r\n".join(lines + [b"Connection: close"]) + b"\r\n\r\n"


async def main(listen: int, backends: list[int]) -> None:
    ring = itertools.cycle(backends)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await reader.readexactly(length) if length else b""
            for _ in range(len(backends)):
                port = next(ring)
                try:
                    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
                    break
                except OSError:
                    continue
            else:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            up_writer.write(with_close(head[:-4]) + body)
            await up_writer.drain()
            response_head = await up_reader.readuntil(b"\r\n\r\n")
            writer.write(with_close(response_head[:-4]))
            await relay(up_reader, writer)
            up_writer.close()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), [int(p) for p in sys.argv[2:]]))
