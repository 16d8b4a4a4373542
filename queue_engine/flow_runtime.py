"""What a running flow node may do to its flow: grow a dynamic join."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections, connection, transaction

from queue_engine import sql, sql_flows
from queue_engine.definitions import JobDefinition
from queue_engine.enqueue import JobSpec, prepare, spec_for
from queue_engine.flows import FlowError, flow_row
from queue_engine.worker.context import LeaseLost

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution

Call = tuple[JobDefinition | str, tuple[Any, ...], dict[str, Any], str | None]


def spawn_into(execution: Execution, join: str, calls: Sequence[Call]) -> list[int]:
    """Insert children that `join` waits for, fenced on the spawner's claim."""
    if execution.flow_id is None:
        raise FlowError(
            f"job {execution.job_id} is not part of a flow, so it has no join to spawn into."
        )
    rows = []
    for index, (job, args, kwargs, key) in enumerate(calls):
        if isinstance(job, JobDefinition):
            spec = spec_for(job, job.payload_for(args, kwargs))
        else:
            spec = JobSpec(kind=job, payload=kwargs)
        rows.append((prepare(spec), key or f"{execution.node_key}.{execution.job_id}.{index}"))
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql_flows.LOCK_SPAWNER, [execution.job_id, execution.token])
            held = cursor.fetchone()
            if held is None:
                raise LeaseLost(f"job {execution.job_id} is no longer held by this worker")
            flow_id, _priority = held
            cursor.execute(sql_flows.JOIN_HELD_BY, [execution.job_id, flow_id, join])
            found = cursor.fetchone()
            if found is None:
                raise FlowError(
                    f"job {execution.job_id} ({execution.node_key!r}) holds no edge "
                    f"into a node {join!r} of its flow, so it cannot spawn into it."
                )
            join_id = found[0]
            cursor.execute(sql.ALLOCATE_JOB_IDS, [len(rows)])
            now, ids = cursor.fetchone()
            with cursor.cursor.copy(sql_flows.COPY_FLOW_JOBS) as copy:
                for (row, key), job_id in zip(rows, ids, strict=True):
                    copy.write_row(flow_row(row, job_id, now, flow_id, key, 0))
            cursor.execute(sql_flows.INSERT_EDGES, [flow_id, True, ids, [join_id] * len(ids)])
            cursor.execute(sql_flows.ADD_PENDING, [len(ids), join_id])
    finally:
        close_old_connections()
    return list(ids)
