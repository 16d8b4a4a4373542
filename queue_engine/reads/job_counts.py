"""The jobs list's counts by state under filters the queue counts do not know (a kind, an
error class, a search...), each read boundedly: live jobs from the first LIVE_SCAN rows of
the live table, ended ones up to a cap through the history's indexes."""

from __future__ import annotations

from dataclasses import replace

from django.db import connection

from queue_engine import sql
from queue_engine.reads.jobs import JobFilter
from queue_engine.reads.queues import COUNT_CAP, LIVE_SCAN
from queue_engine.reads.timeout import time_limited
from queue_engine.states import EndedState, LiveState

__all__ = [
    "capped_history_count",
    "filtered_live_counts",
]


def filtered_live_counts(where: JobFilter, scan: int = LIVE_SCAN) -> dict[LiveState, int] | None:
    """Live jobs by state matching `where` (its state aside), or None when the live table
    holds more than `scan` jobs: counting them would read it all. NarrowFilter past the
    statement timeout."""
    params = {**replace(where, state=None).params(), "scan": scan}
    with time_limited(), connection.cursor() as cursor:
        cursor.execute(sql.FILTERED_LIVE_COUNTS, params)
        rows = cursor.fetchall()
    if sum(read for _state, _n, read in rows) > scan:
        return None
    return {state: n for state, n, _read in rows}


def capped_history_count(where: JobFilter, state: EndedState, cap: int = COUNT_CAP) -> int:
    """Jobs that ended in `state` matching `where`, counted up to cap + 1 (more: cap + 1).
    Only for filters an index serves (the caller's to say); NarrowFilter past the timeout."""
    params = {**replace(where, state=state).params(), "cap": cap}
    with time_limited(), connection.cursor() as cursor:
        cursor.execute(sql.FILTERED_HISTORY_COUNT, params)
        return int(cursor.fetchone()[0])
