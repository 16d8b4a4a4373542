"""A leader service that runs its work in the background, on a connection of its own,
so that the leader's other services (promotion every half second) never wait for it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.services.service import Service


class Background(Service):
    """One task at a time, and the connection it uses; `close` stops both."""

    def __init__(self, conninfo: str) -> None:
        self.connection = ReconnectingConnection(conninfo, self.name)
        self.task: asyncio.Task[None] | None = None

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def start(self, work: Coroutine[Any, Any, None]) -> None:
        self.task = asyncio.create_task(work, name=f"queue_engine {self.name}")

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        await self.connection.close()
