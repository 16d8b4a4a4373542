"""A flow's timeline: for each node, the time it waited for its parents, the time it
queued once runnable, its run, and when earlier attempts failed; and the critical path,
the chain of nodes that decided how long the flow took."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from queue_engine import sql
from queue_engine.reads.flows import FlowGraph, FlowNode
from queue_engine.reads.timeout import time_limited

__all__ = [
    "Failure",
    "Span",
    "Timeline",
    "TimelineRow",
    "flow_timeline",
]


@dataclass(frozen=True)
class Span:
    """A stretch of one node's life: `what` is waiting (for its parents), queued (runnable,
    not started: retries and their backoff included) or running (its last attempt)."""

    what: str
    start: datetime
    end: datetime
    left: float  # percent of the timeline's width
    width: float

    @property
    def took(self) -> timedelta:
        return self.end - self.start


@dataclass(frozen=True)
class Failure:
    attempt: int
    at: datetime
    left: float


@dataclass(frozen=True)
class TimelineRow:
    node: FlowNode
    spans: list[Span]
    failures: list[Failure]
    critical: bool


@dataclass(frozen=True)
class Timeline:
    start: datetime
    end: datetime
    rows: list[TimelineRow]  # in the graph's order: parents before children
    critical: int  # nodes on the critical path

    @property
    def took(self) -> timedelta:
        return self.end - self.start


def flow_timeline(graph: FlowGraph, now: datetime | None = None) -> Timeline:
    """The timeline of a flow's nodes (those its graph holds), from its creation to its end
    (or now, while it runs)."""
    now = now or timezone.now()
    start = graph.flow.created_at
    end = graph.flow.finished_at or max(now, start)
    failures = _failures(graph)
    parents: dict[int, list[int]] = {}
    for parent, child, _dynamic in graph.edges:
        parents.setdefault(child, []).append(parent)
    by_id = {node.id: node for node in graph.nodes}
    critical = _critical_path(graph, parents, by_id)
    total = max((end - start).total_seconds(), 1e-6)

    def place(what: str, a: datetime, b: datetime) -> Span:
        a, b = max(a, start), min(max(b, a), end)
        left = (a - start).total_seconds() / total * 100
        return Span(what, a, b, left, max((b - a).total_seconds() / total * 100, 0.0))

    rows = []
    for node in graph.nodes:
        spans = []
        finishes = [by_id[p].finished_at for p in parents.get(node.id, []) if p in by_id]
        if finishes and all(finishes):
            runnable: datetime | None = max(f for f in finishes if f is not None)
        elif finishes:
            runnable = None  # a parent has not ended: it still waits
        else:
            runnable = node.created_at
        stop = node.finished_at or end
        if runnable is None or runnable > node.created_at:
            spans.append(place("waiting", node.created_at, runnable or stop))
        if runnable is not None:
            spans.append(place("queued", runnable, node.started_at or stop))
        if node.started_at is not None and (runnable is None or node.started_at >= runnable):
            spans.append(place("running", node.started_at, stop))
        rows.append(
            TimelineRow(
                node,
                [s for s in spans if s.end > s.start or s.what == "running"],
                [
                    Failure(
                        attempt,
                        at,
                        (min(max(at, start), end) - start).total_seconds() / total * 100,
                    )
                    for attempt, at in failures.get(node.id, [])
                ],
                node.id in critical,
            )
        )
    return Timeline(start, end, rows, len(critical))


def _critical_path(
    graph: FlowGraph, parents: dict[int, list[int]], by_id: dict[int, FlowNode]
) -> set[int]:
    """From the node that ended last, back through the parent whose end released it (the
    one that ended last), to a root: shortening any other node would not end the flow
    sooner. A failed flow's path ends at the node whose death failed it (the first to
    die): the branches that ran on after it decided nothing."""
    ended = [node for node in graph.nodes if node.finished_at is not None]
    dead = [node for node in ended if node.state == "failed"]
    if graph.flow.state == "failed" and dead:
        ended = [min(dead, key=lambda n: (n.finished_at, n.id))]
    if not ended:
        return set()
    node: FlowNode | None = max(ended, key=lambda n: (n.finished_at, n.id))
    path: set[int] = set()
    while node is not None and node.id not in path:
        path.add(node.id)
        ups = [by_id[p] for p in parents.get(node.id, []) if p in by_id]
        done = [p for p in ups if p.finished_at is not None]
        node = max(done, key=lambda n: (n.finished_at, n.id)) if done else None
    return path


def _failures(graph: FlowGraph) -> dict[int, list[tuple[int, datetime]]]:
    if not graph.nodes:
        return {}
    upto = max(node.id for node in graph.nodes)
    found: dict[int, list[tuple[int, datetime]]] = {}
    with time_limited(), connection.cursor() as cursor:
        cursor.execute(sql.FLOW_NODE_FAILURES, {"flow": graph.flow.id, "upto": upto})
        for node_id, pairs in cursor.fetchall():
            for attempt, at in pairs or []:
                moment = parse_datetime(at or "")
                if moment is not None and str(attempt).isdigit():
                    found.setdefault(node_id, []).append((int(attempt), moment))
    return found
