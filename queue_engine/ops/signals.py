"""Operator actions that send signals: to one job, or to a flow's gates ("Open gate").

Each sends in one transaction with the AuditEvent that records it; secret-looking keys
of the payload are masked in the audit, as on every page.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from queue_engine import gates, waits
from queue_engine.audit import audit
from queue_engine.exceptions import OpsError, SignalError
from queue_engine.masking import mask
from queue_engine.ops.changes import notify_changes


def send_signal(job_id: int, name: str, payload: Any = None, *, actor: Any = None) -> int:
    """Send the signal `name` with this payload to a live job; returns the signal's id.
    Refused (OpsError, nothing written) for a job that has ended or a bad name or payload."""
    with transaction.atomic():
        try:
            signal_id = waits.send_signal(job_id, name, payload)
        except SignalError as exc:
            raise OpsError(str(exc)) from None
        notify_changes([], [job_id])
        audit(actor, "signal", "job", str(job_id), 1, signal=name, payload=mask(payload))
    return signal_id


def open_gate(flow_id: int, name: str, payload: Any = None, *, actor: Any = None) -> list[int]:
    """Open the gates of a flow that wait for the signal `name`; returns their job ids.
    Refused (OpsError, nothing written) when none of that flow waits for that name."""
    with transaction.atomic():
        try:
            opened = gates.send_flow_signal(flow_id, name, payload)
        except SignalError as exc:
            raise OpsError(str(exc)) from None
        notify_changes([], opened)
        audit(
            actor,
            "open_gate",
            "flow",
            str(flow_id),
            len(opened),
            signal=name,
            payload=mask(payload),
            gates=opened,
        )
    return opened
