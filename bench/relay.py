"""A TCP relay in front of Postgres that adds a fixed delay to every round trip.

`python -m bench.relay --target HOST:PORT (or a Unix socket path) --delay-ms D` listens
on 127.0.0.1 (a free port, printed on its first line of output) and forwards each
connection to the target. Whatever the server sends is held D milliseconds before it
is passed on, in order, without holding up what follows it: a request and its answer
take D ms longer, while a stream of pipelined answers keeps its pace, as on a link
with D ms more latency. The whole delay is on the answers (one timer per chunk rather
than two); asyncio's timers fire up to a millisecond late, so `measure_rtt()` reports
what a round trip through the relay really costs.

`relay(target, delay_ms)` runs one in a process of its own (its Python work must not
take the benchmark process's GIL) for the length of a `with` block. This kernel has no
`netem` qdisc, hence a relay; a scenario sends its baseline through a relay too, with
no delay, so that the relay's own cost cancels out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from bench.deadline import process_groups

CHUNK = 65536
ROOT = Path(__file__).resolve().parent.parent


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy reader to writer, each chunk `delay` seconds after it arrived, in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(CHUNK):
            queue.put_nowait((loop.time() + delay, data))
    except ConnectionError:
        pass
    finally:
        queue.put_nowait((0.0, b""))
        with contextlib.suppress(ConnectionError):
            await sender
        writer.close()


async def _serve(target: str, delay: float) -> None:
    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if target.startswith("/"):
            return await asyncio.open_unix_connection(target)
        host, _, port = target.rpartition(":")
        return await asyncio.open_connection(host, int(port))

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await connect()
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            _pump(client_r, server_w, 0.0),
            _pump(server_r, client_w, delay),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def relay(target: str, delay_ms: float) -> Iterator[int]:
    """A relay process to `target` adding `delay_ms` to each round trip; yields its port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.relay", "--target", target, "--delay-ms", str(delay_ms)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    process_groups.add(proc.pid)  # for the deadline's last resort
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"bench.relay did not start (it said {line!r})")
        yield int(line)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        process_groups.discard(proc.pid)


def measure_rtt(conninfo: str, n: int = 200) -> float:
    """The median time (ms) of `SELECT 1` over `conninfo`."""
    times = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for _ in range(n):
            start = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> Any:
    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__)
    parser.add_argument("--target", required=True, help="HOST:PORT, or a Unix socket path")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.target, args.delay_ms / 1000))


if __name__ == "__main__":
    main()
