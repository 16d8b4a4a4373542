"""Keeps the leaves of the partitioned history and log lines (queue_engine.schema.partitions):
creates them ahead of the clock, and drops those whose rows are all past their state's
longest window (the longest of all for the log lines).

Each change is one short transaction under a short lock_timeout: adding a leaf takes
an exclusive lock on its state's default leaf, and dropping one an exclusive lock on
its state's table, which the workers' settles write through. A settle waits at most
LOCK_TIMEOUT behind either; a change that cannot get its lock in time gives up and is
tried again at the next pass, so a long report reading the history delays a drop,
never the workers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

from queue_engine import sql
from queue_engine.schema import partitions as history
from queue_engine.worker.services.service import Service

log = logging.getLogger("queue_engine.worker")

LOCK_TIMEOUT = "100ms"


@dataclass(frozen=True)
class Kept:
    created: int
    dropped: int
    moved: int  # rows of running flows moved to a default leaf
    waited: int  # changes put off: their lock was not free in time


async def keep_partitions(conn: psycopg.AsyncConnection) -> Kept:
    """One pass: see the module's docstring. Leaves ahead of the clock made when the
    windows were longer are dropped and made again with the shorter span (the leaf
    that holds the present keeps its span: its rows go up to one old span late)."""
    async with conn.cursor() as cur:
        await cur.execute(sql.HISTORY_CLOCK)
        row = await cur.fetchone()
        assert row is not None
        now, watermark = row
        await cur.execute(sql.HISTORY_WINDOWS)
        longest = history.longest_windows(await cur.fetchall())
    cur = await conn.execute(history.ORPHAN_LEAVES)  # type: ignore[arg-type]  # fixed text
    for (orphan,) in await cur.fetchall():
        await _drop_detached(conn, orphan)
    leaves = await _leaves(conn)
    created = dropped = moved = waited = 0
    for state in history.PARTS:
        mine = [leaf for leaf in leaves if leaf.state == state]
        span = history.span_for(longest[state])
        oversized = history.oversized(mine, now, span)
        for leaf in oversized:
            if not await _change(conn, [history.drop_if_empty(leaf)]):
                waited += 1
        if oversized:
            mine = [leaf for leaf in await _leaves(conn) if leaf.state == state]
        for lo, hi in history.missing_ranges(mine, now, span):
            if await _change(conn, history.create_leaf(state, lo, hi)):
                created += 1
            else:
                waited += 1
                break  # the next ranges start where this one ends
        for leaf in history.due(mine, now, watermark, longest[state]):
            outcome = await _drop(conn, leaf)
            if outcome is None:
                waited += 1
            else:
                dropped += 1
                moved += outcome
    if created or dropped or waited:
        log.debug(
            "history leaves: %d created, %d dropped (%d rows of running flows moved), %d put off",
            created,
            dropped,
            moved,
            waited,
        )
    return Kept(created, dropped, moved, waited)


async def _leaves(conn: psycopg.AsyncConnection) -> list[history.Leaf]:
    cur = await conn.execute(sql.HISTORY_LEAVES)
    return history.leaves_from(await cur.fetchall())


async def _change(conn: psycopg.AsyncConnection, statements: list[str]) -> bool:
    try:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            for statement in statements:
                await conn.execute(statement)  # type: ignore[arg-type]  # DDL built from names and dates
    except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
        return False
    return True


async def _drop(conn: psycopg.AsyncConnection, leaf: history.Leaf) -> int | None:
    """Drop one due leaf; the number of rows moved, or None when a lock was not free."""
    steps = history.drop_leaf_steps(leaf)
    if leaf.state == history.LOG:
        if not await _change(conn, [steps["detach"]]):
            return None
        await _drop_detached(conn, leaf.name)
        return 0
    try:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            await conn.execute(steps["lock"])  # type: ignore[arg-type]
            cur = await conn.execute(steps["nodes"])  # type: ignore[arg-type]
            nodes = bool((await cur.fetchone() or [False])[0])
            if nodes:
                await conn.execute(steps["flows"])  # type: ignore[arg-type]
            await conn.execute(steps["logs"])  # type: ignore[arg-type]
            await conn.execute(steps["steps"])  # type: ignore[arg-type]
            keepers = 0
            if nodes:
                cur = await conn.execute(steps["keepers"])  # type: ignore[arg-type]
                keepers = int((await cur.fetchone() or [0])[0])
            if keepers:
                await conn.execute(steps["keep"])  # type: ignore[arg-type]
            await conn.execute(steps["detach"])  # type: ignore[arg-type]
            if keepers:
                await conn.execute(steps["restore"])  # type: ignore[arg-type]
    except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
        return None
    await _drop_detached(conn, leaf.name)
    log.info("dropped history leaf %s (%s to %s)", leaf.name, leaf.lo, leaf.hi)
    return keepers


async def _drop_detached(conn: psycopg.AsyncConnection, name: str) -> None:
    """Drop a detached leaf: nothing else reads it, so nothing waits for it. One the
    lock_timeout turns away (a reader that began before the detach) is dropped at the
    next pass, with any a stopped leader left behind (history.ORPHAN_LEAVES)."""
    try:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            await conn.execute(f"DROP TABLE IF EXISTS {name}")  # type: ignore[arg-type]
    except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
        pass


class Partitions(Service):
    name = "partitions"
    interval = 10.0

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        await keep_partitions(conn)
        return False  # what waited for a lock is tried again at the next pass
