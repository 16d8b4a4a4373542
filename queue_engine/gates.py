"""Gates: flow nodes that wait for a named signal (`Flow.add_gate`, `send_flow_signal`).

A gate is a job node of the engine's own kind whose handler waits for its signal,
so it parks, times out and is cancelled like any waiting job, and its children read
the signal's payload as the gate's output through `ctx.outputs`, like any parent's.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, transaction

from queue_engine.definition.decorator import job
from queue_engine.exceptions import SignalError
from queue_engine.models import Job
from queue_engine.waits import check_name, send_signal


@job(max_attempts=1, name=lambda p: f"Gate: waits for {p['signal']}")  # type: ignore[untyped-decorator]
def gate(ctx: Any, signal: str, timeout: float | None = None) -> Any:
    """Return the payload of the signal `signal` sent to this node or to its flow."""
    return ctx.wait_for_signal(signal, timeout=timeout)


GATE_KIND = gate.kind


def live_gates(
    flow_id: int, name: str | None = None, *, using: str = DEFAULT_DB_ALIAS
) -> dict[int, str]:
    """The flow's gates that have not opened yet (waiting, parked or not reached), by job
    id, with the signal each waits for; only those waiting for `name` when given."""
    found = Job.objects.using(using).filter(flow_id=flow_id, kind=GATE_KIND)
    if name is not None:
        found = found.filter(payload__signal=name)
    return {
        pk: payload["signal"] for pk, payload in found.order_by("id").values_list("id", "payload")
    }


def send_flow_signal(
    flow_id: int, name: str, payload: Any = None, *, using: str = DEFAULT_DB_ALIAS
) -> list[int]:
    """Open every gate of flow `flow_id` that waits for the signal `name`, with this JSON
    `payload` as each gate's output; returns the gates' job ids.

    A statement in the caller's transaction, as `send_signal` is: the gates open when it
    commits, and never if it rolls back. A gate the flow has not reached yet finds the
    signal waiting when it runs. Raises `SignalError`, writing nothing, when no gate of
    that flow waits for that name (none was added, or all have opened already)."""
    check_name(name)
    with transaction.atomic(using=using):
        gates = sorted(live_gates(flow_id, name, using=using))
        if not gates:
            raise SignalError(
                f"flow {flow_id} has no gate waiting for the signal {name!r} (none was added, "
                "or each has opened or ended): nothing was sent; check the flow and the name."
            )
        for job_id in gates:
            send_signal(job_id, name, payload, using=using)
    return gates
