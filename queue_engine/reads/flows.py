"""Flows: keyset pages, a flow's graph (nodes, edges, counts) and a job's links in its flow."""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from queue_engine import sql
from queue_engine.exceptions import FilterError
from queue_engine.reads.jobs import MAX_PAGE_SIZE, PAGE_SIZE, like_pattern
from queue_engine.reads.queues import COUNT_CAP
from queue_engine.reads.timeout import time_limited
from queue_engine.states import FLOW_STATES

__all__ = [
    "MAX_FLOW_NODES",
    "FlowFilter",
    "FlowGraph",
    "FlowLink",
    "FlowLinks",
    "FlowNode",
    "FlowPage",
    "FlowRow",
    "flow_graph",
    "flow_links",
    "flow_state_counts",
    "list_flows",
]

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
    reused_from: int | None = None  # the flow whose node's output it reused (rerun from a node)
    spawned_by: int | None = None  # the job that spawned it into a join at run time
    # upstream_failed: the ancestor that ended it, {"job": id, "key": ..., "state": ...}
    upstream: dict[str, Any] | None = None

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
            reused_from,
            spawned_by,
            upstream,
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
            reused_from=reused_from,
            spawned_by=spawned_by,
            upstream=_json_value(upstream),
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

    @property
    def spawns(self) -> list[tuple[int, int]]:
        """(spawner, child) for the nodes spawned at run time whose spawner is drawn: not a
        dependency (the child runs while its spawner still does), but where it came from."""
        ids = {node.id for node in self.nodes}
        return [
            (n.spawned_by, n.id)
            for n in self.nodes
            if n.spawned_by is not None and n.spawned_by in ids
        ]

    def first(self, n: int) -> FlowGraph:
        """The graph of its `n` lowest node ids, as flow_graph(max_nodes=n) reads it."""
        if len(self.nodes) <= n:
            return self
        keep = set(sorted(node.id for node in self.nodes)[:n])
        nodes = [node for node in self.nodes if node.id in keep]
        edges = [(p, c, d) for p, c, d in self.edges if p in keep and c in keep]
        return FlowGraph(self.flow, _topological(nodes, edges), edges)


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
        raise FilterError("Give before or after, not both.")
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise FilterError(f"A page holds 1 to {MAX_PAGE_SIZE} flows, not {limit}.")
    if where.state is not None and where.state not in FLOW_STATES:
        raise FilterError(
            f"Unknown flow state {where.state!r}; the states are {', '.join(FLOW_STATES)}."
        )
    params = {
        "state": where.state or None,
        "text": like_pattern(where.text) if where.text else None,
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


def flow_state_counts(where: FlowFilter = FlowFilter(), *, cap: int = COUNT_CAP) -> dict[str, int]:
    """How many flows of each state match the filter's text and time (its state aside), each
    at most cap + 1 (more than `cap` shows as "cap+"). Raises NarrowFilter past
    CONSOLE_STATEMENT_TIMEOUT."""
    params = {
        "states": list(FLOW_STATES),
        "text": like_pattern(where.text) if where.text else None,
        "since": where.since,
        "until": where.until,
        "cap": cap,
    }
    with time_limited(), connection.cursor() as cursor:
        cursor.execute(sql.FLOW_TAB_COUNTS, params)
        return dict(cursor.fetchall())


def flow_graph(flow_id: int, *, max_nodes: int = MAX_FLOW_NODES) -> FlowGraph | None:
    """A flow's nodes and edges with state, timings, attempts and output summaries;
    None when there is no such flow."""
    with time_limited(), connection.cursor() as cursor:
        cursor.execute(sql.FLOW_ROW, [flow_id])
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
    for node in nodes:  # a spawned child after its spawner
        if node.spawned_by is not None and node.spawned_by in by_id:
            waiting[node.id] += 1
            children.setdefault(node.spawned_by, []).append(node.id)
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
