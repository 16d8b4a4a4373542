"""The console's list pages follow changes without a reload; the queues page."""

from __future__ import annotations

import time
from typing import Any

from queue_engine.models import Job
from tests.support import console_data
from tests.support.browser import JOB_MODULES, Server, screenshot, wait_until

# A change the engine does not announce shows at the page's next timer tick (2 s; 5 s for
# schedules): a few seconds is what a user would wait.
SOON = 8000


def test_the_flows_list_follows_a_cancel_and_shows_a_rerun(new_page: Any, server: Server) -> None:
    from queue_engine.flows import Flow
    from queue_engine.ops import flows as ops_flows
    from tests.support import jobs

    flow = Flow("nightly import")
    flow.add("download", jobs.number, value=1)
    flow.add("publish", jobs.sum_outputs, depends_on=["download"])
    flow_id = flow.submit()  # no worker: it stays running
    page = new_page("viewer")
    page.goto(f"{server.url}/flows/")
    page.wait_for_selector("[data-live].on")
    row = f"#flow-results tr:has(a[href='/flows/{flow_id}/'])"
    before = page.inner_text(f"{row} .badge")

    ops_flows.cancel_flow(flow_id)
    page.wait_for_selector(f"{row} .badge.s-cancelled", timeout=SOON)
    rerun_id = ops_flows.rerun_flow(flow_id)
    page.wait_for_selector(f"#flow-results a[href='/flows/{rerun_id}/']", timeout=SOON)
    rerun_text = page.inner_text(f"#flow-results tr:has(a[href='/flows/{rerun_id}/'])")

    assert before == "running"
    assert f"rerun of #{flow_id}" in rerun_text
    assert not page.errors


def test_a_filtered_flows_list_stays_filtered_while_live(new_page: Any, server: Server) -> None:
    from queue_engine.flows import Flow
    from tests.support import jobs

    for name in ("orders export", "photo resize"):
        flow = Flow(name)
        flow.add("only", jobs.number, value=1)
        flow.submit()
    page = new_page("viewer")
    page.goto(f"{server.url}/flows/")
    page.wait_for_selector("[data-live].on")
    page.locator("#f-q").press_sequentially("photo")
    page.wait_for_url("**/flows/?*q=photo*")
    wait_until(page, "document.querySelectorAll('#flow-results tbody tr').length === 1")

    flow = Flow("photo crop")
    flow.add("only", jobs.number, value=1)
    new_id = flow.submit()
    page.wait_for_selector(f"#flow-results a[href='/flows/{new_id}/']", timeout=SOON)
    names = page.locator("#flow-results td a.name").all_inner_texts()

    assert sorted(names) == ["photo crop", "photo resize"]
    assert not page.errors


def test_dead_letter_audit_schedules_and_workers_follow_changes(
    new_page: Any, server: Server, workers: Any
) -> None:
    from queue_engine import schedules
    from queue_engine.ops import queues as ops_queues
    from tests.support import jobs

    page = new_page("viewer")

    page.goto(f"{server.url}/dead/")
    page.wait_for_selector("[data-live].on")
    console_data.record(
        "failed",
        queue="billing",
        errors=[console_data.error(1, "billing.CardDeclined", "the card was declined")],
    )
    page.wait_for_selector("#dead-groups td:has-text('billing')", timeout=SOON)
    screenshot(page, "dead-live")

    page.goto(f"{server.url}/audit/")
    page.wait_for_selector("[data-live].on")
    ops_queues.pause_queue("billing", actor="alice")
    page.wait_for_selector("#audit-events td:has-text('alice')", timeout=SOON)

    page.goto(f"{server.url}/schedules/")
    page.wait_for_selector("[data-live].on")
    schedules.upsert_interval("nightly-digest", jobs.noop, every=3600)
    page.wait_for_selector("#schedule-rows td:has-text('nightly-digest')", timeout=SOON)

    page.goto(f"{server.url}/workers/")
    page.wait_for_selector("[data-live].on")
    empty = page.inner_text("#worker-rows tbody")
    workers.start("--queues", "live-pages")
    page.wait_for_selector("#worker-rows td:has-text('live-pages')", timeout=15000)

    assert "No worker is running" in empty
    assert not page.errors


def test_the_queues_page_lists_sorts_and_follows_queues(new_page: Any, server: Server) -> None:
    from queue_engine.ops import queues as ops_queues

    console_data.seed()
    page = new_page("viewer")
    page.goto(f"{server.url}/")
    page.click("a:has-text('All queues')")
    page.wait_for_url(f"{server.url}/queues/")
    page.wait_for_selector("[data-live].on")
    by_name = page.locator("#queue-rows tbody td:first-child a.name").all_inner_texts()

    page.click("#queue-rows th:has-text('Dead') a")
    page.wait_for_url("**/queues/?sort=-dead")
    by_dead = page.locator("#queue-rows tbody td:first-child a.name").all_inner_texts()
    dead_counts = [
        int(text.rstrip("+"))
        for text in page.locator("#queue-rows tbody td:nth-child(6)").all_inner_texts()
    ]
    sort_state = page.get_attribute("#queue-rows th:has-text('Dead')", "aria-sort")

    Job.objects.create(kind="tests.noop", queue="zz-fresh", name="first of its queue")
    page.wait_for_selector("#queue-rows a.name:has-text('zz-fresh')", timeout=SOON)
    ops_queues.pause_queue("zz-fresh")
    page.wait_for_selector(
        "#queue-rows tr:has(a.name:has-text('zz-fresh')) .badge.s-paused", timeout=SOON
    )
    screenshot(page, "queues-sorted-by-dead")

    assert by_name == sorted(by_name) and len(by_name) >= 3
    assert dead_counts == sorted(dead_counts, reverse=True)
    assert sorted(by_dead) == sorted(by_name)
    assert sort_state == "descending"
    assert not page.errors


def test_the_workers_page_shows_what_each_worker_runs_live(
    new_page: Any, server: Server, workers: Any, tmp_path: Any
) -> None:
    from tests.browser import jobs as browser_jobs

    go, done = tmp_path / "go", tmp_path / "done"
    job = browser_jobs.log_on_signal.using(name="nightly report").enqueue(
        go=str(go), done=str(done), line="half way"
    )
    page = new_page("viewer")
    page.goto(f"{server.url}/workers/")
    page.wait_for_selector("[data-live].on")
    workers.start(
        "--queues", "browser", "--labels", "gpu", env={"JOBSITE_JOB_MODULES": JOB_MODULES}
    )

    row = f"#worker-rows .busy-table tr:has(a[href='/jobs/{job.id}/'])"
    page.wait_for_selector(row, timeout=15000)
    go.touch()  # the job reports 90 % progress
    page.wait_for_selector(f"{row} [aria-valuenow='90']", timeout=SOON)
    busy = page.inner_text(row)
    process = page.inner_text("#worker-rows table:not(.busy-table) tbody")
    screenshot(page, "workers-busy")
    page.click("#worker-rows a[title='What it runs now']")
    target = page.evaluate("location.hash")
    done.touch()
    page.wait_for_selector(row, state="detached", timeout=SOON)
    after = page.inner_text("#worker-rows")

    assert "nightly report" in busy and "browser.log_on_signal" in busy
    assert "90% · signalled" in busy
    assert "browser" in process and "gpu" in process
    assert target.startswith("#busy-")
    assert "No job is running." in after
    assert not page.errors


def test_a_page_served_by_one_daphne_follows_actions_taken_through_another(
    new_page: Any, server: Server, tmp_path: Any
) -> None:
    # Each daphne process LISTENs on its own connection and relays the engine's NOTIFY
    # hints to its own sockets: no channel layer joins the processes. The queue page's
    # timer runs every 5 s, so three updates each within a second are the hints'.
    from tests.support import jobs

    jobs.noop.enqueue()  # creates the queue
    (tmp_path / "second").mkdir()
    other = Server(tmp_path / "second")
    try:
        operator = new_page("operator")  # logged in through the first process
        watcher = new_page("viewer")
        watcher.goto(f"{other.url}/queues/default/")
        watcher.wait_for_selector("[data-live].on")
        operator.goto(f"{server.url}/queues/default/")
        delays = []
        for button, badge in (("Pause", "paused"), ("Resume", "running"), ("Pause", "paused")):
            operator.click(f"button:has-text('{button}…')")
            operator.click(f"button:has-text('{button} default')")  # the confirmation
            operator.wait_for_selector(f"#queue-badge .s-{badge}")
            acted = time.monotonic()
            watcher.wait_for_selector(f"#queue-badge .s-{badge}", timeout=3000)
            delays.append(time.monotonic() - acted)
        screenshot(watcher, "second-daphne-follows")
    finally:
        other.stop()

    assert max(delays) < 1.0, f"the other process's page followed after {delays}"
    assert not operator.errors and not watcher.errors
