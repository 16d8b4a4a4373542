"""Schedules' last fires, internal kinds, the audit filter and a queue pause's
confirmation, as an operator sees them in light and dark."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import console_data
from tests.support.browser import Server, screenshot

ENGINE_KIND = "queue_engine.console.matching.run_bulk"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_schedules_kinds_audit_and_queue_pause_pages(
    new_page: Any, server: Server, scheme: str
) -> None:
    from queue_engine import ops

    console_data.seed()
    fired = ops.run_schedule_now("digest")
    page = new_page("operator", color_scheme=scheme)

    page.goto(server.url + "/schedules/")
    fire_link = page.locator(f"ul.fires a[href='/jobs/{fired.id}/']")
    fire_visible = fire_link.is_visible()
    screenshot(page, f"schedules-fires-{scheme}")
    fire_link.click()
    page.wait_for_url(f"**/jobs/{fired.id}/")

    page.goto(server.url + "/kinds/")
    engine_row = page.locator("tr", has_text=ENGINE_KIND)
    internal_visible = engine_row.locator(".badge", has_text="internal").is_visible()
    engine_pause = engine_row.locator("button[value=pause]").count()
    other_pause = page.locator("tr", has_text="demo.send_email").locator("button[value=pause]")
    other_pause_visible = other_pause.is_visible()
    screenshot(page, f"kinds-internal-{scheme}")

    page.goto(server.url + "/audit/")
    page.select_option("#a-action", "redrive")
    page.click("button:has-text('Filter')")
    page.wait_for_url("**/audit/?*action=redrive*")
    shown = page.locator("#audit-events tbody tr").count()
    screenshot(page, f"audit-select-{scheme}")

    page.goto(server.url + "/queues/emails/")
    page.click(".crumbs a:has-text('Queues')")
    page.wait_for_url(server.url + "/queues/")
    page.goto(server.url + "/queues/emails/")
    page.click("button:has-text('Pause…')")
    heading = page.inner_text("h1")
    screenshot(page, f"queue-pause-confirm-{scheme}")

    assert fire_visible
    assert internal_visible and engine_pause == 0 and other_pause_visible
    assert shown == 1
    assert heading == "Pause queue emails?"
    assert not page.errors
