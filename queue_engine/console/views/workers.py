from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine import reads
from queue_engine.console.access import viewer_required


@viewer_required
def workers(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "console/workers.html",
        {
            "page": "workers",
            "workers": reads.workers(),
            "alive_after": reads.WORKER_ALIVE_AFTER,
        },
    )
