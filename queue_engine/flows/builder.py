"""DAG flows: build a graph of jobs in application code and submit it atomically.

    flow = Flow("nightly import", priority=5)
    flow.add("fetch", fetch_feed, url=url)
    keys = flow.fan_out("parse", parse_chunk, [{"chunk": i} for i in range(10)],
                        depends_on=["fetch"])
    flow.add("report", build_report, depends_on=keys)
    flow_id = flow.submit()          # in the caller's transaction: all or nothing

A child reads its parents' return values as `ctx.outputs` (by node key).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, overload

import psycopg.errors
from django.db import IntegrityError, connection, transaction

from queue_engine import sql
from queue_engine.definition.job import JobDefinition
from queue_engine.durations import Seconds, to_seconds
from queue_engine.enqueueing.hooks import producing
from queue_engine.enqueueing.prepare import JobSpec, Row, prepare, spec_for
from queue_engine.exceptions import EnqueueError, FlowError, SignalError
from queue_engine.payloads import dump_json, text_problem
from queue_engine.waits import check_name

if TYPE_CHECKING:
    from queue_engine.definition.decorator import JobKind


@dataclass
class Node:
    key: str
    spec: JobSpec
    depends_on: list[str] = field(default_factory=list)


class Flow:
    def __init__(
        self, name: str, *, priority: int = 0, meta: Mapping[str, Any] | None = None
    ) -> None:
        if not isinstance(name, str) or not name.strip() or len(name) > 255:
            raise FlowError(
                f"a flow's name must be text of 1 to 255 characters, not {name!r}; "
                "it is how the console lists the flow."
            )
        problem = text_problem(name)
        if problem is not None:
            raise FlowError(f"the flow name {name!r} {problem}")
        if not isinstance(priority, int) or not -100 <= priority <= 100:
            raise FlowError(f"flow {name!r}: priority must be from -100 to 100, not {priority!r}.")
        self.name = name
        self.priority = priority
        self.meta = dict(meta or {})
        self.nodes: dict[str, Node] = {}
        self.rerun_of: int | None = None

    # For a type checker: a root node's arguments are the handler's parameters (through
    # ParamSpec, as `enqueue` takes them). A node with `depends_on=` is not checked:
    # Python's typing allows no keyword-only parameter between a ParamSpec's *args and
    # **kwargs, so its arguments are checked when the node is added, at run time.
    @overload
    def add[**P](
        self, key: str, job: JobKind[P, Any], /, *args: P.args, **kwargs: P.kwargs
    ) -> str: ...

    @overload
    def add(
        self, key: str, job: JobDefinition, /, *args: Any, depends_on: Iterable[str], **kwargs: Any
    ) -> str: ...

    @overload
    def add(
        self,
        key: str,
        job: JobSpec | str,
        /,
        *args: Any,
        depends_on: Iterable[str] = (),
        **kwargs: Any,
    ) -> str: ...

    def add(
        self,
        key: str,
        job: JobDefinition | JobSpec | str,
        /,
        *args: Any,
        depends_on: Iterable[str] = (),
        **kwargs: Any,
    ) -> str:
        """Add a node running `job` with these arguments; options come from `job.using(...)`.

        A kind known only by name takes its arguments by keyword; a `JobSpec` carries
        its payload and options itself (for a kind this process has no definition of)."""
        if not isinstance(key, str) or not 0 < len(key) <= 255:
            raise FlowError(
                f"flow {self.name!r}: a node key must be 1 to 255 characters, not {key!r}."
            )
        problem = text_problem(key)
        if problem is not None:
            raise FlowError(f"flow {self.name!r}: the node key {key!r} {problem}")
        if key in self.nodes:
            raise FlowError(
                f"flow {self.name!r}: node key {key!r} is used twice; keys name "
                "nodes and must be unique in a flow."
            )
        spec = node_spec(f"flow {self.name!r}: node {key!r}", job, args, kwargs)
        self.nodes[key] = Node(key, spec, self._parents(f"node {key!r}", depends_on))
        return key

    def add_gate(
        self,
        key: str,
        *,
        signal: str,
        timeout: Seconds | None = None,
        depends_on: Iterable[str] = (),
        queue: str | None = None,
    ) -> str:
        """Add a gate: a node that waits for the signal `signal` (sent with
        `send_flow_signal` or to its job), whose children run once it comes, reading its
        payload as the gate's output. Past `timeout` seconds of waiting it fails, and its
        children with it. It runs on `queue` (the default queue unless given), whose
        workers park it: it holds no slot while it waits."""
        from queue_engine.gates import gate

        try:
            check_name(signal)
        except SignalError as exc:
            raise FlowError(f"flow {self.name!r}: gate {key!r}: {exc}") from None
        kind = gate if queue is None else gate.using(queue=queue)
        return self.add(
            key, kind, signal=signal, timeout=to_seconds(timeout), depends_on=depends_on
        )

    def _parents(self, what: str, depends_on: Iterable[str]) -> list[str]:
        """The parent keys, each once; a bare string is refused (it would be read as letters)."""
        if isinstance(depends_on, str):
            raise FlowError(
                f"flow {self.name!r}: {what} got depends_on={depends_on!r}, a string; "
                f"pass a list of node keys, e.g. depends_on=[{depends_on!r}]."
            )
        return list(dict.fromkeys(depends_on))

    def fan_out(
        self,
        prefix: str,
        job: JobDefinition | str,
        calls: Iterable[Mapping[str, Any] | Sequence[Any]],
        *,
        depends_on: Iterable[str] = (),
    ) -> list[str]:
        """Add one node per call, keyed `prefix[0]`, `prefix[1]`, ...; returns the keys."""
        parents = self._parents(f"fan-out {prefix!r}", depends_on)
        keys = []
        for index, call in enumerate(calls):
            key = f"{prefix}[{index}]"
            if isinstance(call, Mapping):
                self.add(key, job, depends_on=parents, **call)
            else:
                self.add(key, job, *call, depends_on=parents)
            keys.append(key)
        return keys

    def validate(self) -> list[str]:
        """Check the graph; return the node keys in a topological order."""
        for node in self.nodes.values():
            if node.key in node.depends_on:
                raise FlowError(f"flow {self.name!r}: node {node.key!r} depends on itself.")
            unknown = [d for d in node.depends_on if d not in self.nodes]
            if unknown:
                raise FlowError(
                    f"flow {self.name!r}: node {node.key!r} depends on unknown "
                    f"node(s) {', '.join(map(repr, unknown))}."
                )
        return topological_order(self.name, {k: n.depends_on for k, n in self.nodes.items()})

    @producing(lambda self: f"flow {self.name}")
    def submit(self) -> int:
        """Write the flow and its jobs in one transaction; return the flow id."""
        if not self.nodes:
            raise FlowError(f"flow {self.name!r} has no nodes.")
        order = self.validate()
        rows: dict[str, Row] = {}
        for key in order:
            node = self.nodes[key]
            if node.spec.priority is None:
                node.spec.priority = self.priority
            try:
                rows[key] = prepare(node.spec)
            except EnqueueError as exc:
                raise FlowError(f"flow {self.name!r}, node {key!r}: {exc}") from None
        self._refuse_shared_dedup_keys(rows)
        meta = dump_json(self.meta, what=f"flow {self.name!r}: meta")
        try:
            # A savepoint: on a conflict only this flow's writes are undone and the
            # caller's transaction stays usable.
            with transaction.atomic():
                return self._write(order, rows, meta)
        except (IntegrityError, psycopg.errors.UniqueViolation) as exc:
            # The COPY runs on the raw psycopg cursor, so its error is not wrapped.
            cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
            if getattr(getattr(cause, "diag", None), "constraint_name", None) != "qe_job_dedup":
                raise
            raise FlowError(self._held_dedup_keys_message(rows)) from None

    def _refuse_shared_dedup_keys(self, rows: Mapping[str, Row]) -> None:
        holders: dict[tuple[str, str], list[str]] = {}
        for key in self.nodes:  # in the order they were added
            row = rows[key]
            if row.dedup_key is not None:
                holders.setdefault((row.kind, row.dedup_key), []).append(key)
        shared = [keys for keys in holders.values() if len(keys) > 1]
        if shared:
            names = "; ".join(" and ".join(map(repr, keys)) for keys in shared)
            raise FlowError(
                f"flow {self.name!r}: nodes {names} have the same kind and dedup key, "
                "and a dedup key allows one live job; give each node its own key."
            )

    def _held_dedup_keys_message(self, rows: Mapping[str, Row]) -> str:
        """Name the nodes whose dedup keys live jobs hold (read after the rollback)."""
        keyed = {(r.kind, r.dedup_key): k for k, r in rows.items() if r.dedup_key is not None}
        with connection.cursor() as cursor:
            cursor.execute(
                sql.SELECT_JOB_IDS_BY_DEDUP_KEYS,
                [[kind for kind, _ in keyed], [dedup for _, dedup in keyed]],
            )
            held = [
                f"node {keyed[(kind, dedup)]!r} (key {dedup!r}, job {job_id})"
                for kind, dedup, job_id in cursor.fetchall()
                if (kind, dedup) in keyed
            ]
        which = ", ".join(held) if held else "a node (the holder has finished since)"
        return (
            f"flow {self.name!r}: nothing was written, because a live job already holds "
            f"the dedup key of {which}; drop the node's dedup key, or submit once that "
            "job has finished."
        )

    def _write(self, order: list[str], rows: dict[str, Row], meta: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(sql.INSERT_FLOW, [self.name, self.priority, meta, self.rerun_of])
            flow_id = cursor.fetchone()[0]
            cursor.execute(sql.ALLOCATE_JOB_IDS, [len(order)])
            now, ids = cursor.fetchone()
            job_ids = dict(zip(order, ids, strict=True))
            with cursor.cursor.copy(sql.COPY_FLOW_JOBS) as copy:
                for key in order:
                    copy.write_row(
                        flow_row(
                            rows[key],
                            job_ids[key],
                            now,
                            flow_id,
                            key,
                            len(self.nodes[key].depends_on),
                        )
                    )
            parents = [job_ids[p] for k in order for p in self.nodes[k].depends_on]
            children = [job_ids[k] for k in order for _ in self.nodes[k].depends_on]
            if parents:
                cursor.execute(sql.INSERT_EDGES, [flow_id, False, parents, children])
        return int(flow_id)


def node_spec(
    what: str, job: JobDefinition | JobSpec | str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> JobSpec:
    """The job a flow node (or a spawned child) runs: a definition called with these
    arguments, a kind named by string with arguments by name, or a JobSpec as it is."""
    if isinstance(job, JobDefinition):
        return spec_for(job, job.payload_for(tuple(args), dict(kwargs)))
    if isinstance(job, JobSpec):
        if args or kwargs:
            raise FlowError(
                f"{what} is a JobSpec, which carries its payload: put the arguments in "
                "JobSpec(payload=...)."
            )
        return replace(job)  # a copy: the flow's priority may be filled in
    if not isinstance(job, str):
        raise FlowError(
            f"{what} must run a @job definition, a kind name or a JobSpec, not {job!r}."
        )
    if args:
        raise FlowError(f"{what} names its kind as a string, so pass its arguments by name.")
    return JobSpec(kind=job, payload=dict(kwargs))


def flow_row(
    row: Row, job_id: int, now: Any, flow_id: int, key: str, parents: int
) -> tuple[Any, ...]:
    run_at = row.starts_at(now)
    state = "blocked" if parents else ("scheduled" if run_at > now else "available")
    return (
        job_id,
        row.queue,
        row.kind,
        row.name,
        row.priority,
        row.payload,
        row.max_attempts,
        row.backoff,
        row.dedup_key,
        row.group_key,
        row.labels,
        row.meta,
        run_at,
        state,
        flow_id,
        key,
        parents,  # pending_deps
        parents,
    )


def topological_order(name: str, graph: Mapping[str, Sequence[str]]) -> list[str]:
    """Kahn's algorithm; a cycle is reported with the nodes on it."""
    children: dict[str, list[str]] = {k: [] for k in graph}
    waiting = {k: len(set(deps)) for k, deps in graph.items()}
    for key, deps in graph.items():
        for dep in set(deps):
            children[dep].append(key)
    ready = [k for k, n in waiting.items() if n == 0]
    order: list[str] = []
    while ready:
        key = ready.pop()
        order.append(key)
        for child in children[key]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if len(order) < len(graph):
        cycle = find_cycle({k: list(d) for k, d in graph.items() if waiting.get(k)})
        raise FlowError(
            f"flow {name!r} has a cycle: {' -> '.join(map(repr, cycle))}; a flow must be a DAG."
        )
    return order


def find_cycle(graph: Mapping[str, list[str]]) -> list[str]:
    """One cycle among nodes that could not be ordered (each depends on another of them)."""
    start = next(iter(graph))
    path, seen = [start], {start: 0}
    while True:
        nxt = next(d for d in graph[path[-1]] if d in graph)
        if nxt in seen:
            return [*path[seen[nxt] :], nxt]
        seen[nxt] = len(path)
        path.append(nxt)
