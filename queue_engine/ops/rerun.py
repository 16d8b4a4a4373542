"""Rerun a flow from one of its nodes, with that node's input edited.

A new flow, like `rerun_flow`, in which every node that is not downstream of the chosen
one and succeeded in the old flow is reused: it goes straight to the history as
succeeded, with the old node's result, so its children read the same output and it does
not run again. The chosen node runs with the new payload, then everything that depends
on it. Nodes beside it that did not succeed run again too.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.db import connection, transaction

from queue_engine import sql
from queue_engine.audit import audit
from queue_engine.definition.registry import registry
from queue_engine.exceptions import EnqueueError, FlowError, OpsError, PayloadError
from queue_engine.flows import Flow, Node
from queue_engine.masking import hidden_changes, mask, rule
from queue_engine.ops.changes import notify_changes, refresh_flows
from queue_engine.ops.flows import clone_flow
from queue_engine.payloads import dump_json

__all__ = ["RerunPlan", "plan_rerun_from", "rerun_flow_from"]


@dataclass
class RerunPlan:
    """What a rerun from `node` would do: which nodes run again and which are reused."""

    flow_id: int
    node: str
    builder: Flow
    runs: list[str]  # the chosen node, what depends on it, and nodes that did not succeed
    reused: list[str]  # succeeded nodes not downstream of the chosen one

    @property
    def payload(self) -> dict[str, Any]:
        return dict(self.builder.nodes[self.node].spec.payload or {})

    @property
    def kind(self) -> str:
        return self.builder.nodes[self.node].spec.kind


def plan_rerun_from(flow_id: int, node_key: str) -> RerunPlan:
    """The rerun's plan, read from the flow as it is now; raises OpsError if it cannot."""
    builder = clone_flow(flow_id, "rerun")
    if node_key not in builder.nodes:
        known = ", ".join(repr(k) for k in sorted(builder.nodes)[:10])
        raise OpsError(
            f"Cannot rerun flow {flow_id} from node {node_key!r}: it has no such node "
            f"(its nodes include {known}). Nodes spawned at run time cannot be chosen: "
            "rerun from the node that spawned them."
        )
    downstream = _downstream(builder, node_key)
    with connection.cursor() as cursor:
        cursor.execute(sql.SUCCEEDED_NODES, [flow_id])
        succeeded = {key for key, _id in cursor.fetchall()}
    reused = sorted(k for k in builder.nodes if k not in downstream and k in succeeded)
    runs = sorted(k for k in builder.nodes if k not in reused)
    return RerunPlan(flow_id, node_key, builder, runs, reused)


def rerun_flow_from(
    flow_id: int,
    node_key: str,
    payload: Mapping[str, Any] | None = None,
    *,
    actor: Any = None,
    plan: RerunPlan | None = None,
) -> int:
    """Rerun flow `flow_id` from node `node_key`, with `payload` as that node's input (None:
    the same input). Returns the new flow's id. Audited, with the payload's change as a
    diff (secret-looking keys masked). `plan`: plan_rerun_from's for the same flow and
    node, when the caller has just made it (the console shows it); else made here."""
    if plan is None:
        plan = plan_rerun_from(flow_id, node_key)
    old = plan.payload
    new = old if payload is None else check_payload(plan.kind, payload, f"node {node_key!r}")
    builder = plan.builder
    node = builder.nodes[node_key]
    builder.nodes[node_key] = Node(node.key, replace(node.spec, payload=new), node.depends_on)
    try:
        with transaction.atomic():
            new_id = builder.submit()
            with connection.cursor() as cursor:
                reused_ids: list[int] = []
                if plan.reused:
                    cursor.execute(
                        sql.REUSE_NODES, {"old": flow_id, "new": new_id, "keys": plan.reused}
                    )
                    reused_ids = [r[0] for r in cursor.fetchall()]
                    cursor.execute(sql.COUNT_DOWN_REUSED, {"flow": new_id, "reused": reused_ids})
                    released = cursor.fetchall()
                    notify_changes([q for q, state in released if state == "available"], [])
            refresh_flows([new_id])
            audit(
                actor,
                "rerun_flow_from",
                "flow",
                str(flow_id),
                len(plan.runs),
                new_flow=new_id,
                node=node_key,
                reused=len(reused_ids),
                payload_diff=payload_diff(old, new),
            )
    except FlowError as exc:
        raise OpsError(f"Cannot rerun flow {flow_id} from {node_key!r}: {exc}") from None
    return new_id


def check_payload(kind: str, payload: Any, what: str) -> dict[str, Any]:
    """An edited payload, checked as an enqueue checks one: a JSON object whose keys the
    kind's handler takes, with every parameter it needs."""
    if not isinstance(payload, Mapping):
        raise OpsError(
            f"The payload of {what} must be a JSON object, not {type(payload).__name__}."
        )
    try:
        dump_json(payload, what=f"the payload of {what}")
    except PayloadError as exc:
        raise OpsError(str(exc)) from None
    definition = registry.get(kind)
    if definition is not None and not definition.django_task:
        try:
            return definition.payload_for((), dict(payload))
        except (TypeError, EnqueueError) as exc:
            raise OpsError(f"The payload of {what} does not fit its kind: {exc}.") from None
    return dict(payload)


def payload_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The change as unified-diff lines of pretty JSON, secrets masked, then a line
    `<key>: changed` for each masked value that changed (the diff cannot show it, and
    neither value is written); [] if nothing changed."""
    if dict(old) == dict(new):
        return []
    secrets = rule()

    def lines(value: Mapping[str, Any]) -> list[str]:
        return json.dumps(
            mask(dict(value), secrets), indent=2, sort_keys=True, default=str
        ).splitlines()

    diff = difflib.unified_diff(lines(old), lines(new), "before", "after", lineterm="", n=1)
    hidden = [f"{path}: changed" for path in hidden_changes(dict(old), dict(new), secrets)]
    return list(diff)[2:] + hidden  # without the ---/+++ header


def _downstream(builder: Flow, key: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for node in builder.nodes.values():
        for parent in node.depends_on:
            children.setdefault(parent, []).append(node.key)
    seen, todo = {key}, [key]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen
