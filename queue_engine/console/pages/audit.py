"""What the audit log page shows: the operator actions, newest first, filtered by the query string."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from queue_engine import reads
from queue_engine.console import job_filters
from queue_engine.console.params import int_param


def audit_context(request: HttpRequest) -> dict[str, Any]:
    actor = request.GET.get("actor", "").strip()
    action = request.GET.get("action", "").strip()
    before = int_param(request.GET, "before")
    events, older = reads.audit_page(before, actor=actor, action=action)
    return {
        "page": "audit",
        "events": events,
        "older": older,
        "before": before,
        "actor": actor,
        "action": action,
        "no_error_class": job_filters.NO_ERROR_CLASS,
        "actions": sorted({*reads.audit_actions(), *([action] if action else [])}),
    }
