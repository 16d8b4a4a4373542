from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine.console.access import viewer_required
from queue_engine.console.pages.workers import workers_context


@viewer_required
def workers(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/workers.html", workers_context(request))
