"""One LISTEN connection per daphne process, turning the engine's NOTIFY hints into Channels
group messages for the console's websocket consumers.

Started lazily by the first consumer that connects, on the running event loop.
A hint says which jobs changed; consumers re-read the database. Whenever the
LISTEN connection is (re)established, every consumer is told to catch up in
full, since hints sent while it was down are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import psycopg
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, channel_layers

from queue_engine import sql
from queue_engine.connections import conninfo

log = logging.getLogger("queue_engine.console")

EVERYONE = "qe.console"  # every consumer: full catch-up after a reconnect
OVERVIEW = "qe.overview"  # anything about job states or queue depths
MAX_IDS = 200


def job_group(job_id: int) -> str:
    return f"qe.job.{job_id}"


def flow_group(flow_id: int) -> str:
    return f"qe.flow.{flow_id}"


def messages_for(channel: str, payload: str) -> list[tuple[str, dict[str, Any]]]:
    """The (group, message) pairs one notification turns into."""
    if channel == "qe_wake":
        return [(OVERVIEW, {"type": "console.hint", "kind": "jobs"})]
    try:
        event = json.loads(payload)
    except ValueError:
        return []
    if not isinstance(event, dict):
        return []
    kind = event.get("type") if event.get("type") in ("jobs", "log", "progress") else "jobs"
    ids = [i for i in event.get("ids") or [] if isinstance(i, int)][:MAX_IDS]
    message = {"type": "console.hint", "kind": kind}
    pairs = [(job_group(job_id), message) for job_id in ids]
    flows = [i for i in event.get("flows") or [] if isinstance(i, int)][:MAX_IDS]
    pairs += [(flow_group(flow_id), message) for flow_id in flows]
    if kind == "jobs":
        pairs.append((OVERVIEW, message))
    return pairs


LAYER = "queue_engine.console"


def console_layer() -> BaseChannelLayer:
    """The console's channel layer, in this process only whatever the host's CHANNEL_LAYERS
    say: each process's bridge LISTENs to Postgres itself and fans out to its own sockets,
    so nothing needs to cross processes (and a host needs no CHANNEL_LAYERS at all)."""
    layer = channel_layers.backends.get(LAYER)
    if layer is None:
        layer = InMemoryChannelLayer()
        channel_layers.set(LAYER, layer)
    return layer


class Bridge:
    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.connected = asyncio.Event()

    def ensure_started(self) -> None:
        loop = asyncio.get_running_loop()
        if self.task is not None and not self.task.done() and self.loop is loop:
            return
        self.loop = loop
        self.connected = asyncio.Event()
        self.task = loop.create_task(self.run(), name="queue_engine console LISTEN bridge")

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self) -> None:
        layer = console_layer()
        delay = 0.25
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    conninfo(session=True), autocommit=True
                ) as conn:
                    for statement in sql.LISTEN_CONSOLE:
                        await conn.execute(statement)
                    delay = 0.25
                    self.connected.set()
                    await layer.group_send(EVERYONE, {"type": "console.resync"})
                    async for note in conn.notifies():
                        for group, message in messages_for(note.channel, note.payload):
                            await layer.group_send(group, message)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.connected.clear()
                log.warning("console LISTEN connection lost (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)


bridge = Bridge()
