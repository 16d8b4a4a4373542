"""Run one leader service on its own connection to the test database, as the leader would."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg


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
