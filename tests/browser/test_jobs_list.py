"""The jobs list as operators use it all day: state tabs with counts, sorting, compact rows,
absolute times."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from queue_engine.models import Job, JobRecord
from queue_engine.templatetags.queue_engine import duration
from tests.support import console_data
from tests.support.browser import Server, screenshot

SOON = 8000


def test_state_tabs_count_each_state_and_follow_new_jobs(new_page: Any, server: Server) -> None:
    data = console_data.seed()
    page = new_page("viewer")
    page.goto(f"{server.url}/jobs/")
    page.wait_for_selector("[data-live].on")
    counts = {
        state: Job.objects.filter(state=state).count()
        + JobRecord.objects.filter(state=state).count()
        for state in ("available", "running", "failed")
    }
    shown = {
        state: int(page.inner_text(f"#job-tabs a.s-{state} .tab-count"))
        for state in ("available", "running", "failed")
    }

    page.click("#job-tabs a.s-failed")
    page.wait_for_url("**/jobs/?state=failed")
    rows = page.locator("#job-results tbody tr[id^=job-row-]").count()
    badges = set(page.locator("#job-results tbody .badge").all_inner_texts())
    current = page.inner_text("#job-tabs a[aria-current=page]")
    Job.objects.create(kind="tests.noop", queue="emails", name="one more")
    page.wait_for_selector(
        f"#job-tabs a.s-available .tab-count:text-is('{counts['available'] + 1}')", timeout=SOON
    )

    assert shown == counts
    assert rows == len(data.dead) and badges == {"dead"}
    assert current.startswith("Dead")
    assert not page.errors


def test_sorting_by_run_time_and_back(new_page: Any, server: Server) -> None:
    for seconds in (3, 90, 12):
        console_data.record("succeeded", queue="sorting", ran=timedelta(seconds=seconds))
    page = new_page("viewer")
    page.goto(f"{server.url}/jobs/?queue=sorting")

    page.click("#job-results th:has-text('Run time') a")
    page.wait_for_url("**sort=-runtime**")
    longest_first = page.locator("#job-results tbody td.runtime").all_inner_texts()
    state = page.get_attribute("#job-results th:has-text('Run time')", "aria-sort")
    page.click("#job-results th:has-text('Run time') a")
    page.wait_for_url("**sort=runtime**")
    shortest_first = page.locator("#job-results tbody td.runtime").all_inner_texts()
    page.keyboard.press("Tab")  # headers are links: reachable with the keyboard
    page.click("#job-results th:has-text('Id') a")
    by_id = page.get_attribute("#job-results th:has-text('Id')", "aria-sort")

    assert longest_first == [duration(90), duration(12), duration(3)]
    assert shortest_first == list(reversed(longest_first))
    assert state == "descending"
    assert by_id == "descending" and "sort=" not in page.url
    assert not page.errors


def test_compact_rows_fit_forty_on_a_900_px_screen_and_times_can_be_absolute(
    new_page: Any, server: Server
) -> None:
    for n in range(60):
        console_data.record("succeeded", queue="dense", name=f"job {n}")
    page = new_page("operator", viewport={"width": 1360, "height": 900})
    page.goto(f"{server.url}/jobs/?queue=dense")
    relative = page.inner_text("#job-results tbody tr:first-child time")

    page.click("[data-toggle-view=density]")
    page.click("[data-toggle-view=times]")
    page.reload()  # both are remembered
    # The first row just under the sticky top bar, as a reader scrolled to the list sees it.
    visible = page.evaluate(
        """() => {
             const bar = document.querySelector('.topbar').getBoundingClientRect().bottom;
             const rows = [...document.querySelectorAll('#job-results tbody tr')];
             window.scrollBy(0, rows[0].getBoundingClientRect().top - bar);
             return rows.filter(r => { const b = r.getBoundingClientRect();
                                       return b.top >= bar - 0.5 && b.bottom <= innerHeight; })
                        .length;
           }"""
    )
    absolute = page.inner_text("#job-results tbody tr:first-child time")
    hover = page.get_attribute("#job-results tbody tr:first-child time", "title")
    pressed = page.get_attribute("[data-toggle-view=density]", "aria-pressed")
    page.screenshot(path=str(screenshot(page, "jobs-compact")))  # the screen, not the page

    assert "ago" in relative
    assert visible >= 40, f"{visible} rows fit"
    assert ":" in absolute and "ago" not in absolute
    assert hover is not None and "ago" in hover
    assert pressed == "true"
    assert not page.errors
