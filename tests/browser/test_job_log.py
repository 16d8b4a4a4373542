"""The job page's log: find in it, and links to a line."""

from __future__ import annotations

from typing import Any

from queue_engine.models import JobLog
from tests.support import console_data
from tests.support.browser import Server, screenshot


def job_with_log(n: int, *, every: int = 0, word: str = "timeout") -> tuple[int, list[int]]:
    """An ended job with `n` log lines; every `every`-th line says `word` (with markup)."""
    job = console_data.record("failed", queue="logs", name="nightly import")
    JobLog.objects.bulk_create(
        JobLog(
            job_id=job.id,
            attempt=1,
            seq=i,
            stream="stdout",
            text=f"row {i}: <b>{word.upper()}</b> talking to the bank"
            if every and i % every == 0
            else f"row {i}: imported",
        )
        for i in range(1, n + 1)
    )
    return job.id, list(
        JobLog.objects.filter(job_id=job.id).order_by("id").values_list("id", flat=True)
    )


def test_find_in_the_log_highlights_and_steps_through_matches(
    new_page: Any, server: Server
) -> None:
    job_id, _ = job_with_log(120, every=40)  # rows 40, 80 and 120
    page = new_page("viewer")
    page.goto(f"{server.url}/jobs/{job_id}/")

    page.keyboard.press("/")  # the page's search is the log's find
    page.keyboard.type("TimeOut")
    first = page.inner_text("[data-log-count]")
    current_1 = page.inner_text("mark.find-hit.current").lower()
    line_1 = page.evaluate("document.querySelector('mark.current').closest('.log-line').id")
    page.keyboard.press("Enter")
    second = page.inner_text("[data-log-count]")
    line_2 = page.evaluate("document.querySelector('mark.current').closest('.log-line').id")
    in_view = page.evaluate(
        """() => { const m = document.querySelector('mark.current').getBoundingClientRect();
                   const log = document.getElementById('job-log').getBoundingClientRect();
                   return m.top >= log.top && m.bottom <= log.bottom; }"""
    )
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    wrapped = page.inner_text("[data-log-count]")
    screenshot(page, "job-log-find")
    page.fill("#log-q", "no such words")
    nothing = page.inner_text("[data-log-count]")
    copied_text = page.inner_text("#log-lines .log-line:nth-child(40) .text")

    assert first == "1 of 3" and current_1 == "timeout"
    assert second == "2 of 3" and line_1 != line_2
    assert in_view
    assert wrapped == "3 of 3"
    assert nothing == "no match"
    assert page.locator("mark.find-hit").count() == 0
    assert copied_text == "row 40: <b>TIMEOUT</b> talking to the bank"  # escaped, unchanged
    assert not page.errors


def test_a_link_to_a_line_shows_it_even_after_the_tail_moved_on(
    new_page: Any, server: Server
) -> None:
    job_id, ids = job_with_log(900)
    early = ids[10]  # the page shows the last 500 lines: this one is not among them
    page = new_page("viewer")
    page.goto(f"{server.url}/jobs/{job_id}/")
    tail_has_it = page.locator(f"#L{early}").count()
    page.click(f"#L{ids[-3]} a.line-link")  # a line on screen links to itself
    page.wait_for_url(f"**/jobs/{job_id}/?around={ids[-3]}#L{ids[-3]}")

    page.goto(f"{server.url}/jobs/{job_id}/?around={early}#L{early}")
    page.wait_for_timeout(800)  # the socket's first push replaces the lines: still marked
    targeted = page.evaluate("[...document.querySelectorAll('.log-line.linked')].map(l => l.id)")
    notes = page.locator("#log-lines .attempt-mark").all_inner_texts()
    in_view = page.evaluate(
        f"""() => {{ const l = document.getElementById('L{early}').getBoundingClientRect();
                     return l.top >= 0 && l.bottom <= innerHeight; }}"""
    )
    screenshot(page, "job-log-linked-line")
    page.click("text=Show the end of the log")
    end = page.locator(f"#L{ids[-1]}").count()

    assert tail_has_it == 0
    assert targeted == [f"L{early}"]
    assert in_view
    assert "Newer lines are not shown here" in notes[-1]
    assert end == 1
    assert not page.errors
