"""The metrics page: every queue together, over a window from 15 minutes to 30 days.

Everything on it comes from the metrics rollup (and the few minutes it has not counted
yet), never from a scan of the history: a window of 30 days reads hour buckets.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from queue_engine.console.access import viewer_required
from queue_engine.console.pages.fleet import fleet_context


@viewer_required
def fleet(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/fleet.html", fleet_context(request))
