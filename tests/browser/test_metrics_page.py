"""The metrics page (every queue, 15 minutes to 30 days, live) and chart axes that fit."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from queue_engine.models import JobRecord, QueueConfig
from tests.support.browser import Server, screenshot, wait_until
from tests.support.console_data import error, next_ids

SHOTS = Path("/work/wt/shots")
NARROW = {"width": 390, "height": 844}


def shot(page: Any, name: str) -> None:
    path = screenshot(page, f"metrics-{name}")
    if SHOTS.is_dir():
        shutil.copy(path, SHOTS / path.name)


def ended_jobs(
    n: int,
    *,
    kind: str = "mail.send",
    queue: str = "emails",
    state: str = "succeeded",
    minutes_ago: float = 5,
    wait: float = 0.003,
    run: float = 0.01,
    attempt: int = 1,
) -> None:
    """`n` ended jobs that finished `minutes_ago`, each after waiting `wait` seconds and
    running `run`."""
    finished = timezone.now() - timedelta(minutes=minutes_ago)
    started = finished - timedelta(seconds=run)
    due = started - timedelta(seconds=wait)
    JobRecord.objects.bulk_create(
        JobRecord(
            id=job_id,
            state=state,
            queue=queue,
            kind=kind,
            attempt=attempt,
            max_attempts=3,
            created_at=due,
            run_at=due,
            started_at=None if state == "cancelled" else started,
            finished_at=finished,
            errors=[error(attempt, "builtins.TimeoutError", "upstream timed out")]
            if state == "failed"
            else [],
        )
        for job_id in next_ids(n)
    )


def milliseconds_and_one_slow_minute() -> None:
    """An hour of jobs that wait 3 to 20 ms and run 5 to 34 ms, and one minute in which
    a burst waited 4.2 s: the figures the issue saw on a 5 s axis."""
    for minute in range(2, 40, 3):
        ended_jobs(6, minutes_ago=minute, wait=0.003 + minute / 2500, run=0.005 + minute / 1300)
    ended_jobs(3, minutes_ago=20.5, wait=4.2, run=0.02)


def axis_labels(page: Any, chart: str) -> list[str]:
    return page.eval_on_selector_all(
        f".{chart} .chart-ticks text", "texts => texts.map(t => t.textContent)"
    )


def share_of_plot(page: Any, chart: str, line: str) -> float:
    """How much of the plot's height the line covers in the chart (a selector of its
    figure), from its lowest point to its highest, stretches and lone dots together."""
    return page.evaluate(
        f"""() => {{
            const plot = document.querySelector('{chart} svg.chart').getBoundingClientRect();
            const boxes = [...document.querySelectorAll('{chart} path.line.{line}')]
                .map(p => p.getBoundingClientRect());
            const top = Math.min(...boxes.map(b => b.top));
            const bottom = Math.max(...boxes.map(b => b.bottom));
            return (bottom - top) / plot.height;
        }}"""
    )


def overlapping_labels(page: Any) -> list[str]:
    """Tick labels of one chart whose boxes overlap, anywhere on the page."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.chart-ticks')].flatMap(svg => {
            const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()]);
            return boxes.flatMap(([a, p], i) => boxes.slice(i + 1)
                .filter(([, q]) => p.top < q.bottom - 0.5 && q.top < p.bottom - 0.5)
                .map(([b]) => a + ' / ' + b));
        })"""
    )


def cards(page: Any) -> dict[str, str]:
    return dict(
        page.eval_on_selector_all(
            "#metrics-body .card",
            """cards => cards.map(c => [c.querySelector('.label').textContent,
                                        c.querySelector('.value').textContent.trim()])""",
        )
    )


def overflows(page: Any) -> bool:
    return page.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_wait_and_run_axis_fits_milliseconds_beside_a_slow_minute(
    new_page: Any, server: Server, scheme: str
) -> None:
    milliseconds_and_one_slow_minute()
    QueueConfig.objects.create(name="emails")
    page = new_page("viewer", color_scheme=scheme)

    page.goto(f"{server.url}/queues/emails/?window=1h")

    labels = axis_labels(page, "chart-latency")
    shot(page, f"queue-axis-{scheme}")
    # The lines of 3 to 34 ms are drawn across the plot, not pressed against its floor.
    latency = "#queue-charts figure:last-child"  # the wait and run chart
    assert share_of_plot(page, latency, "run-p50") > 0.15
    assert share_of_plot(page, latency, "wait-p50") > 0.1
    # The axis reads in milliseconds where the lines are, and reaches the slow minute.
    assert labels[:2] == ["2 ms", "10 ms"] and labels[-2:] == ["1 s", "5 s"], labels
    assert "log scale" in page.inner_text(".chart-latency .chart-axis")
    throughput = axis_labels(page, "chart-throughput")
    assert throughput[0] == "0" and len(throughput) >= 3
    assert not overlapping_labels(page)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_metrics_page_shows_every_queue_and_follows_new_failures(
    new_page: Any, server: Server, scheme: str
) -> None:
    ended_jobs(40, queue="emails", kind="mail.send", minutes_ago=4)
    ended_jobs(25, queue="media", kind="media.resize", minutes_ago=9, run=1.5, wait=0.2)
    ended_jobs(3, queue="billing", kind="billing.charge", state="failed", minutes_ago=6, attempt=3)
    ended_jobs(5, queue="billing", kind="billing.charge", minutes_ago=6, attempt=2)
    ended_jobs(2, queue="emails", kind="mail.send", state="cancelled", minutes_ago=3)
    ended_jobs(7, queue="emails", kind="mail.digest", minutes_ago=60 * 30)  # before 24 h
    page = new_page("viewer", color_scheme=scheme)

    page.click("nav a:has-text('Metrics')")
    page.wait_for_selector("#metrics-body .cards")
    totals = cards(page)
    failures = page.inner_text("#metrics-failures")
    dead_link = page.get_attribute("#metrics-failures tr:has-text('billing.charge') a", "href")
    shot(page, f"page-{scheme}")

    assert page.url == f"{server.url}/charts/"
    assert totals == {
        "Ended": "75",
        "Succeeded": "70",
        "Dead": "3 4 %",
        "Cancelled": "2",
        "Retried attempts": "11",
    }
    assert "70 succeeded" in page.inner_text(".chart-throughput figcaption")
    assert "billing.charge\t3\t11\t8" in failures
    assert "mail.send" not in failures  # nothing of it failed
    assert dead_link == "/jobs/?kind=billing.charge&state=dead&range=1h"
    assert page.get_attribute(".window-picker a[aria-current]", "href") == "?window=1h"

    page.click(".window-picker a:has-text('7d')")
    page.wait_for_url(f"{server.url}/charts/?window=7d")
    wait_until(page, "document.querySelector('[data-live]').classList.contains('on')")
    assert cards(page)["Ended"] == "82"
    ended_jobs(2, queue="media", kind="media.transcode", state="failed", minutes_ago=0.1)
    wait_until(
        page,
        "document.querySelector('#metrics-failures').innerText.includes('media.transcode')",
        timeout=20000,
    )
    assert cards(page)["Ended"] == "84"  # still the 7 days
    assert page.url == f"{server.url}/charts/?window=7d"

    page.click("#metrics-failures tr:has-text('media.transcode') a")
    page.wait_for_url("**/jobs/?kind=media.transcode&state=dead&range=7d")
    assert page.locator("tr[id^=job-row-]").count() == 2
    assert not page.errors


def test_the_metrics_page_at_390_px(new_page: Any, server: Server) -> None:
    milliseconds_and_one_slow_minute()
    ended_jobs(3, queue="billing", kind="billing.charge", state="failed", minutes_ago=6, attempt=3)
    page = new_page("viewer", viewport=NARROW)

    page.goto(f"{server.url}/charts/?window=1h")

    shot(page, "page-390")
    assert not overflows(page)
    assert not overlapping_labels(page)
    plot = page.locator(".chart-latency svg.chart").bounding_box()
    assert plot is not None and plot["width"] > 250
    assert page.locator("#metrics-failures tr:has-text('billing.charge') a").is_visible()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_with_no_metrics_yet_the_page_says_to_start_a_worker(
    new_page: Any, server: Server, scheme: str
) -> None:
    page = new_page("viewer", color_scheme=scheme)

    page.goto(f"{server.url}/charts/?window=30d")

    text = page.inner_text("#metrics-body")
    shot(page, f"empty-{scheme}")
    assert "No metrics yet" in text
    assert "python manage.py runworker" in text
    assert page.get_attribute(".window-picker a[aria-current]", "href") == "?window=30d"
