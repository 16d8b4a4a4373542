"""What a running flow node may do to its flow: grow a dynamic join."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections, connection, transaction

from queue_engine import sql
from queue_engine.definition.job import JobDefinition
from queue_engine.enqueueing.hooks import producing
from queue_engine.enqueueing.prepare import JobSpec, prepare
from queue_engine.exceptions import FlowError, LeaseLost
from queue_engine.flows.builder import flow_row, node_spec

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution

MAX_NODE_KEY = 255  # the node_key column's length

Call = tuple[JobDefinition | JobSpec | str, tuple[Any, ...], dict[str, Any], str | None]


@producing(lambda execution, join, calls: f"spawn into {join}")
def spawn_into(execution: Execution, join: str, calls: Sequence[Call]) -> list[int]:
    """Insert children that `join` waits for, fenced on the spawner's claim.

    Idempotent per spawner and key: a key this job already spawned into this join (an
    earlier attempt) returns that child again instead of adding another; a key any
    other node of the flow has is refused (the join's outputs are keyed by node key).
    """
    if execution.flow_id is None:
        raise FlowError(
            f"job {execution.job_id} is not part of a flow, so it has no join to spawn into."
        )
    specs = []
    for index, (job, args, kwargs, key) in enumerate(calls):
        what = f"job {execution.job_id} ({execution.node_key!r}): the child {index}"
        spec = node_spec(what, job, args, kwargs)
        spec = replace(spec, meta={**(spec.meta or {}), "spawned_by": execution.job_id})
        specs.append((spec, child_key(execution, key)))
    keys = [key for _spec, key in specs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise FlowError(
            f"job {execution.job_id} ({execution.node_key!r}) spawns more than one child "
            f"with node key {twice[0]!r}; node keys must be unique in a flow."
        )
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql.LOCK_SPAWNER, [execution.job_id, execution.token])
            held = cursor.fetchone()
            if held is None:
                raise LeaseLost(f"job {execution.job_id} is no longer held by this worker")
            flow_id, flow_priority = held
            # Like the nodes submitted with the flow, a child without a priority of its
            # own takes the flow's.
            rows = [
                (
                    prepare(
                        spec if spec.priority is not None else replace(spec, priority=flow_priority)
                    ),
                    key,
                )
                for spec, key in specs
            ]
            cursor.execute(sql.JOIN_HELD_BY, [execution.job_id, flow_id, join])
            found = cursor.fetchone()
            if found is None:
                raise FlowError(
                    f"job {execution.job_id} ({execution.node_key!r}) holds no edge "
                    f"into a node {join!r} of its flow, so it cannot spawn into it."
                )
            join_id = found[0]
            cursor.execute(sql.LOCK_FLOW_KEYS, [flow_id])
            cursor.execute(
                sql.FLOW_NODES_WITH_KEYS, {"flow": flow_id, "join": join_id, "keys": keys}
            )
            existing: dict[str, int] = {}
            for node_id, node_key, spawned_by, into_join in cursor.fetchall():
                if spawned_by != str(execution.job_id) or not into_join or node_key in existing:
                    raise FlowError(
                        f"job {execution.job_id} ({execution.node_key!r}) cannot spawn a "
                        f"child with node key {node_key!r}: another node of flow {flow_id} "
                        f"has that key, and node keys must be unique in a flow."
                    )
                existing[node_key] = node_id
            new = [(row, key) for row, key in rows if key not in existing]
            if new:
                cursor.execute(sql.ALLOCATE_JOB_IDS, [len(new)])
                now, ids = cursor.fetchone()
                with cursor.cursor.copy(sql.COPY_FLOW_JOBS) as copy:
                    for (row, key), job_id in zip(new, ids, strict=True):
                        copy.write_row(flow_row(row, job_id, now, flow_id, key, 0))
                        existing[key] = job_id
                cursor.execute(sql.INSERT_EDGES, [flow_id, True, ids, [join_id] * len(ids)])
                cursor.execute(sql.ADD_PENDING, [len(ids), join_id])
    finally:
        # Inside the handler's own ctx.atomic() block the children are part of its
        # transaction, and commit with it: its connection must stay open.
        if not connection.in_atomic_block:
            close_old_connections()
    return [existing[key] for key in keys]


def child_key(execution: Execution, key: str | None) -> str:
    """A spawned child's node key: its spawner's key and, in brackets, the key the handler
    gave or else its place among the spawner's unkeyed children this attempt
    (`stock[gateway]`, `stock[0]`). Unique in the flow as its spawner's key is, and the
    same when a retried spawner spawns the same children again."""
    if key is None:
        part = str(execution.spawned)
        execution.spawned += 1
    elif not isinstance(key, str) or not key or key.isdigit():
        raise FlowError(
            f"job {execution.job_id} ({execution.node_key!r}) spawns a child with key "
            f"{key!r}: give a non-empty text that is not only digits (digits name the "
            "children spawned without a key), or no key."
        )
    else:
        part = key
    name = f"{execution.node_key}[{part}]"
    if len(name) > MAX_NODE_KEY:
        raise FlowError(
            f"job {execution.job_id} ({execution.node_key!r}) spawns a child whose node key "
            f"{name[:60]!r}... would be {len(name)} characters, over {MAX_NODE_KEY}: give "
            "it a shorter key."
        )
    return name
