from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine import reads
from queue_engine.console import job_filters
from queue_engine.console.access import viewer_required
from queue_engine.console.views.params import int_param


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


@viewer_required
def audit(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/audit.html", audit_context(request))
