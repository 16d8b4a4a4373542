"""The read side for the console: queue counts, metric series, the job list.

Every function answers fast on a large history: the live table is counted
exactly while it holds at most LIVE_SCAN jobs (above that, counts stop at
COUNT_CAP where an index allows and the rest are estimated from a sample),
history counts stop at COUNT_CAP and above it come from the metrics rollup,
series read the rollup plus the few rows it has not seen yet,
and the job list pages by id under CONSOLE_STATEMENT_TIMEOUT
(`statement_timeout.NarrowFilter` past it). All times come from the database clock.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from django.db import connection
from django.utils import timezone

from queue_engine import sql
from queue_engine.exceptions import PayloadError
from queue_engine.payloads import dump_json, text_problem
from queue_engine.statement_timeout import time_limited

LiveState = Literal["available", "scheduled", "running", "blocked"]
EndedState = Literal["succeeded", "failed", "cancelled"]
State = LiveState | EndedState
LIVE_STATES: tuple[LiveState, ...] = ("available", "scheduled", "running", "blocked")
ENDED_STATES: tuple[EndedState, ...] = ("succeeded", "failed", "cancelled")

COUNT_CAP = 1_000  # per queue and state; above it the rollup (or a sample) answers
LIVE_SCAN = 10_000  # live jobs read at most to count them all exactly
# Rows a sample of a larger live table reads, as whole pages chosen at random: a
# state holding a share s of the table is estimated to within about 2 * sqrt(s(1-s)
# / pages sampled) of the table (pages hold jobs enqueued together, often alike).
SAMPLE_PER_SCAN = 3
MIN_WINDOW = timedelta(minutes=15)
MAX_WINDOW = timedelta(days=30)
STEPS = (60, 300, 900, 3600, 21600, 86400)  # seconds; the first giving at most MAX_POINTS
MAX_POINTS = 200
PAGE_SIZE = 50
SCAN_IDS = 20_000  # ids a page with a text, payload or meta filter searches at most
MAX_PAGE_SIZE = 500


class TrackingError(ValueError):
    """A read that cannot be answered as asked."""


# --- counts ---------------------------------------------------------------------------


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
        raise TrackingError(f"queue must be a queue name, not {queue!r}.")
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


# --- series ---------------------------------------------------------------------------


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
        raise TrackingError(
            f"A series window is a timedelta from 15 minutes to 30 days, such as "
            f"timedelta(hours=1), not {type(window).__name__} {window!r}."
        )
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        raise TrackingError(
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
        raise TrackingError(f"A series queue is a queue name or None, not {queue!r}.")
    return _series(window, None if queue is None else [queue], kind)[queue]


def queue_series(window: timedelta, queues: Sequence[str]) -> dict[str, Series]:
    """`metric_series` of each of these queues, read in one query."""
    if (
        isinstance(queues, str)
        or not isinstance(queues, Sequence)
        or not all(isinstance(name, str) for name in queues)
    ):
        raise TrackingError(
            f"queue_series takes a list of queue names, such as ['emails'], not {queues!r}."
        )
    if not queues:
        step_for(window)
        return {}
    series = _series(window, list(dict.fromkeys(queues)), None)
    return {name: s for name, s in series.items() if name is not None}


def _series(
    window: timedelta, queues: list[str] | None, kind: str | None
) -> dict[str | None, Series]:
    """One Series per queue of `queues`, or under None one of every queue together."""
    step = step_for(window)
    if kind is not None and not isinstance(kind, str):
        raise TrackingError(f"A series kind is a job kind name or None, not {kind!r}.")
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
        cursor.execute(
            sql.SERIES,
            {
                "start": start,
                "end": end,
                "step": seconds,
                "queues": queues,
                "kind": kind,
                "hours_until": hours_until,
                "minutes_from": minutes_from,
                "minutes_until": minutes_until,
                "raw_from": minutes_until,
            },
        )
        names: list[str | None] = [None] if queues is None else list(queues)
        points: dict[str | None, list[SeriesPoint]] = {name: [] for name in names}
        for name, *values in cursor.fetchall():
            points[name].append(SeriesPoint(*values))
    return {name: Series(step, start, end, p) for name, p in points.items()}


def _floor(moment: datetime, seconds: int) -> datetime:
    epoch = int(moment.timestamp()) // seconds * seconds
    return datetime.fromtimestamp(epoch, UTC)


# --- job list -------------------------------------------------------------------------


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
    """

    queue: str | None = None
    state: State | None = None
    kind: str | None = None
    text: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    payload: Mapping[str, Any] | None = None
    meta: Mapping[str, Any] | None = None

    def params(self) -> dict[str, Any]:
        return {
            "queue": self.queue or None,
            "state": self.state or None,
            "kind": self.kind or None,
            "text": _like(self.text) if self.text else None,
            "since": self.since,
            "until": self.until,
            "payload": json.dumps(self.payload) if self.payload else None,
            "meta": json.dumps(self.meta) if self.meta else None,
        }


@dataclass(frozen=True)
class JobPage:
    """One page of the job list, newest first, with the cursors to move on.

    `partial` is True when the page may hold fewer jobs than asked only because
    it searched a bounded range of ids (filters on text, payload or meta have no
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
    page of newer ones. With a text, payload or meta filter a page searches at
    most SCAN_IDS ids (see JobPage.partial), so it answers fast whatever the
    history holds. Raises NarrowFilter past CONSOLE_STATEMENT_TIMEOUT.
    """
    if before is not None and after is not None:
        raise TrackingError("Give before or after, not both.")
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise TrackingError(f"A page holds 1 to {MAX_PAGE_SIZE} jobs, not {limit}.")
    if where.state is not None and where.state not in LIVE_STATES + ENDED_STATES:
        raise TrackingError(
            f"Unknown state {where.state!r}; the states are "
            f"{', '.join(LIVE_STATES + ENDED_STATES)}."
        )
    for name, value in (("payload", where.payload), ("meta", where.meta)):
        if value is not None and not isinstance(value, Mapping):
            raise TrackingError(f"The {name} filter must be a JSON object (a dict).")
        if value is not None:
            try:
                dump_json(value, what=f"the {name} filter")
            except PayloadError as exc:
                raise TrackingError(str(exc)) from None
    for name, cursor_id in (("before", before), ("after", after)):
        if cursor_id is not None and (
            isinstance(cursor_id, bool)
            or not isinstance(cursor_id, int)
            or not 0 <= cursor_id < 2**63
        ):
            raise TrackingError(f"{name} must be a job id (a whole number), not {cursor_id!r}.")
    for name, moment in (("since", where.since), ("until", where.until)):
        if moment is not None and (not isinstance(moment, datetime) or timezone.is_naive(moment)):
            raise TrackingError(
                f"{name} must be a datetime with a time zone, not {moment!r}; "
                "for example datetime(2026, 1, 1, tzinfo=UTC)."
            )
    for name, text in (("queue", where.queue), ("kind", where.kind), ("text", where.text)):
        if text is not None and (not isinstance(text, str) or text_problem(text) is not None):
            raise TrackingError(f"The {name} filter must be text Postgres can store, not {text!r}.")
    with time_limited(), connection.cursor() as cursor:
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
        if where.text or where.payload or where.meta:
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
        # Both tables in one statement, so one snapshot: read one after the other, a job
        # that ended in between was listed twice (live, then ended).
        parts = [
            f"({newer_sql if after is not None else older_sql})"
            for older_sql, newer_sql, states in tables
            if where.state is None or where.state in states
        ]
        cursor.execute("\nUNION ALL\n".join(parts), params)
        rows = [JobRow(*row) for row in cursor.fetchall()]
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


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# --- flows ----------------------------------------------------------------------------

FLOW_STATES = ("running", "succeeded", "failed", "cancelled")
MAX_FLOW_NODES = 500  # nodes a flow graph holds at most (the lowest ids); counts cover all


@dataclass(frozen=True)
class FlowRow:
    id: int
    name: str
    state: str
    rerun_of: int | None
    created_at: datetime
    finished_at: datetime | None
    nodes: dict[str, int]  # node count by job state; states with none left out
    removed_nodes: int = 0  # removed by an operator: gone from the counts above

    @classmethod
    def from_row(cls, row: tuple[Any, ...], nodes: dict[str, int]) -> FlowRow:
        """From a row of id, name, state, rerun_of, created_at, finished_at, removed_nodes."""
        id, name, state, rerun_of, created_at, finished_at, removed_nodes = row
        return cls(
            id=id,
            name=name,
            state=state,
            rerun_of=rerun_of,
            created_at=created_at,
            finished_at=finished_at,
            nodes=nodes,
            removed_nodes=removed_nodes,
        )

    @property
    def total(self) -> int:
        return sum(self.nodes.values())

    @property
    def done(self) -> int:
        return self.nodes.get("succeeded", 0)

    @property
    def took(self) -> timedelta | None:
        return self.finished_at - self.created_at if self.finished_at else None


@dataclass(frozen=True)
class FlowFilter:
    """What the flow list shows: a state, text inside the name, a creation time range."""

    state: str | None = None
    text: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class FlowPage:
    flows: list[FlowRow]  # newest first
    newer: int | None  # as in JobPage
    older: int | None


@dataclass(frozen=True)
class FlowNode:
    id: int  # the job id
    key: str
    kind: str
    name: str
    queue: str
    state: str
    attempt: int
    max_attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    progress: float | None
    progress_message: str
    last_error: str | None
    output: Any  # the result when it takes at most 4 kB (None while live)
    output_size: int | None  # bytes the result takes (None while live)

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> FlowNode:
        """From a row of sql.FLOW_NODES."""
        (
            id,
            key,
            kind,
            name,
            queue,
            state,
            attempt,
            max_attempts,
            created_at,
            started_at,
            finished_at,
            progress,
            progress_message,
            last_error,
            output,
            output_size,
        ) = row
        return cls(
            id=id,
            key=key,
            kind=kind,
            name=name,
            queue=queue,
            state=state,
            attempt=attempt,
            max_attempts=max_attempts,
            created_at=created_at,
            started_at=started_at,
            finished_at=finished_at,
            progress=progress,
            progress_message=progress_message,
            last_error=last_error,
            # Django's connection hands jsonb over as text (its JSONField decodes it).
            output=_json_value(output),
            output_size=output_size,
        )

    @property
    def display_name(self) -> str:
        return self.name or self.kind


@dataclass(frozen=True)
class FlowGraph:
    """A flow ready to draw: its nodes (at most MAX_FLOW_NODES) and the edges between
    them (`dynamic`: added at run time into a join); `flow.nodes` counts every node."""

    flow: FlowRow
    nodes: list[FlowNode]
    edges: list[tuple[int, int, bool]]  # (parent job id, child job id, dynamic)

    @property
    def truncated(self) -> bool:
        return self.flow.total > len(self.nodes)


def list_flows(
    where: FlowFilter = FlowFilter(),
    *,
    before: int | None = None,
    after: int | None = None,
    limit: int = PAGE_SIZE,
) -> FlowPage:
    """One page of flows, newest first, with their node counts; keyset pagination as in
    `list_jobs`. Raises NarrowFilter past CONSOLE_STATEMENT_TIMEOUT."""
    if before is not None and after is not None:
        raise TrackingError("Give before or after, not both.")
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise TrackingError(f"A page holds 1 to {MAX_PAGE_SIZE} flows, not {limit}.")
    if where.state is not None and where.state not in FLOW_STATES:
        raise TrackingError(
            f"Unknown flow state {where.state!r}; the states are {', '.join(FLOW_STATES)}."
        )
    params = {
        "state": where.state or None,
        "text": _like(where.text) if where.text else None,
        "since": where.since,
        "until": where.until,
        "before": before,
        "after": after,
        "limit": limit + 1,
    }
    with time_limited(), connection.cursor() as cursor:
        cursor.execute(sql.FLOWS_NEWER if after is not None else sql.FLOWS_OLDER, params)
        rows = cursor.fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        counts = _flow_counts(cursor, [row[0] for row in rows])
    flows = [FlowRow.from_row(row, counts.get(row[0], {})) for row in rows]
    if after is None:
        return FlowPage(
            flows,
            newer=flows[0].id if flows and before is not None else before,
            older=flows[-1].id if more else None,
        )
    flows.reverse()
    return FlowPage(
        flows,
        newer=flows[0].id if more else None,
        older=flows[-1].id if flows else after + 1,
    )


def flow_graph(flow_id: int, *, max_nodes: int = MAX_FLOW_NODES) -> FlowGraph | None:
    """A flow's nodes and edges with state, timings, attempts and output summaries;
    None when there is no such flow."""
    with time_limited(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, name, state, rerun_of, created_at, finished_at, removed_nodes "
            "FROM queue_engine_flow WHERE id = %s",
            [flow_id],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        counts = _flow_counts(cursor, [flow_id])
        cursor.execute(sql.FLOW_NODES, {"flow": flow_id, "limit": max_nodes})
        nodes = [FlowNode.from_row(r) for r in cursor.fetchall()]
        ids = {node.id for node in nodes}
        edges: list[tuple[int, int, bool]] = []
        if nodes:
            cursor.execute(sql.FLOW_GRAPH_EDGES, {"flow": flow_id, "upto": max(ids)})
            edges = [(p, c, d) for p, c, d in cursor.fetchall() if p in ids and c in ids]
    return FlowGraph(
        FlowRow.from_row(row, counts.get(flow_id, {})), _topological(nodes, edges), edges
    )


def _topological(nodes: list[FlowNode], edges: list[tuple[int, int, bool]]) -> list[FlowNode]:
    """Parents before children; among nodes that are ready together, by key."""
    by_id = {node.id: node for node in nodes}
    waiting = dict.fromkeys(by_id, 0)
    children: dict[int, list[int]] = {}
    for parent, child, _dynamic in edges:
        waiting[child] += 1
        children.setdefault(parent, []).append(child)
    ready = [(by_id[i].key, i) for i, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    ordered: list[FlowNode] = []
    while ready:
        _key, node_id = heapq.heappop(ready)
        ordered.append(by_id[node_id])
        for child in children.get(node_id, ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, (by_id[child].key, child))
    if len(ordered) < len(nodes):  # edges that loop (never written by submit): keep them all
        seen = {node.id for node in ordered}
        ordered += [node for node in nodes if node.id not in seen]
    return ordered


def _json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _flow_counts(cursor: Any, flow_ids: list[int]) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {flow_id: {} for flow_id in flow_ids}
    if flow_ids:
        cursor.execute(sql.FLOW_STATE_COUNTS, {"flows": flow_ids})
        for flow_id, state, n in cursor.fetchall():
            counts[flow_id][state] = n
    return counts


@dataclass(frozen=True)
class FlowLink:
    """A parent or child of a flow node; state "removed" when the job is gone."""

    id: int
    key: str
    name: str
    kind: str
    state: str
    dynamic: bool

    @property
    def display_name(self) -> str:
        return self.name or self.kind or self.key


@dataclass(frozen=True)
class FlowLinks:
    parents: list[FlowLink]
    children: list[FlowLink]
    limit: int  # each list holds at most this many (the lowest ids)


def flow_links(job_id: int, *, limit: int = 100) -> FlowLinks:
    """A flow node's parents and children (two index lookups on the edges)."""
    parents: list[FlowLink] = []
    children: list[FlowLink] = []
    with connection.cursor() as cursor:
        cursor.execute(sql.FLOW_LINKS, {"job": job_id, "limit": limit})
        for rel, *fields in cursor.fetchall():
            (parents if rel == "parent" else children).append(FlowLink(*fields))
    return FlowLinks(parents, children, limit)
