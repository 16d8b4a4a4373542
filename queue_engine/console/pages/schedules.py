"""What the schedules page shows: every schedule, its rule and its next and last runs."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from queue_engine import reads
from queue_engine.models import Schedule


def schedules_context(request: HttpRequest) -> dict[str, Any]:
    rows = list(Schedule.objects.order_by("name")[:500])
    try:
        fires = reads.last_fires(rows)
    except reads.NarrowFilter:
        fires = {}  # the page without them rather than no page
    return {"page": "schedules", "schedules": [(s, fires.get(s.name)) for s in rows]}
