"""Run one leader service on its own connection to the test database, as the leader
would; and wait for the steps of the services a real worker's leader runs."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import psycopg

from queue_engine import sql


def run_service[T](conninfo: str, service: Callable[..., Awaitable[T]], **kwargs: Any) -> T:
    async def once() -> T:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        try:
            return await service(conn, **kwargs)
        finally:
            await conn.close()

    # A thread of its own: the test's thread may hold an event loop already.
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, once()).result()


type WaitForStep = Callable[..., None]


@contextmanager
def service_steps(conninfo: str) -> Iterator[WaitForStep]:
    """Listen for the leader's service events (QUEUE_ENGINE["SERVICE_EVENTS"], which the
    test workers turn on) from here on; `wait(name, timeout)` returns after the next
    step of that service to end after this began."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"LISTEN {sql.SERVICE_EVENTS_CHANNEL}")

        # Every event received, in order, until a wait takes it. Each read of the
        # connection runs its generator to the end: leaving it at the event waited for
        # would drop the others that arrived in the same packet (the services of one
        # tick announce their steps within microseconds of each other).
        received: deque[str] = deque()

        def wait(name: str, timeout: float = 10.0) -> None:
            deadline = time.monotonic() + timeout
            while True:
                while received:
                    if received.popleft() == name:
                        return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for a step of {name}")
                received.extend(note.payload for note in conn.notifies(timeout=min(left, 0.2)))

        yield wait
