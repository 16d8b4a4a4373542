"""Ending a flow node in a test the way a settle does, without a worker."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from queue_engine.models import Job, JobRecord
from queue_engine.ops.changes import refresh_flows


def end_node(
    flow_id: int,
    key: str,
    state: str,
    *,
    result: Any = None,
    errors: list[dict[str, Any]] | None = None,
    started: datetime | None = None,
    finished: datetime | None = None,
) -> int:
    """Move one node to the history (its attempt counts its errors), release its children
    when it succeeded, refresh the flow's state; the history row's id."""
    job = Job.objects.get(flow_id=flow_id, node_key=key)
    fields = {
        f.attname: getattr(job, f.attname)
        for f in Job._meta.concrete_fields
        if f.attname not in ("state", "claim_token", "lease_owner", "lease_expires_at")
        and hasattr(JobRecord, f.attname)
    }
    now = timezone.now()
    fields.update(
        attempt=len(errors or []) or 1,
        started_at=started or now,
        finished_at=finished or now,
        state=state,
        result=result,
        errors=errors or [],
    )
    record = JobRecord.objects.create(**fields)
    job.delete()
    if state == "succeeded":
        for child in Job.objects.filter(flow_id=flow_id, state="blocked"):
            child.pending_deps -= 1
            if child.pending_deps == 0:
                child.state = "available"
            child.save()
    refresh_flows([flow_id])
    return record.id
