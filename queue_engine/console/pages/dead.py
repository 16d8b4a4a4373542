"""What the dead-letter page shows: the dead jobs grouped by queue, kind and error class."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from queue_engine import reads
from queue_engine.console import job_filters


def dead_context(request: HttpRequest) -> dict[str, Any]:
    groups, truncated = reads.dead_groups()
    return {
        "page": "dead",
        "groups": groups,
        "truncated": truncated,
        "scan": reads.DEAD_SCAN,
        "upto": max((g.last_id for g in groups), default=0),
        "group_buttons": [("redrive", "Redrive…"), ("remove", "Remove…")],
        "no_error_class": job_filters.NO_ERROR_CLASS,
    }
