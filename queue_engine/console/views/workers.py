from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine.console import queries
from queue_engine.console.access import viewer_required


@viewer_required
def workers(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "console/workers.html",
        {
            "page": "workers",
            "workers": queries.workers(),
            "alive_after": queries.WORKER_ALIVE_AFTER,
        },
    )
