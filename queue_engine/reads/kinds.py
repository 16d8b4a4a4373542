"""The Kinds page: every job kind seen, its jobs by state, its last hour, paused or not."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection

from queue_engine import sql
from queue_engine.definition.registry import is_engine_kind, registry
from queue_engine.models import KindControl

__all__ = [
    "KIND_SCAN",
    "KindPage",
    "KindRow",
    "kinds",
]

KIND_SCAN = 10_000  # live jobs, and dead ones, read at most to count them by kind


@dataclass
class KindRow:
    kind: str
    queues: list[str] = field(default_factory=list)
    registered: bool = False
    paused: bool = False
    changed_at: datetime | None = None
    changed_by: str = ""
    live: dict[str, int] = field(default_factory=dict)  # state: count
    dead: int = 0
    succeeded: int = 0  # the last hour, from the rollup
    failed: int = 0
    cancelled: int = 0
    retried: int = 0
    run_p50: float | None = None
    run_p95: float | None = None

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed + self.cancelled

    @property
    def failure_rate(self) -> float | None:
        """Failed attempts (retried or dead) per attempt that ended, over the last hour."""
        attempts = self.finished + self.retried
        return (self.failed + self.retried) / attempts if attempts else None

    @property
    def internal(self) -> bool:
        """The engine's own kind: listed, but not offered for pause."""
        return is_engine_kind(self.kind)

    def waiting(self) -> int:
        return self.live.get("available", 0) + self.live.get("scheduled", 0)


@dataclass
class KindPage:
    rows: list[KindRow]
    live_capped: bool  # the live table holds more than KIND_SCAN jobs: counts are floors
    dead_capped: bool

    @property
    def paused(self) -> list[KindRow]:
        return [row for row in self.rows if row.paused]


def kinds(scan: int = KIND_SCAN) -> KindPage:
    rows: dict[str, KindRow] = {}

    def row(kind: str) -> KindRow:
        found = rows.get(kind)
        if found is None:
            found = rows[kind] = KindRow(kind)
        return found

    for kind in registry.kinds():
        definition = registry.get(kind)
        entry = row(kind)
        entry.registered = True
        entry.queues = [definition.queue] if definition is not None else []
    for control in KindControl.objects.all():
        entry = row(control.kind)
        entry.paused = control.paused
        entry.changed_at = control.changed_at
        entry.changed_by = control.changed_by
    with connection.cursor() as cursor:
        cursor.execute(sql.KIND_LIVE_COUNTS, {"scan": scan})
        live = cursor.fetchall()
        for kind, queue, state, count in live:
            entry = row(kind)
            entry.live[state] = entry.live.get(state, 0) + count
            if queue not in entry.queues:
                entry.queues = sorted([*entry.queues, queue])
        cursor.execute(sql.KIND_DEAD_COUNTS, {"scan": scan})
        dead = cursor.fetchall()
        for kind, queue, count in dead:
            entry = row(kind)
            entry.dead += count
            if queue not in entry.queues:
                entry.queues = sorted([*entry.queues, queue])
        cursor.execute(sql.KIND_HOUR)
        for kind, queues, succeeded, failed, cancelled, retried, p50, p95 in cursor.fetchall():
            entry = row(kind)
            entry.queues = sorted(set(entry.queues) | set(queues))
            entry.succeeded, entry.failed = int(succeeded), int(failed)
            entry.cancelled, entry.retried = int(cancelled), int(retried)
            entry.run_p50, entry.run_p95 = p50, p95
        cursor.execute(sql.KINDS_OF_THE_WEEK)
        for (kind,) in cursor.fetchall():
            row(kind)
    return KindPage(
        rows=sorted(rows.values(), key=lambda r: (not r.paused, r.kind)),
        live_capped=sum(c for *_key, c in live) > scan,
        dead_capped=sum(c for *_key, c in dead) > scan,
    )
