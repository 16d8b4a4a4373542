"""The shutdown timeout's last step: settle what ended, and give back to their queues the
jobs that still run."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.worker.execution import Execution, Outcome
from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.threads import HandlerThreads

log = logging.getLogger("queue_engine.worker")

# A job given back while its plain function still runs is claimable again only this
# much later: the process exits right after the release, and its threads with it.
RELEASE_FENCE = 1.0


async def hand_over(
    lane: ReconnectingConnection,
    outcomes: list[Outcome],
    running: list[Execution],
    threads: HandlerThreads,
    *,
    settle: Callable[[ReconnectingConnection, list[Outcome], int], Awaitable[Any]],
) -> None:
    if outcomes:
        await settle(lane, outcomes, 0)
    if not running:
        return
    in_threads = [e for e in running if e in threads.running]
    log.warning(
        "shutdown timeout: giving back %d running job(s)%s",
        len(running),
        f"; {len(in_threads)} plain function(s) still run and end with this process"
        if in_threads
        else "",
    )
    for statement, items, extra in (
        (sql.RELEASE, [e for e in running if e not in in_threads], {}),
        (sql.RELEASE_RUNNING, in_threads, {"after": RELEASE_FENCE}),
    ):
        if items:
            await release(lane, statement, items, extra)


async def release(
    lane: ReconnectingConnection,
    statement: str,
    executions: list[Execution],
    extra: dict[str, Any],
) -> None:
    params = {
        "ids": [e.job_id for e in executions],
        "tokens": [e.token for e in executions],
        **extra,
    }

    async def action(conn: psycopg.AsyncConnection) -> None:
        async with conn.transaction():
            cur = await conn.execute(statement, params)
            queues = sorted({q for _, q in await cur.fetchall()})
            await conn.execute(sql.NOTIFY_QUEUES, [queues])

    with contextlib.suppress(psycopg.Error):  # logged by run(); the leases bring them back
        await lane.run(action, what="release", attempts=5)
