"""Jobs, live and ended together: keyset pages by id under the statement timeout, one
job, its states, its log lines."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import DateTimeField, F, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from queue_engine import sql
from queue_engine.exceptions import FilterError, PayloadError
from queue_engine.models import Job, JobLog, JobRecord, JobStep
from queue_engine.payloads import dump_json, text_problem
from queue_engine.reads.timeout import time_limited
from queue_engine.states import ENDED_STATES, LIVE_STATES, State

__all__ = [
    "LOG_TAIL",
    "MAX_PAGE_SIZE",
    "PAGE_SIZE",
    "ROW_FIELDS",
    "SCAN_IDS",
    "SORT_WINDOW",
    "STEPS_SHOWN",
    "JobFilter",
    "JobPage",
    "JobRow",
    "SortedPage",
    "check_filter",
    "find_job",
    "job_rows",
    "job_states",
    "job_steps",
    "jobs_with_steps",
    "like_pattern",
    "list_jobs",
    "log_around",
    "log_lines_after",
    "log_tail",
    "sorted_jobs",
    "stopping_jobs",
    "succeeded_flow_nodes",
]

PAGE_SIZE = 50


SCAN_IDS = 20_000  # ids a page searches at most when no index serves its filters


MAX_PAGE_SIZE = 500


@dataclass(frozen=True)
class JobRow:
    id: int
    queue: str
    kind: str
    name: str
    state: str
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None  # None while the job is live
    progress: float | None
    last_error: str | None

    @property
    def display_name(self) -> str:
        return self.name or self.kind


@dataclass(frozen=True)
class JobFilter:
    """What the job list shows. Every field is optional; they combine with AND.

    `text` matches inside the display name (case-insensitive). `since`/`until`
    bound the enqueue time of live jobs and the end time of ended ones.
    `payload`/`meta` match jobs whose payload/meta contain this JSON object.
    `error_class` is the class of the job's last error ("" for a job with no error),
    `message` matches inside its last error's message (case-insensitive), `worker` is
    the worker that ran it last (its id, or its host: "web-1" matches "web-1:4242"),
    `group` its group key (exactly: a tenant's jobs, say).
    """

    queue: str | None = None
    state: State | None = None
    kind: str | None = None
    text: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    payload: Mapping[str, Any] | None = None
    meta: Mapping[str, Any] | None = None
    error_class: str | None = None
    message: str | None = None
    worker: str | None = None
    group: str | None = None

    @property
    def scanned(self) -> bool:
        """Whether a page searches a bounded range of ids (see JobPage.partial): no index
        serves these filters, except the dead letter's for an error class in one queue."""
        indexed_error = self.state == "failed" and self.queue is not None
        return bool(
            self.text
            or self.payload
            or self.meta
            or self.message
            or self.worker
            or self.group
            or (self.error_class is not None and not indexed_error)
        )

    def params(self) -> dict[str, Any]:
        return {
            "queue": self.queue or None,
            "state": self.state or None,
            "kind": self.kind or None,
            "text": like_pattern(self.text) if self.text else None,
            "since": self.since,
            "until": self.until,
            "payload": json.dumps(self.payload) if self.payload else None,
            "meta": json.dumps(self.meta) if self.meta else None,
            "error_class": self.error_class,
            "message": like_pattern(self.message) if self.message else None,
            "worker": self.worker or None,
            "worker_host": like_pattern(self.worker + ":", inside=False) if self.worker else None,
            "group": self.group or None,
        }


@dataclass(frozen=True)
class JobPage:
    """One page of the job list, newest first, with the cursors to move on.

    `partial` is True when the page may hold fewer jobs than asked only because
    it searched a bounded range of ids (JobFilter.scanned: those filters have no
    index); following `older` (or `newer`) keeps searching from where it stopped.
    """

    jobs: list[JobRow]  # newest first
    newer: int | None  # pass as `after` for the next newer page; None: this is the newest
    older: int | None  # pass as `before` for the next older page; None: nothing older
    partial: bool = False


def list_jobs(
    where: JobFilter = JobFilter(),
    *,
    before: int | None = None,
    after: int | None = None,
    limit: int = PAGE_SIZE,
) -> JobPage:
    """One page of jobs, live and ended together, newest (highest id) first.

    Keyset pagination: `before=id` gives the page of older jobs, `after=id` the
    page of newer ones. With a filter no index serves (JobFilter.scanned) a page
    searches at most SCAN_IDS ids (see JobPage.partial), so it answers fast whatever the
    history holds. Raises NarrowFilter past CONSOLE_STATEMENT_TIMEOUT.
    """
    if before is not None and after is not None:
        raise FilterError("Give before or after, not both.")
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise FilterError(f"A page holds 1 to {MAX_PAGE_SIZE} jobs, not {limit}.")
    check_filter(where)
    for name, cursor_id in (("before", before), ("after", after)):
        if cursor_id is not None and (
            isinstance(cursor_id, bool)
            or not isinstance(cursor_id, int)
            or not 0 <= cursor_id < 2**63
        ):
            raise FilterError(f"{name} must be a job id (a whole number), not {cursor_id!r}.")
    with time_limited(), connection.cursor() as cursor:
        union = _union(cursor, where, before=before, after=after, limit=limit)
        cursor.execute(union.statement, union.params)
        rows = [JobRow(*row) for row in cursor.fetchall()]
    floor, ceiling, newest = union.floor, union.ceiling, union.newest
    if after is None:
        rows.sort(key=lambda r: r.id, reverse=True)
        page, more = rows[:limit], len(rows) > limit
        partial = not more and floor is not None and floor > 1
        older = page[-1].id if more else floor if partial else None
        return JobPage(
            page,
            newer=page[0].id if page and before is not None else before,
            older=older,
            partial=partial,
        )
    rows.sort(key=lambda r: r.id)
    page, more = rows[:limit], len(rows) > limit
    partial = not more and ceiling is not None and newest is not None and ceiling <= newest
    newer = page[-1].id if more else ceiling - 1 if partial and ceiling else None
    page.reverse()
    return JobPage(page, newer=newer, older=page[-1].id if page else after + 1, partial=partial)


SORT_WINDOW = 10_000  # the newest matching jobs a sorted list orders


@dataclass(frozen=True)
class SortedPage:
    """One page of the newest SORT_WINDOW matching jobs in another order than their id."""

    jobs: list[JobRow]
    number: int  # from 1
    more: bool  # a next page exists
    window_full: bool  # more jobs match than the window holds: older ones are left out


def sorted_jobs(
    where: JobFilter = JobFilter(),
    *,
    sort: str,
    descending: bool = True,
    page: int = 1,
    limit: int = PAGE_SIZE,
) -> SortedPage:
    """Page `page` of the newest SORT_WINDOW jobs matching `where`, ordered by `sort` (one
    of sql.JOB_SORT_KEYS: created, finished, runtime, attempts), ties by id. Live jobs have
    no finish and no run time: they come last. Raises NarrowFilter past the statement
    timeout."""
    if sort not in sql.JOB_SORT_KEYS:
        raise FilterError(f"Sort by one of {', '.join(sql.JOB_SORT_KEYS)}, not {sort!r}.")
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise FilterError(f"A page holds 1 to {MAX_PAGE_SIZE} jobs, not {limit}.")
    pages = -(-SORT_WINDOW // limit)
    if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= pages:
        raise FilterError(f"page must be a whole number from 1 to {pages}, not {page!r}.")
    check_filter(where)
    with time_limited(), connection.cursor() as cursor:
        union = _union(cursor, where, before=None, after=None, limit=SORT_WINDOW)
        statement = sql.sorted_jobs_window(union.statement, sort, descending)
        params = {
            **union.params,
            "window": SORT_WINDOW,
            "page_size": limit + 1,
            "offset": (page - 1) * limit,
        }
        cursor.execute(statement, params)
        found = cursor.fetchall()
    rows = [JobRow(*row[:-1]) for row in found]
    window_full = bool(found and found[0][-1])
    return SortedPage(rows[:limit], page, len(rows) > limit, window_full)


def check_filter(where: JobFilter) -> None:
    """Refuse a filter the list cannot apply as written, with what to write instead."""
    if where.state is not None and where.state not in LIVE_STATES + ENDED_STATES:
        raise FilterError(
            f"Unknown state {where.state!r}; the states are "
            f"{', '.join(LIVE_STATES + ENDED_STATES)}."
        )
    for name, value in (("payload", where.payload), ("meta", where.meta)):
        if value is not None and not isinstance(value, Mapping):
            raise FilterError(f"The {name} filter must be a JSON object (a dict).")
        if value is not None:
            try:
                dump_json(value, what=f"the {name} filter")
            except PayloadError as exc:
                raise FilterError(str(exc)) from None
    for name, moment in (("since", where.since), ("until", where.until)):
        if moment is not None and (not isinstance(moment, datetime) or timezone.is_naive(moment)):
            raise FilterError(
                f"{name} must be a datetime with a time zone, not {moment!r}; "
                "for example datetime(2026, 1, 1, tzinfo=UTC)."
            )
    for name, text in (
        ("queue", where.queue),
        ("kind", where.kind),
        ("text", where.text),
        ("error class", where.error_class),
        ("error message", where.message),
        ("worker", where.worker),
        ("group key", where.group),
    ):
        if text is not None and (not isinstance(text, str) or text_problem(text) is not None):
            raise FilterError(f"The {name} filter must be text Postgres can store, not {text!r}.")


@dataclass(frozen=True)
class _Union:
    statement: str
    params: dict[str, Any]
    floor: int | None
    ceiling: int | None
    newest: int | None


def _union(
    cursor: Any, where: JobFilter, *, before: int | None, after: int | None, limit: int
) -> _Union:
    """The live and the ended jobs' statements for one page, as one UNION ALL (one
    snapshot: read one after the other, a job that ended in between was listed twice)."""
    history = (sql.HISTORY_OLDER, sql.HISTORY_NEWER)
    if where.since is not None and where.until is not None:
        cursor.execute(sql.DATABASE_NOW)
        now = cursor.fetchone()[0]
        # Walking ids from the newest costs the rows ended after the range; reading
        # the range first costs the rows in it: take the smaller (at a steady rate).
        if where.until - where.since < now - where.until:
            history = (sql.HISTORY_OLDER_IN_TIME_RANGE, sql.HISTORY_NEWER_IN_TIME_RANGE)
    tables = [(sql.LIVE_OLDER, sql.LIVE_NEWER, LIVE_STATES), (*history, ENDED_STATES)]
    floor = ceiling = newest = None
    if where.scanned:
        cursor.execute(sql.MAX_JOB_ID)
        newest = int(cursor.fetchone()[0])
        if after is None:
            floor = max((before if before is not None else newest + 1) - SCAN_IDS, 1)
        else:
            ceiling = after + SCAN_IDS + 1
    params = {
        **where.params(),
        "before": before,
        "after": after,
        "floor": floor,
        "ceiling": ceiling,
        "limit": limit + 1,
    }
    parts = [
        f"({newer_sql if after is not None else older_sql})"
        for older_sql, newer_sql, states in tables
        if where.state is None or where.state in states
    ]
    return _Union("\nUNION ALL\n".join(parts), params, floor, ceiling, newest)


def like_pattern(text: str, inside: bool = True) -> str:
    """A LIKE pattern matching `text` inside a value, or (not `inside`) at its start."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%" if inside else f"{escaped}%"


LOG_TAIL = 500


def find_job(job_id: int) -> Job | JobRecord | None:
    """The job, live or ended. A job keeps its id from one table to the other (it ends; a
    redrive brings it back): one found in neither may have moved back meanwhile."""
    live = Job.objects.filter(pk=job_id)
    return live.first() or JobRecord.objects.filter(pk=job_id).first() or live.first()


STEPS_SHOWN = 200


def job_steps(job_id: int, limit: int = STEPS_SHOWN) -> tuple[list[JobStep], int]:
    """The job's recorded steps in the order they finished (the first `limit`), and how
    many it recorded in all."""
    steps = JobStep.objects.filter(job_id=job_id)
    shown = list(steps.order_by("finished_at", "id")[:limit])
    return shown, len(shown) if len(shown) < limit else steps.count()


def jobs_with_steps(ids: list[int]) -> int:
    """How many of these jobs recorded durable steps."""
    if not ids:
        return 0
    return JobStep.objects.filter(job_id__in=ids).values("job_id").distinct().count()


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


# The jobs list's columns, in JobRow's order.
ROW_FIELDS = (
    "id", "queue", "kind", "name", "state", "priority", "attempt", "max_attempts", "run_at",
    "created_at", "started_at", "ended_at", "progress", "last_error",
)  # fmt: skip


def job_rows(ids: list[int]) -> dict[int, JobRow]:
    """The jobs list's rows for these ids, live or ended, in one query; gone ids are left out."""
    last_error = RawSQL(sql.LAST_ERROR_MESSAGE, [])
    live = Job.objects.filter(pk__in=ids).annotate(
        ended_at=Value(None, output_field=DateTimeField()), last_error=last_error
    )
    ended = JobRecord.objects.filter(pk__in=ids).annotate(
        ended_at=F("finished_at"), last_error=last_error
    )
    rows = live.values_list(*ROW_FIELDS).union(ended.values_list(*ROW_FIELDS), all=True)
    return {row[0]: JobRow(*row) for row in rows}


def log_tail(job_id: int, limit: int = LOG_TAIL) -> tuple[list[JobLog], bool]:
    """The last `limit` log lines of a job in order, and whether older lines were left out."""
    lines = list(JobLog.objects.filter(job_id=job_id).order_by("-id")[: limit + 1])
    cut = len(lines) > limit
    lines = lines[:limit]
    lines.reverse()
    return lines, cut


def log_around(job_id: int, line_id: int, limit: int = LOG_TAIL) -> tuple[list[JobLog], bool, bool]:
    """About `limit` log lines of a job centred on line `line_id` (a link to a line that
    the tail no longer shows), in order, and whether older and newer lines were left out."""
    half = limit // 2
    lines = JobLog.objects.filter(job_id=job_id)
    older = list(lines.filter(id__lt=line_id).order_by("-id")[: half + 1])
    newer = list(lines.filter(id__gte=line_id).order_by("id")[: limit - half + 1])
    cut_before, cut_after = len(older) > half, len(newer) > limit - half
    older = older[:half]
    older.reverse()
    return older + newer[: limit - half], cut_before, cut_after


def log_lines_after(job_id: int, after_id: int, limit: int = LOG_TAIL) -> list[JobLog]:
    return list(JobLog.objects.filter(job_id=job_id, id__gt=after_id).order_by("id")[:limit])
