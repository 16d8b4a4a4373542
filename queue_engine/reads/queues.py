"""Queue figures: each queue's counts by state (capped, estimated above the cap), and the
console's per-queue stats."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from queue_engine import sql
from queue_engine.exceptions import FilterError
from queue_engine.models import JobRecord, QueueConfig
from queue_engine.payloads import text_problem
from queue_engine.states import ENDED_STATES, LIVE_STATES

__all__ = [
    "COUNT_CAP",
    "LIVE_SCAN",
    "SAMPLE_PER_SCAN",
    "QueueCounts",
    "QueueStats",
    "StateCount",
    "exact_dead_count",
    "queue_counts",
    "queue_stats",
]

COUNT_CAP = 1_000  # per queue and state; above it the rollup (or a sample) answers


LIVE_SCAN = 10_000  # live jobs read at most to count them all exactly


# Rows a sample of a larger live table reads, as whole pages chosen at random: a
# state holding a share s of the table is estimated to within about 2 * sqrt(s(1-s)
# / pages sampled) of the table (pages hold jobs enqueued together, often alike).
SAMPLE_PER_SCAN = 3


@dataclass(frozen=True)
class StateCount:
    count: int
    # False: an estimate, never below what was counted. History: from the rollup, the exact
    # count being above the cap. Live, when more than LIVE_SCAN jobs can still run: from a
    # sample of the table, for available, running and blocked jobs only above the cap.
    exact: bool


@dataclass(frozen=True)
class QueueCounts:
    queue: str
    paused: bool
    states: dict[str, StateCount]  # every live and ended state, zero included

    @property
    def live(self) -> int:
        return sum(self.states[s].count for s in LIVE_STATES)


def queue_counts(
    queue: str | None = None, *, cap: int = COUNT_CAP, scan: int = LIVE_SCAN
) -> list[QueueCounts]:
    """Jobs per state for every queue (or one), each read boundedly, exact or estimated.

    Live: exact while at most `scan` jobs can still run; beyond that, available, running
    and blocked jobs are exact up to `cap`, scheduled ones while they are few, and the
    rest are estimated from a sample.
    A history count above `cap` is the rollup's count of what ended within the
    queue's retention window (never less than cap + 1). Estimates are `exact=False`.
    """
    if queue is not None and (not isinstance(queue, str) or text_problem(queue) is not None):
        raise FilterError(f"queue must be a queue name, not {queue!r}.")
    params = {"queue": queue, "cap": cap, "scan": scan, "sample": SAMPLE_PER_SCAN * scan}
    with connection.cursor() as cursor:
        cursor.execute(sql.QUEUES, params)
        queues = cursor.fetchall()
        counts = _live_counts(cursor, [name for name, _ in queues], params)
        cursor.execute(sql.CAPPED_HISTORY_COUNTS, params)
        capped: list[str] = []
        for name, state, n in cursor.fetchall():
            counts[(name, state)] = StateCount(n, n <= cap)
            if n > cap:
                capped.append(name)
        if capped:
            cursor.execute(sql.ESTIMATED_HISTORY_COUNTS, {"queues": sorted(set(capped))})
            for name, *estimates in cursor.fetchall():
                for state, estimate in zip(ENDED_STATES, estimates, strict=True):
                    if not counts[(name, state)].exact:
                        counts[(name, state)] = StateCount(max(int(estimate or 0), cap + 1), False)
    return [
        QueueCounts(
            name,
            paused,
            {s: counts.get((name, s), StateCount(0, True)) for s in LIVE_STATES + ENDED_STATES},
        )
        for name, paused in queues
    ]


def _live_counts(
    cursor: Any, names: list[str], params: dict[str, Any]
) -> dict[tuple[str, str], StateCount]:
    cap, scan = params["cap"], params["scan"]
    cursor.execute(sql.LIVE_COUNTS, params)
    seen: dict[tuple[str, str], int] = {(n, s): c for n, s, c in cursor.fetchall()}
    if sum(seen.values()) <= scan:  # the whole live table was read
        return {key: StateCount(n, True) for key, n in seen.items()}
    cursor.execute(sql.LIVE_ESTIMATES, params)
    sampled = {(n, s): int(c) for n, s, c in cursor.fetchall()}

    def estimate(key: tuple[str, str], counted: int) -> StateCount:
        return StateCount(max(sampled.get(key, 0), counted, seen.get(key, 0)), False)

    counts: dict[tuple[str, str], StateCount] = {}
    cursor.execute(sql.CAPPED_LIVE_COUNTS, params)
    for name, available, running, blocked in cursor.fetchall():
        for state, n in (("available", available), ("running", running), ("blocked", blocked)):
            counts[(name, state)] = StateCount(n, True) if n <= cap else estimate((name, state), n)
    # Scheduled jobs have no index with their queue: when the sample finds few, try to
    # count them all (at most `scan`); when it finds many, that would only confirm it.
    few = sum(n for (_, state), n in sampled.items() if state == "scheduled") <= 2 * scan
    scheduled: dict[str, int] = {}
    if few:
        cursor.execute(sql.CAPPED_SCHEDULED_COUNTS, params)
        scheduled = dict(cursor.fetchall())
    all_scheduled = few and sum(scheduled.values()) <= scan
    for name in names:
        key = (name, "scheduled")
        n = scheduled.get(name, 0)
        counts[key] = StateCount(n, True) if all_scheduled else estimate(key, n)
    return counts


@dataclass
class QueueStats:
    name: str
    paused: bool = False
    max_concurrency: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    exact: dict[str, bool] = field(default_factory=dict)
    oldest_available: datetime | None = None

    @property
    def available(self) -> int:
        return self.counts.get("available", 0)

    @property
    def scheduled(self) -> int:
        return self.counts.get("scheduled", 0)

    @property
    def running(self) -> int:
        return self.counts.get("running", 0)

    @property
    def blocked(self) -> int:
        return self.counts.get("blocked", 0)

    @property
    def live_breakdown(self) -> list[tuple[str, int]]:
        """(state, count) of every live state that has jobs, in the states' order."""
        return [(s, self.counts[s]) for s in LIVE_STATES if self.counts.get(s)]

    @property
    def dead(self) -> int:
        return self.counts.get("failed", 0)

    @property
    def dead_capped(self) -> bool:
        return not self.exact.get("failed", True)

    @property
    def estimated(self) -> set[str]:
        """Live states whose count is an estimate (a live table past LIVE_SCAN)."""
        return {s for s in LIVE_STATES if not self.exact.get(s, True)}

    @property
    def latency(self) -> timedelta | None:
        if self.oldest_available is None:
            return None
        return max(timezone.now() - self.oldest_available, timedelta(0))


def queue_stats(name: str | None = None) -> list[QueueStats]:
    """Every queue (or one): live depth by state (estimated on a large live table), history
    capped, oldest waiting job."""
    stats = []
    limits = dict(QueueConfig.objects.values_list("name", "max_concurrency"))
    with connection.cursor() as cursor:
        cursor.execute(sql.OLDEST_AVAILABLE, {"queue": name})
        waiting = dict(cursor.fetchall())
    for queue in queue_counts(name):
        stats.append(
            QueueStats(
                name=queue.queue,
                paused=queue.paused,
                max_concurrency=limits.get(queue.queue),
                counts={s: c.count for s, c in queue.states.items()},
                exact={s: c.exact for s, c in queue.states.items()},
                oldest_available=waiting.get(queue.queue),
            )
        )
    return stats


def exact_dead_count(queue: str) -> int:
    """Exact size of one queue's dead letter, for a confirmation (not for page loads)."""
    return JobRecord.objects.filter(queue=queue, state="failed").count()
