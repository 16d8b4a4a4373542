from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine import reads
from queue_engine.console.access import viewer_required


def workers_context(request: HttpRequest) -> dict[str, Any]:
    return {
        "page": "workers",
        "workers": reads.workers(),
        "alive_after": reads.WORKER_ALIVE_AFTER,
    }


@viewer_required
def workers(request: HttpRequest) -> HttpResponse:
    return render(request, "console/workers.html", workers_context(request))
