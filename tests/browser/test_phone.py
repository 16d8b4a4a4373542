"""The console on a phone (390 px wide): no page scrolls sideways, and what is cut on a
wider screen (log times, a long meta value) stays readable."""

from __future__ import annotations

from typing import Any

import pytest

from queue_engine.models import Job
from tests.support import console_data
from tests.support.browser import Server, screenshot

PHONE = {"width": 390, "height": 844}

# Elements whose right edge passes the window, to name the culprit when the page scrolls.
OVERFLOWING = """() => [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
                 && e.getClientRects().length)
    .slice(0, 8).map(e => e.tagName + '.' + e.className + '#' + e.id)"""


def page_width(page: Any) -> int:
    return int(page.evaluate("document.scrollingElement.scrollWidth"))


def a_flow() -> int:
    from queue_engine.flows import Flow
    from tests.support import jobs

    flow = Flow("Catalogue import: spring range, with a long name for a phone")
    flow.add("import", jobs.number, value=1)
    parts = flow.fan_out(
        "resize", jobs.number, [{"value": i} for i in range(4)], depends_on=["import"]
    )
    flow.add("publish the whole catalogue", jobs.sum_outputs, depends_on=parts)
    return flow.submit()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_flow_page_fits_a_phone(new_page: Any, server: Server, scheme: str) -> None:
    flow_id = a_flow()
    page = new_page("operator", viewport=PHONE, color_scheme=scheme)

    page.goto(f"{server.url}/flows/{flow_id}/")
    page.wait_for_selector("#flow-graph svg a.node")
    page.wait_for_load_state("networkidle")
    screenshot(page, f"phone-flow-{scheme}")

    assert page_width(page) <= 390, page.evaluate(OVERFLOWING)
    assert page.locator("#flow-graph svg a.node").count() == 6
    assert not page.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_job_page_shows_log_times_and_the_whole_meta_on_a_phone(
    new_page: Any, server: Server, scheme: str
) -> None:
    data = console_data.seed()
    Job.objects.filter(pk=data.running.id).update(
        meta={
            "source": "https://catalogue.example.com/imports/spring-range/2026/batch-0042.csv",
            "requested_by": {"user": "ops@example.com", "reason": "a re-import after a fix"},
        }
    )
    page = new_page("viewer", viewport=PHONE, color_scheme=scheme)

    page.goto(f"{server.url}/jobs/{data.running.id}/")
    page.wait_for_load_state("networkidle")
    screenshot(page, f"phone-job-{scheme}")
    times = page.locator("#log-lines .log-line time")
    first_time = times.first.bounding_box()
    meta = page.locator("#job-result pre.json").last
    box = meta.bounding_box()
    inner = meta.evaluate("e => [e.scrollWidth, e.clientWidth]")

    assert page_width(page) <= 390, page.evaluate(OVERFLOWING)
    assert times.count() == 5 and times.first.is_visible()
    assert first_time is not None and first_time["width"] > 20
    assert first_time["x"] + first_time["width"] <= 390
    assert box is not None and box["x"] + box["width"] <= 390
    # The meta wraps in its box, so that all of it can be read without scrolling it.
    assert inner[0] <= inner[1]
    assert "batch-0042.csv" in meta.inner_text()
    assert not page.errors
