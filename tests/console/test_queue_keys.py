"""The queue page's group keys: what each key waits and runs, its cap, and its share of the
queue's recent starts, busiest first."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from queue_engine import reads
from queue_engine.models import ClaimLog, GroupLimit, GroupWeight, Job, QueueConfig
from tests.support.history import history_row

pytestmark = pytest.mark.django_db


def job(key: str, state: str, **fields: Any) -> None:
    Job.objects.create(kind="tests.noop", queue="tenants", group_key=key, state=state, **fields)


def ran(key: str, started_ago: timedelta) -> None:
    """A job of the key that started `started_ago` and has just ended."""
    history_row(
        timezone.now(), queue="tenants", group_key=key, run=started_ago.total_seconds()
    ).save(force_insert=True)


def test_the_queue_page_lists_each_keys_waiting_running_cap_and_share(viewer: Any) -> None:
    QueueConfig.objects.update_or_create(name="tenants", defaults={"group_concurrency": 5})
    GroupLimit.objects.create(queue="tenants", group_key="globex", max_concurrency=2)
    now = timezone.now()
    for _ in range(3):
        job("acme", "available")
    job("acme", "scheduled", run_at=now + timedelta(hours=1))
    job("globex", "running", started_at=now - timedelta(seconds=5))
    job("initech", "running", started_at=now - timedelta(minutes=10))  # not in the window
    ran("acme", timedelta(seconds=10))
    ran("globex", timedelta(seconds=20))
    ran("globex", timedelta(minutes=5))  # started before the window

    keys = reads.queue_keys("tenants")

    assert [(k.key, k.waiting, k.running, k.started, k.cap) for k in keys.keys] == [
        ("acme", 4, 0, 1, 5),
        ("globex", 0, 1, 2, 2),
        ("initech", 0, 1, 0, 5),
    ]
    assert [round(k.share, 3) for k in keys.keys] == [0.333, 0.667, 0.0]
    page = viewer.get(reverse("queue_engine:queue", args=["tenants"])).content.decode()
    panel = page[page.index('id="queue-keys"') :]
    rows = re.findall(
        r'<th scope="row" class="mono"><a href="([^"]+)"[^>]*>([^<]+)</a></th>', panel
    )
    assert [key for _, key in rows] == ["acme", "globex", "initech"]
    # Each key links to its jobs in the list.
    assert unescape(rows[0][0]) == "/jobs/?queue=tenants&group=acme"
    assert 'name="group" value="acme"' in viewer.get(unescape(rows[0][0])).content.decode()
    assert "67% of the queue&#x27;s starts" in panel or "67% of the queue's starts" in panel


def test_a_queue_without_keys_says_so_and_a_long_list_says_it_shows_the_first(
    viewer: Any,
) -> None:
    job_less = viewer.get(reverse("queue_engine:queue", args=["tenants"]))
    assert job_less.status_code == 404  # no such queue yet
    Job.objects.create(kind="tests.noop", queue="tenants")
    page = viewer.get(reverse("queue_engine:queue", args=["tenants"])).content.decode()
    assert "No job of this queue has a group key waiting or running." in page

    for i in range(reads.KEYS_SHOWN + 3):
        job(f"tenant-{i:03}", "available")
    keys = reads.queue_keys("tenants")
    assert (len(keys.keys), keys.total) == (reads.KEYS_SHOWN, reads.KEYS_SHOWN + 3)
    page = viewer.get(reverse("queue_engine:queue", args=["tenants"])).content.decode()
    assert f"busiest first, the first {reads.KEYS_SHOWN}." in page


def test_with_a_rate_limit_per_key_each_key_shows_what_it_may_still_start(viewer: Any) -> None:
    QueueConfig.objects.update_or_create(
        name="tenants",
        defaults={"rate_limit": 10, "rate_window": 60, "rate_limit_per_key": True},
    )
    GroupLimit.objects.create(queue="tenants", group_key="globex", rate_limit=3)
    job("acme", "available")
    job("globex", "available")
    job("initech", "available")
    now = timezone.now()
    ClaimLog.objects.create(queue="tenants", group_key="acme", at=now, count=4)
    ClaimLog.objects.create(queue="tenants", group_key="globex", at=now, count=5)
    ClaimLog.objects.create(queue="tenants", group_key="acme", at=now - timedelta(hours=1), count=9)

    keys = {k.key: k for k in reads.queue_keys("tenants").keys}

    assert [(k.rate, k.rate_used, k.rate_left) for k in keys.values()] == [
        (10, 4, 6),
        (3, 5, 0),
        (10, 0, 10),
    ]
    page = viewer.get(reverse("queue_engine:queue", args=["tenants"])).content.decode()
    assert "Rate budget left" in page
    assert re.search(r"6 <span class=\"muted\">of 10 per 1 min", page)


def test_a_fair_queue_shows_each_keys_weight(viewer: Any) -> None:
    QueueConfig.objects.update_or_create(name="tenants", defaults={"fair_share": True})
    GroupWeight.objects.create(queue="tenants", group_key="acme", weight=3)
    job("acme", "available")
    job("globex", "available")

    keys = reads.queue_keys("tenants")

    assert keys.fair and [(k.key, k.weight) for k in keys.keys] == [("acme", 3), ("globex", 1)]
    page = viewer.get(reverse("queue_engine:queue", args=["tenants"])).content.decode()
    assert "Claims take turns between the keys (fair share)" in page
    assert re.search(
        r'<th scope="row" class="mono"><a [^>]*>acme</a></th>.*?<td class="num">3</td>', page, re.S
    )
