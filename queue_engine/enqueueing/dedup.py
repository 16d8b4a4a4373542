"""Inserting a job under a dedup key, or finding the live job that holds the key.

The insert skips a key a live job holds (ON CONFLICT DO NOTHING), and the look-up that
follows may find no holder: it ended between the two statements, freeing its key, so
the insert is tried again. Each try that misses means a holder ended in that instant;
after DEDUP_ATTEMPTS in a row the key is changing hands faster than an enqueue can
settle on one, and the caller gives up with an error that says so rather than loop.
"""

from __future__ import annotations

from typing import Any

import psycopg

from queue_engine import sql

DEDUP_ATTEMPTS = 5

type Attempt = tuple[tuple[Any, ...] | None, int | None]


def insert_or_find_holder(
    cursor: psycopg.Cursor[Any],
    statement: str,
    params: dict[str, Any],
    kind: str,
    dedup_key: str,
    *,
    prepare: bool | None = None,
) -> Attempt:
    """One try: (the row `statement` returned, None), else (None, the holder's id), or
    (None, None) when the holder ended meanwhile and the caller should try again."""
    cursor.execute(statement, params, prepare=prepare)  # type: ignore[arg-type]  # constants
    found = cursor.fetchone()
    if found is not None:
        return found, None
    cursor.execute(sql.SELECT_JOB_ID_BY_DEDUP_KEY, [kind, dedup_key])
    holder = cursor.fetchone()
    return None, (int(holder[0]) if holder is not None else None)


async def insert_or_find_holder_async(
    conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any], kind: str, dedup_key: str
) -> Attempt:
    """The same try, on an async connection."""
    cur = await conn.execute(statement, params)  # type: ignore[arg-type]  # constants
    found = await cur.fetchone()
    if found is not None:
        return found, None
    cur = await conn.execute(sql.SELECT_JOB_ID_BY_DEDUP_KEY, [kind, dedup_key])
    holder = await cur.fetchone()
    return None, (int(holder[0]) if holder is not None else None)


__all__ = ["DEDUP_ATTEMPTS", "insert_or_find_holder", "insert_or_find_holder_async"]
