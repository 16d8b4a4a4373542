"""Parked jobs (waiting for a signal or a time) are counted where the other live states are."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

from queue_engine.models import Job


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_queue_of_parked_jobs_says_so_on_every_page_that_counts(viewer: Client) -> None:
    for _ in range(2):
        Job.objects.create(kind="tests.approval", queue="approvals", state="parked")
    Job.objects.create(kind="tests.approval", queue="approvals", state="upstream_failed")

    queues = text_of(viewer.get("/queues/").content.decode())
    overview = viewer.get("/").content.decode()
    queue = viewer.get("/queues/approvals/").content.decode()

    assert "2 parked · 1 upstream failed" in queues and "nothing to run" not in queues
    card: Any = re.search(r'Parked</div><a class="value"[^>]*>(\d+)<', overview)
    assert card is not None and card.group(1) == "2"
    assert re.search(r'Parked</div><div class="value"[^>]*>2<', queue)
