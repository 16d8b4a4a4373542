"""Failures: recent ones grouped by error, and the dead letter grouped by queue, kind and
error."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from queue_engine import sql
from queue_engine.models import JobRecord

__all__ = [
    "DEAD_SCAN",
    "DIGITS",
    "DeadGroup",
    "FailureGroup",
    "dead_group_batches",
    "dead_group_queryset",
    "dead_groups",
    "recent_failures",
]


@dataclass
class FailureGroup:
    error_class: str
    message: str
    count: int
    last_id: int
    last_at: datetime | None
    queues: list[str]
    kinds: list[str]


DIGITS = re.compile(r"\d+")


def recent_failures(scan: int = 500, limit: int = 8) -> list[FailureGroup]:
    """The newest dead jobs grouped by error class and message, most recent group first."""
    rows = (
        JobRecord.objects.filter(state="failed")
        .annotate(
            error_class=RawSQL(sql.LAST_ERROR_CLASS, []),
            error_message=RawSQL(sql.LAST_ERROR_MESSAGE, []),
        )
        .order_by("-id")
        .values("id", "queue", "kind", "finished_at", "error_class", "error_message")[:scan]
    )
    groups: dict[tuple[str, str], FailureGroup] = {}
    for row in rows:
        message = row["error_message"] or ""
        # "card for order 3 was declined" and "... order 9 ..." are the same failure.
        key = (row["error_class"] or "", DIGITS.sub("#", message))
        group = groups.get(key)
        if group is None:
            group = groups[key] = FailureGroup(
                key[0], message, 0, row["id"], row["finished_at"], [], []
            )
        group.count += 1
        if row["queue"] not in group.queues:
            group.queues.append(row["queue"])
        if row["kind"] not in group.kinds:
            group.kinds.append(row["kind"])
    return list(groups.values())[:limit]


@dataclass
class DeadGroup:
    queue: str
    kind: str
    error_class: str
    count: int
    last_id: int
    last_at: datetime | None
    last_message: str


DEAD_SCAN = 5000


def dead_groups(scan: int = DEAD_SCAN) -> tuple[list[DeadGroup], bool]:
    """Groups over the newest `scan` dead jobs, and whether older dead jobs were left out."""
    with connection.cursor() as cursor:
        cursor.execute(sql.DEAD_GROUPS, {"scan": scan + 1})
        groups = [DeadGroup(*row) for row in cursor.fetchall()]
    total = sum(g.count for g in groups)
    return groups, total > scan


def dead_group_queryset(queue: str, kind: str, error_class: str, upto: int) -> QuerySet[JobRecord]:
    """A dead-letter group's jobs up to id `upto` (through the qe_rec_dead_error index)."""
    return (
        JobRecord.objects.filter(queue=queue, kind=kind, state="failed", id__lte=upto)
        .annotate(error_class=RawSQL(sql.LAST_ERROR_CLASS, []))
        .filter(error_class=error_class)
    )


def dead_group_batches(
    queue: str, kind: str, error_class: str, upto: int, batch_size: int = 1000
) -> Iterator[list[int]]:
    after = 0
    while True:
        ids = list(
            dead_group_queryset(queue, kind, error_class, upto)
            .filter(id__gt=after)
            .order_by("id")
            .values_list("id", flat=True)[:batch_size]
        )
        if not ids:
            return
        after = ids[-1]
        yield ids
