from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine.console.access import viewer_required
from queue_engine.console.pages.overview import overview_context


@viewer_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/overview.html", {"page": "overview", **overview_context()})
