"""Metric series: throughput, failures, wait and run times per step, from the rollup plus
the few rows it has not seen yet."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection

from queue_engine import sql
from queue_engine.exceptions import FilterError

__all__ = [
    "MAX_POINTS",
    "MAX_WINDOW",
    "MIN_WINDOW",
    "STEPS",
    "KindFailures",
    "Series",
    "SeriesPoint",
    "kind_failures",
    "metric_series",
    "queue_series",
    "rolled_up_to",
    "step_for",
]

MIN_WINDOW = timedelta(minutes=15)


MAX_WINDOW = timedelta(days=30)


STEPS = (60, 300, 900, 3600, 21600, 86400)  # seconds; the first giving at most MAX_POINTS


MAX_POINTS = 200


@dataclass(frozen=True)
class SeriesPoint:
    at: datetime  # start of the step
    succeeded: int
    failed: int
    cancelled: int
    retried: int
    wait_avg: float | None  # seconds from due to started; None: nothing started
    wait_p50: float | None
    wait_p95: float | None
    run_avg: float | None  # seconds from started to finished
    run_p50: float | None
    run_p95: float | None

    @property
    def ended(self) -> int:
        return self.succeeded + self.failed + self.cancelled


@dataclass(frozen=True)
class Series:
    step: timedelta
    start: datetime
    end: datetime
    points: list[SeriesPoint]


def step_for(window: timedelta) -> timedelta:
    """The bucket size a window is drawn with: at most MAX_POINTS points."""
    if not isinstance(window, timedelta):
        raise FilterError(
            f"A series window is a timedelta from 15 minutes to 30 days, such as "
            f"timedelta(hours=1), not {type(window).__name__} {window!r}."
        )
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        raise FilterError(
            f"A series window runs from 15 minutes to 30 days, not {window}; "
            "pick a window in that range."
        )
    seconds = window.total_seconds()
    step = next(s for s in STEPS if seconds / s <= MAX_POINTS)
    return timedelta(seconds=step)


def metric_series(
    window: timedelta, *, queue: str | None = None, kind: str | None = None
) -> Series:
    """Throughput (ended per step, by outcome) and latency (wait and run times) over `window`.

    Points are zero-filled and end with the current, partial step. Closed
    buckets come from the rollup, the last minutes straight from the history.
    """
    if queue is not None and not isinstance(queue, str):
        raise FilterError(f"A series queue is a queue name or None, not {queue!r}.")
    return _series(window, None if queue is None else [queue], kind)[queue]


def queue_series(window: timedelta, queues: Sequence[str]) -> dict[str, Series]:
    """`metric_series` of each of these queues, read in one query."""
    if (
        isinstance(queues, str)
        or not isinstance(queues, Sequence)
        or not all(isinstance(name, str) for name in queues)
    ):
        raise FilterError(
            f"queue_series takes a list of queue names, such as ['emails'], not {queues!r}."
        )
    if not queues:
        step_for(window)
        return {}
    series = _series(window, list(dict.fromkeys(queues)), None)
    return {name: s for name, s in series.items() if name is not None}


@dataclass(frozen=True)
class KindFailures:
    kind: str
    dead: int  # jobs of the kind that ended failed for good
    retried: int  # failed attempts that ran again
    ended: int


def kind_failures(window: timedelta, limit: int = 50) -> list[KindFailures]:
    """The kinds whose jobs died or retried over `window`, most dead first, from the
    rollup plus its live tail (the series' sources)."""
    _step, params = _bounds(window, None, None)
    with connection.cursor() as cursor:
        cursor.execute(sql.KIND_FAILURES, {**params, "limit": limit})
        return [KindFailures(*row) for row in cursor.fetchall()]


def rolled_up_to() -> datetime | None:
    """Up to when the rollup has counted; None until a worker's leader first ran it."""
    with connection.cursor() as cursor:
        cursor.execute(sql.ROLLED_UP_TO)
        row = cursor.fetchone()
    return None if row is None else row[0]


def _series(
    window: timedelta, queues: list[str] | None, kind: str | None
) -> dict[str | None, Series]:
    """One Series per queue of `queues`, or under None one of every queue together."""
    step, params = _bounds(window, queues, kind)
    with connection.cursor() as cursor:
        cursor.execute(sql.SERIES, params)
        names: list[str | None] = [None] if queues is None else list(queues)
        points: dict[str | None, list[SeriesPoint]] = {name: [] for name in names}
        for name, *values in cursor.fetchall():
            points[name].append(SeriesPoint(*values))
    return {name: Series(step, params["start"], params["end"], p) for name, p in points.items()}


def _bounds(
    window: timedelta, queues: list[str] | None, kind: str | None
) -> tuple[timedelta, dict[str, Any]]:
    """The window's step and sql._STITCHED's parameters: where hour buckets, minute
    buckets and the live tail each cover it."""
    step = step_for(window)
    if kind is not None and not isinstance(kind, str):
        raise FilterError(f"A series kind is a job kind name or None, not {kind!r}.")
    seconds = int(step.total_seconds())
    with connection.cursor() as cursor:
        cursor.execute(sql.ROLLED_UP_TO)
        row = cursor.fetchone()
        if row is None:
            cursor.execute(sql.DATABASE_NOW)
            row = (None, cursor.fetchone()[0])
    watermark, now = row
    end = _floor(now, seconds) + step
    start = end - step * math.ceil(window / step)
    final = watermark if watermark is not None else start
    hours_until = _floor(final, 3600) if seconds >= 3600 else start
    hours_until = min(max(hours_until, start), end)
    minutes_from = hours_until
    minutes_until = min(max(final, minutes_from), end)
    return step, {
        "start": start,
        "end": end,
        "step": seconds,
        "queues": queues,
        "kind": kind,
        "hours_until": hours_until,
        "minutes_from": minutes_from,
        "minutes_until": minutes_until,
        "raw_from": minutes_until,
    }


def _floor(moment: datetime, seconds: int) -> datetime:
    epoch = int(moment.timestamp()) // seconds * seconds
    return datetime.fromtimestamp(epoch, UTC)
