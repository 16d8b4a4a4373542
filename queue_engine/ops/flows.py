"""Operator actions on flows; each audited in its own transaction, like `ops`."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction

from queue_engine import sql
from queue_engine.audit import audit
from queue_engine.definition.job import Backoff
from queue_engine.enqueueing.prepare import JobSpec
from queue_engine.exceptions import FlowError, OpsError
from queue_engine.flows import Flow, Node
from queue_engine.models import FlowRun, Job
from queue_engine.ops.changes import notify_changes, refresh_flows, unmark_upstream_failed
from queue_engine.ops.jobs import cancel_jobs


def cancel_flow(flow_id: int, *, actor: Any = None) -> int:
    """Cancel every node that has not ended (running ones cooperatively)."""
    with transaction.atomic():
        flow = FlowRun.objects.select_for_update().filter(pk=flow_id).first()
        if flow is None:
            raise OpsError(f"Cannot cancel: flow {flow_id} does not exist.")
        ids = list(Job.objects.filter(flow_id=flow_id).values_list("id", flat=True))
        if not ids:
            raise OpsError(f"Cannot cancel flow {flow_id}: it has already ended ({flow.state}).")
        count = cancel_jobs(ids, actor=actor, audited=False)
        refresh_flows([flow_id])
        audit(actor, "cancel_flow", "flow", str(flow_id), count, name=flow.name)
    return count


def requeue_flow(flow_id: int, *, actor: Any = None, clear_steps: bool = False) -> int:
    """Resume a failed or cancelled flow in place: re-drive only its dead and cancelled
    nodes and recompute what their dependants wait for; what succeeded stays done. The
    requeued nodes keep their recorded steps unless `clear_steps`."""
    with transaction.atomic():
        flow = FlowRun.objects.select_for_update().filter(pk=flow_id).first()
        if flow is None:
            raise OpsError(f"Cannot requeue: flow {flow_id} does not exist.")
        if flow.state not in ("failed", "cancelled"):
            raise OpsError(
                f"Cannot requeue flow {flow_id}: it is {flow.state}; only failed "
                "or cancelled flows can be requeued (rerun clones any flow)."
            )
        with connection.cursor() as cursor:
            _refuse_lost_history(cursor, flow_id, "requeue", ["failed", "cancelled"])
            cursor.execute(sql.REQUEUE_FLOW_NODES, {"flow": flow_id})
            requeued = [r[0] for r in cursor.fetchall()]
            if clear_steps:
                cursor.execute(sql.CLEAR_STEPS, {"ids": requeued})
            unmark_upstream_failed(cursor, [flow_id])
            cursor.execute(sql.RECOUNT_FLOW_DEPENDENCIES, {"flow": flow_id})
            queues = [q for q, state in cursor.fetchall() if state == "available"]
        refresh_flows([flow_id])
        notify_changes(queues, requeued)
        extra = {"clear_steps": True} if clear_steps else {}
        audit(actor, "requeue_flow", "flow", str(flow_id), len(requeued), name=flow.name, **extra)
    return len(requeued)


def rerun_flow(flow_id: int, *, actor: Any = None) -> int:
    """Clone a flow (nodes, inputs and edges) as a new flow; returns the new flow's id."""
    builder = clone_flow(flow_id, "rerun")
    try:
        with transaction.atomic():
            new_id = builder.submit()
            audit(actor, "rerun_flow", "flow", str(flow_id), len(builder.nodes), new_flow=new_id)
    except FlowError as exc:  # a kind this process does not know, say
        raise OpsError(f"Cannot rerun flow {flow_id}: {exc}") from None
    return new_id


def clone_flow(flow_id: int, action: str) -> Flow:
    """A builder for a new flow with the flow's nodes (inputs, options) and edges."""
    flow = FlowRun.objects.filter(pk=flow_id).first()
    if flow is None:
        raise OpsError(f"Cannot {action}: flow {flow_id} does not exist.")
    with connection.cursor() as cursor:
        _refuse_lost_history(cursor, flow_id, action, ["succeeded", "failed", "cancelled"])
        cursor.execute(sql.FLOW_NODES_FOR_RERUN, {"flow": flow_id})
        nodes = cursor.fetchall()
        cursor.execute(sql.FLOW_EDGES, [flow_id])
        edges = cursor.fetchall()
    # Nodes spawned at run time into a join (the parents of dynamic edges) are not
    # cloned: their spawners run again in the new flow and spawn them afresh.
    spawned = {parent for parent, _child, dynamic in edges if dynamic}
    nodes = [row for row in nodes if row[0] not in spawned]
    key_of = {row[0]: row[2] for row in nodes}
    parents: dict[int, list[str]] = {}
    for parent, child, _dynamic in edges:
        if parent in key_of and child in key_of:
            parents.setdefault(child, []).append(key_of[parent])
    builder = Flow(flow.name, priority=flow.default_priority, meta=flow.meta)
    builder.rerun_of = flow_id
    for (
        job_id,
        kind,
        key,
        payload,
        queue,
        priority,
        name,
        max_attempts,
        backoff,
        group_key,
        labels,
        meta,
    ) in sorted(nodes, key=lambda n: n[0]):
        spec = JobSpec(
            kind=kind,
            payload=_json(payload),
            queue=queue,
            priority=priority,
            name=name or None,
            max_attempts=max_attempts,
            backoff=Backoff.from_json(_json(backoff)),
            group_key=group_key,
            labels=labels,
            # Not the original's stop request, where a reused node came from, or its
            # steps: the clone runs, afresh.
            meta={
                k: v
                for k, v in (_json(meta) or {}).items()
                if k not in ("cancel_requested", "reused_from", "has_steps")
            },
        )
        builder.nodes[key] = Node(key, spec, parents.get(job_id, []))
    if not builder.nodes:
        raise OpsError(f"Cannot {action} flow {flow_id}: it has no nodes left to clone.")
    return builder


def _refuse_lost_history(cursor: Any, flow_id: int, action: str, ended: list[str]) -> None:
    """Refuse when nodes the action needs have no rows left (retention removed them)."""
    cursor.execute(sql.LOST_PARENTS, {"flow": flow_id, "ended": ended})
    lost = [r[0] for r in cursor.fetchall()]
    if lost:
        ids = ", ".join(map(str, lost[:10])) + (" and more" if len(lost) > 10 else "")
        raise OpsError(
            f"Cannot {action} flow {flow_id}: the history of {len(lost)} of its node(s) "
            f"({ids}) is gone, removed by its queue's retention, and the nodes after them "
            "need it. Keep flow queues' succeeded jobs longer (retain_succeeded) to "
            f"{action} old flows."
        )


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
