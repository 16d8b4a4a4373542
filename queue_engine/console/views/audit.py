from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine.console.access import viewer_required
from queue_engine.console.pages.audit import audit_context


@viewer_required
def audit(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/audit.html", audit_context(request))
