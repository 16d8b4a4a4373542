"""The console's read side: bounded queries, keyset pages, capped counts.

Nothing here counts the whole history table: counts on it stop at a cap, lists
page by id, and every page's queries run under CONSOLE_STATEMENT_TIMEOUT
(`statement_timeout`), past which `NarrowFilter` says to narrow the filter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import DateTimeField, F, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from queue_engine import sql, tracking
from queue_engine.console import masking
from queue_engine.exceptions import PayloadError
from queue_engine.models import AuditEvent, Job, JobLog, JobRecord, QueueConfig, WorkerProcess
from queue_engine.payloads import dump_json
from queue_engine.statement_timeout import NarrowFilter as NarrowFilter
from queue_engine.statement_timeout import time_limited as time_limited

LIVE_STATES = ("available", "scheduled", "running", "blocked")
ENDED_STATES = ("succeeded", "failed", "cancelled")
STATES = LIVE_STATES + ENDED_STATES
PAGE_SIZE = 50
LOG_TAIL = 500
WORKER_ALIVE_AFTER = timedelta(seconds=15)  # workers heartbeat every 5 s at most

# Dead jobs grouped by queue and error class, over the newest %(scan)s only.
DEAD_GROUPS = """
SELECT queue, COALESCE(errors->-1->>'class', '') AS error_class, count(*) AS n,
       max(id) AS last_id, max(finished_at) AS last_at,
       (array_agg(left(errors->-1->>'message', 300) ORDER BY id DESC))[1] AS last_message,
       (array_agg(kind ORDER BY id DESC))[1] AS last_kind
  FROM (SELECT id, queue, kind, errors, finished_at FROM queue_engine_jobrecord
         WHERE state = 'failed' ORDER BY id DESC LIMIT %(scan)s) AS r
 GROUP BY 1, 2
 ORDER BY max(id) DESC
"""

LAST_ERROR_CLASS = "COALESCE(errors->-1->>'class', '')"
LAST_ERROR_MESSAGE = "left(errors->-1->>'message', 300)"


# --- queues ---------------------------------------------------------------------


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
    def dead(self) -> int:
        return self.counts.get("failed", 0)

    @property
    def dead_capped(self) -> bool:
        return not self.exact.get("failed", True)

    @property
    def estimated(self) -> set[str]:
        """Live states whose count is an estimate (a live table past tracking.LIVE_SCAN)."""
        return {
            s
            for s in ("available", "scheduled", "running", "blocked")
            if not self.exact.get(s, True)
        }

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
    for queue in tracking.queue_counts(name):
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


# --- workers --------------------------------------------------------------------


def workers() -> list[WorkerProcess]:
    return list(WorkerProcess.objects.order_by("host", "pid"))


def alive_workers() -> list[WorkerProcess]:
    since = timezone.now() - WORKER_ALIVE_AFTER
    return list(WorkerProcess.objects.filter(heartbeat_at__gte=since).order_by("host", "pid"))


# --- failures and the dead letter -------------------------------------------------


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
            error_class=RawSQL(LAST_ERROR_CLASS, []), error_message=RawSQL(LAST_ERROR_MESSAGE, [])
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
    error_class: str
    count: int
    last_id: int
    last_at: datetime | None
    last_message: str
    last_kind: str


DEAD_SCAN = 5000


def dead_groups(scan: int = DEAD_SCAN) -> tuple[list[DeadGroup], bool]:
    """Groups over the newest `scan` dead jobs, and whether older dead jobs were left out."""
    with connection.cursor() as cursor:
        cursor.execute(DEAD_GROUPS, {"scan": scan + 1})
        groups = [DeadGroup(*row) for row in cursor.fetchall()]
    total = sum(g.count for g in groups)
    return groups, total > scan


def dead_group_queryset(queue: str, error_class: str, upto: int) -> QuerySet[JobRecord]:
    return (
        JobRecord.objects.filter(queue=queue, state="failed", id__lte=upto)
        .annotate(error_class=RawSQL(LAST_ERROR_CLASS, []))
        .filter(error_class=error_class)
    )


def dead_group_batches(
    queue: str, error_class: str, upto: int, batch_size: int = 1000
) -> Iterator[list[int]]:
    after = 0
    while True:
        ids = list(
            dead_group_queryset(queue, error_class, upto)
            .filter(id__gt=after)
            .order_by("id")
            .values_list("id", flat=True)[:batch_size]
        )
        if not ids:
            return
        after = ids[-1]
        yield ids


# --- jobs -------------------------------------------------------------------------


RANGES = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
}


@dataclass
class JobFilters:
    """The jobs list's filters, read from and written back to the URL."""

    queue: str = ""
    state: str = ""
    kind: str = ""
    q: str = ""
    range: str = ""
    payload: str = ""
    meta: str = ""
    errors: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, params: Any) -> JobFilters:
        state = params.get("state", "").strip()
        span = params.get("range", "").strip()
        return cls(
            queue=params.get("queue", "").strip(),
            state=state if state in STATES else "",
            kind=params.get("kind", "").strip(),
            q=params.get("q", "").strip(),
            range=span if span in RANGES else "",
            payload=params.get("payload", "").strip(),
            meta=params.get("meta", "").strip(),
        )

    @property
    def active(self) -> bool:
        return bool(
            self.queue
            or self.state
            or self.kind
            or self.q
            or self.range
            or self.payload
            or self.meta
        )

    @property
    def job_id(self) -> int | None:
        """A search for "123" or "#123" names one job."""
        text = self.q.removeprefix("#")
        return int(text) if text.isdigit() and len(text) < 19 else None

    def since(self) -> datetime | None:
        return timezone.now() - RANGES[self.range] if self.range else None

    def tracking_filter(self) -> tracking.JobFilter:
        payload = self.containment("payload", self.payload)
        meta = self.containment("meta", self.meta)
        return tracking.JobFilter(
            queue=self.queue or None,
            state=self.state or None,  # type: ignore[arg-type]
            kind=self.kind or None,
            text=self.q or None,
            since=self.since(),
            payload=payload,
            meta=meta,
        )

    def containment(self, name: str, text: str) -> dict[str, Any] | None:
        """The filter, or None and why in `errors` when it is refused."""
        if not text:
            return None
        try:
            return containment_filter(name, text)
        except FilterProblem as exc:
            self.errors.append(f"{exc} It was left out.")
            return None


class FilterProblem(ValueError):
    """A jobs filter that cannot be applied as written; the message says why."""


CONTAINMENT_EXAMPLES = {"payload": '{"to": "a@example.com"}', "meta": '{"tenant": "acme"}'}


def containment_filter(name: str, text: str) -> dict[str, Any]:
    """A payload or meta containment filter (a JSON object), refused when it is not one,
    holds text Postgres cannot store, or names a key whose value the console masks: jobs
    found or not by a guessed value would tell that value."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise FilterProblem(
            f"The {name} filter must be a JSON object, like {CONTAINMENT_EXAMPLES[name]}."
        )
    try:
        dump_json(value, what=f"The {name} filter")
    except PayloadError as exc:
        raise FilterProblem(str(exc)) from None
    key = masking.masked_key_in(value)
    if key is not None:
        raise FilterProblem(
            f"The {name} filter names the key {key!r}, whose values the console masks "
            "(CONSOLE_MASKED_KEYS): filtering on it would reveal them. Filter on other keys."
        )
    return value


def job_page(
    filters: JobFilters, before: int | None = None, after: int | None = None, limit: int = PAGE_SIZE
) -> tracking.JobPage:
    """One page of jobs, live and ended together, newest first; NarrowFilter past the
    statement timeout. A filter the list cannot answer is said in `filters.errors`."""
    try:
        return tracking.list_jobs(
            filters.tracking_filter(), before=before, after=after, limit=limit
        )
    except tracking.TrackingError as exc:
        filters.errors.append(str(exc))  # shown on the page, with no jobs
        return tracking.JobPage([], None, None)


def find_job(job_id: int) -> Job | JobRecord | None:
    """The job, live or ended. A job keeps its id from one table to the other (it ends; a
    redrive brings it back): one found in neither may have moved back meanwhile."""
    live = Job.objects.filter(pk=job_id)
    return live.first() or JobRecord.objects.filter(pk=job_id).first() or live.first()


def job_states(ids: list[int]) -> dict[int, str]:
    """The current state of each of these jobs that still exists, live or ended (one
    statement, so one snapshot: a job moving between the tables is counted once)."""
    live = Job.objects.filter(pk__in=ids).values_list("id", "state")
    ended = JobRecord.objects.filter(pk__in=ids).values_list("id", "state")
    return dict(live.union(ended, all=True))


def stopping_jobs(ids: list[int]) -> set[int]:
    """Those of these jobs running and already asked to stop (cancel leaves them out)."""
    found = Job.objects.filter(pk__in=ids, state="running", meta__has_key="cancel_requested")
    return set(found.values_list("id", flat=True))


def succeeded_flow_nodes(ids: list[int]) -> set[int]:
    """Those of these jobs that succeeded as flow nodes (retry leaves them out)."""
    found = JobRecord.objects.filter(pk__in=ids, state="succeeded", flow_id__isnull=False)
    return set(found.values_list("id", flat=True))


# The jobs list's columns, in tracking.JobRow's order.
ROW_FIELDS = (
    "id", "queue", "kind", "name", "state", "priority", "attempt", "max_attempts", "run_at",
    "created_at", "started_at", "ended_at", "progress", "last_error",
)  # fmt: skip


def job_rows(ids: list[int]) -> dict[int, tracking.JobRow]:
    """The jobs list's rows for these ids, live or ended, in one query; gone ids are left out."""
    last_error = RawSQL(LAST_ERROR_MESSAGE, [])
    live = Job.objects.filter(pk__in=ids).annotate(
        ended_at=Value(None, output_field=DateTimeField()), last_error=last_error
    )
    ended = JobRecord.objects.filter(pk__in=ids).annotate(
        ended_at=F("finished_at"), last_error=last_error
    )
    rows = live.values_list(*ROW_FIELDS).union(ended.values_list(*ROW_FIELDS), all=True)
    return {row[0]: tracking.JobRow(*row) for row in rows}


NEWER_CAP = 99


def newer_jobs(filters: JobFilters, after: int, cap: int = NEWER_CAP) -> tuple[int, bool]:
    """How many jobs newer than `after` match the filters (at most `cap`), and whether more do."""
    page = job_page(filters, after=after, limit=cap)
    return len(page.jobs), page.newer is not None


def log_tail(job_id: int, limit: int = LOG_TAIL) -> tuple[list[JobLog], bool]:
    """The last `limit` log lines of a job in order, and whether older lines were left out."""
    lines = list(JobLog.objects.filter(job_id=job_id).order_by("-id")[: limit + 1])
    cut = len(lines) > limit
    lines = lines[:limit]
    lines.reverse()
    return lines, cut


def log_lines_after(job_id: int, after_id: int, limit: int = LOG_TAIL) -> list[JobLog]:
    return list(JobLog.objects.filter(job_id=job_id, id__gt=after_id).order_by("id")[:limit])


# --- audit ------------------------------------------------------------------------


def audit_page(
    before: int | None, actor: str = "", action: str = "", limit: int = PAGE_SIZE
) -> tuple[list[AuditEvent], int | None]:
    qs = AuditEvent.objects.order_by("-id")
    if before is not None:
        qs = qs.filter(id__lt=before)
    if actor:
        qs = qs.filter(actor=actor)
    if action:
        qs = qs.filter(action=action)
    events = list(qs[: limit + 1])
    older = events[limit - 1].id if len(events) > limit else None
    return events[:limit], older
