"""Counts down the children of big fan-outs that settles left to count (FlowRelease rows,
split into FlowRange rows), and releases fan-in children whose parents have all
succeeded.

The workers' claims count a fan-out's children down as they take them
(sql.COUNT_DOWN_CLAIM). The worker whose settle left the rows splits them into ranges for
its claims and the others', and counts down what no claim has taken for RELEASE_GRACE
(worker/lifecycle.py): children nobody has room for are released, as available, all the
same. The leader's pass does that for what a crashed worker left, a few chunks a tick so
that a huge fan-out does not hold up the other services.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg

from queue_engine import sql
from queue_engine.worker.services.service import Service

log = logging.getLogger("queue_engine.worker")

LEADER_CHUNKS = 10  # FlowRelease chunks the leader counts down per pass


async def count_down_more(
    conn: psycopg.AsyncConnection,
    chunk: int,
    on_chunk: Callable[[int], None] | None = None,
    most: int | None = None,
) -> int:
    """Count down the children settles left to count, by ranges (FlowRange rows, see
    sql.COUNT_DOWN_MORE), a chunk per transaction, until no range is left that another
    connection is not counting already, or whose parent's ranges claims counted from in
    the last RELEASE_GRACE (or after `most` chunks). Returns the children released."""
    released = 0
    chunks = 0
    while most is None or chunks < most:
        chunks += 1
        async with conn.transaction():
            cur = await conn.execute(
                sql.COUNT_DOWN_MORE, {"chunk": chunk, "grace": sql.RELEASE_GRACE}
            )
            row = await cur.fetchone()
        assert row is not None
        found, count, _, flows = row
        if not found:
            return released
        released += count
        if flows:  # after the commit, as after a settle
            await conn.execute(sql.RELEASE_COUNTED, [flows])
        if on_chunk is not None:
            on_chunk(count)
    return released


async def split_releases(conn: psycopg.AsyncConnection, chunk: int) -> int:
    """Split the FlowRelease rows settles wrote into ranges of `chunk` children
    (FlowRange rows), for the claims to count down side by side (sql.SPLIT_RELEASES).
    Returns the ranges written."""
    async with conn.transaction():
        cur = await conn.execute(sql.SPLIT_RELEASES, {"chunk": chunk})
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def releases_left(conn: psycopg.AsyncConnection) -> bool:
    """Whether any FlowRelease or FlowRange row is left, counted from or not."""
    cur = await conn.execute(sql.RELEASES_LEFT)
    return (await cur.fetchone()) is not None


async def finish_countdowns(conn: psycopg.AsyncConnection, *, chunk: int) -> None:
    """The leader's pass: what a crashed worker's settles left to count (split first,
    and released once no claim has counted from it for RELEASE_GRACE), then what it
    counted but did not release."""
    await split_releases(conn, chunk)
    released = await count_down_more(conn, chunk, most=LEADER_CHUNKS)
    if released:  # often only ahead of the worker doing it: no news for the log
        log.debug("released %d flow node(s) a settle had left to count", released)
    await release_counted(conn)


async def release_counted(conn: psycopg.AsyncConnection) -> None:
    """Release fan-in children a worker counted down but died before releasing
    (see sql.RELEASE_COUNTED), and drop countdown rows nobody needs."""
    cur = await conn.execute(sql.COUNTDOWN_FLOWS)
    flows = [row[0] for row in await cur.fetchall()]
    if flows:
        cur = await conn.execute(sql.RELEASE_COUNTED, [flows])
        row = await cur.fetchone()
        if row and row[0]:
            # Mostly a race with the worker whose settle counted them (it releases
            # them in the same round trip); after a worker died, a repair.
            log.debug("released %d flow node(s) whose parents had all succeeded", row[0])
            await conn.execute(sql.REFRESH_FLOWS, [flows])
        await conn.execute(sql.PRUNE_COUNTDOWNS)


class FlowRelease(Service):
    """The leader's pass (finish_countdowns), a few chunks a run."""

    name = "flow_release"
    interval = 1.0

    def __init__(self, *, chunk: int) -> None:
        self.chunk = chunk

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        await finish_countdowns(conn, chunk=self.chunk)
        return False
