from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine import reads
from queue_engine.console.access import viewer_required
from queue_engine.console.views.params import int_param


@viewer_required
def audit(request: HttpRequest) -> HttpResponse:
    actor = request.GET.get("actor", "").strip()
    action = request.GET.get("action", "").strip()
    before = int_param(request.GET, "before")
    events, older = reads.audit_page(before, actor=actor, action=action)
    return render(
        request,
        "console/audit.html",
        {
            "page": "audit",
            "events": events,
            "older": older,
            "before": before,
            "actor": actor,
            "action": action,
        },
    )
