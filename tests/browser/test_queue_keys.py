"""The queue page's group keys in the browser: readable in light and dark, and on a phone."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from queue_engine.models import ClaimLog, GroupLimit, Job, QueueConfig
from tests.support.browser import Server, screenshot, wait_until
from tests.support.history import history_row


@pytest.mark.parametrize(("scheme", "width"), [("light", 1360), ("dark", 1360), ("dark", 390)])
def test_the_keys_panel_shows_each_keys_share_and_budget(
    new_page: Any, server: Server, scheme: str, width: int
) -> None:
    QueueConfig.objects.update_or_create(
        name="tenants",
        defaults={
            "group_concurrency": 4,
            "rate_limit": 100,
            "rate_window": 60,
            "rate_limit_per_key": True,
        },
    )
    GroupLimit.objects.create(queue="tenants", group_key="tenant-acme", rate_limit=20)
    now = timezone.now()
    for key, waiting, started in (("tenant-acme", 40, 30), ("tenant-globex", 3, 10)):
        Job.objects.bulk_create(
            Job(kind="tests.noop", queue="tenants", group_key=key) for _ in range(waiting)
        )
        for n in range(started):
            history_row(now, queue="tenants", group_key=key, run=1 + n % 30).save(force_insert=True)
        ClaimLog.objects.create(queue="tenants", group_key=key, at=now, count=started // 2)
    page = new_page("viewer", color_scheme=scheme, viewport={"width": width, "height": 900})

    # The socket's first push swaps the panel in again: read it after that push, or a
    # step (the scroll) may hold an element the swap has just taken out of the page.
    page.add_init_script(
        "document.addEventListener('htmx:wsAfterMessage',"
        " () => { window.pushes = (window.pushes || 0) + 1; });"
    )
    page.goto(f"{server.url}/queues/tenants/")
    wait_until(page, "window.pushes >= 1", 20000)

    panel = page.locator("#queue-keys")
    rows = panel.locator("tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).inner_text().split()[:2] == ["tenant-acme", "40"]
    assert "75%" in rows.nth(0).inner_text()
    assert "5 of 20 per 1 min" in " ".join(rows.nth(0).inner_text().split())
    panel.scroll_into_view_if_needed()
    screenshot(page, f"queue-keys-{scheme}-{width}")
    assert page.errors == []
