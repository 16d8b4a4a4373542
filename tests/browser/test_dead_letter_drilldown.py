"""What an operator sees following a dead-letter group to its jobs, a redriven job's runs, and
the state words and counts of the jobs list: light and dark, and at 390 px."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queue_engine import ops
from tests.support import console_data, jobs
from tests.support.browser import Server
from tests.support.workers import Workers

SHOTS = Path("/work/wt/shots")


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"lists-{name}.png"), full_page=True)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_dead_group_count_opens_exactly_that_group(
    new_page: Any, server: Server, scheme: str
) -> None:
    data = console_data.seed()
    refund = console_data.record(
        "failed",
        queue="billing",
        kind="demo.refund",
        errors=[console_data.error(1, "demo.CardDeclined", "refund to a closed card")],
    )
    page = new_page("operator", color_scheme=scheme)
    page.goto(f"{server.url}/dead/")
    kinds = page.locator("#dead-groups td.kind-cell").all_inner_texts()
    shot(page, f"dead-{scheme}")

    row = page.locator("#dead-groups tr", has_text="demo.charge_card").filter(
        has_text="CardDeclined"
    )
    row.locator("td.count-cell a").click()
    page.wait_for_url("**error_class=demo.CardDeclined**")
    listed = {
        int(i.removeprefix("job-row-"))
        for i in page.locator("#job-results tbody tr[id^=job-row-]").evaluate_all(
            "rows => rows.map(r => r.id)"
        )
    }
    dead_tab = page.inner_text("#job-tabs a.s-failed .tab-count")
    note = page.inner_text("#job-tabs .tab-note")
    shot(page, f"dead-group-jobs-{scheme}")

    assert sorted(kinds) == ["demo.charge_card", "demo.charge_card", "demo.refund"]
    assert listed == {r.id for r in data.dead[:3]} and refund.id not in listed
    assert dead_tab == "3"
    assert (
        note == "No count for succeeded and cancelled: no index counts ended jobs by error class."
    )
    assert not page.errors


def test_the_dead_letter_and_a_group_fit_a_phone(new_page: Any, server: Server) -> None:
    console_data.seed()
    page = new_page("operator", viewport={"width": 390, "height": 844})

    widths = {}
    for name, path in (
        ("dead", "/dead/"),
        (
            "group",
            "/jobs/?queue=billing&kind=demo.charge_card&state=failed&error_class=demo.CardDeclined",
        ),
    ):
        page.goto(server.url + path)
        widths[name] = page.evaluate("document.documentElement.scrollWidth")
        shot(page, f"{name}-390")

    assert widths == {"dead": 390, "group": 390}
    assert not page.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_redriven_jobs_failures_are_numbered_by_run(
    new_page: Any, server: Server, workers: Workers, scheme: str
) -> None:
    job_id = jobs.fatal.enqueue().id
    workers.run_burst()
    ops.redrive_job(job_id, actor="ops")
    workers.run_burst()
    page = new_page("operator", color_scheme=scheme)

    page.goto(f"{server.url}/jobs/{job_id}/")
    labels = page.locator("#job-errors .attempt-head b").all_inner_texts()
    facts = page.inner_text("#job-state .facts")
    buttons = page.locator("#job-state button").all_inner_texts()
    shot(page, f"job-runs-{scheme}")

    assert labels == ["Run 2, attempt 1 after a redrive", "Run 1, attempt 1"]
    assert "run 2 · attempt 1 of 10" in facts
    assert buttons == ["Redrive", "Remove"]
    assert not page.errors


def test_a_succeeded_job_offers_run_again(new_page: Any, server: Server) -> None:
    data = console_data.seed()
    page = new_page("operator", color_scheme="dark")

    page.goto(f"{server.url}/jobs/{data.succeeded[0].id}/")
    buttons = page.locator("#job-state button").all_inner_texts()
    page.click("#job-state button:text-is('Run again')")
    heading = page.inner_text("h1")
    shot(page, "run-again-confirm-dark")

    assert buttons == ["Run again", "Remove"]
    assert heading == "Run again 1 job?"
    assert not page.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_tabs_use_one_word_per_state_and_keep_counts_under_a_kind(
    new_page: Any, server: Server, scheme: str
) -> None:
    console_data.seed()
    page = new_page("viewer", color_scheme=scheme)

    page.goto(f"{server.url}/jobs/?kind=demo.slow_report")
    labels = [t.split("\n")[0].strip() for t in page.locator("#job-tabs a.tab").all_inner_texts()]
    counts = page.locator("#job-tabs .tab-count").all_inner_texts()
    notes = page.locator("#job-tabs .tab-note").count()
    shot(page, f"tabs-kind-{scheme}")
    page.goto(f"{server.url}/queues/")
    breakdown = page.locator(".queue-breakdown").all_inner_texts()
    shot(page, f"queues-{scheme}")

    assert labels == [
        "All", "Available", "Scheduled", "Running", "Parked", "Blocked", "Upstream failed",
        "Succeeded", "Dead", "Cancelled",
    ]  # fmt: skip
    assert counts == ["2", "0", "0", "1", "0", "1", "0", "0", "0", "0"]
    assert notes == 0
    assert "1 running · 1 blocked" in breakdown
    assert not page.errors
