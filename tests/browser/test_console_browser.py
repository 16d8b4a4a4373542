"""The console in headless Chromium, against a live daphne and a real worker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from queue_engine.models import Job, JobLog, JobRecord
from tests.browser import jobs as browser_jobs
from tests.support import console_data
from tests.support.browser import JOB_MODULES, Server, screenshot, wait_until
from tests.support.workers import Workers, wait_for

PAGES = {
    "overview": "/",
    "queues": "/queues/",
    "jobs": "/jobs/",
    "flows": "/flows/",
    "dead": "/dead/",
    "schedules": "/schedules/",
    "workers": "/workers/",
    "kinds": "/kinds/",
    "audit": "/audit/",
    "queue": "/queues/emails/",
}


def test_bulk_retry_states_the_exact_count_and_the_jobs_run(
    new_page: Any, server: Server, workers: Workers
) -> None:
    dead = [
        console_data.record(
            "failed",
            queue="default",
            kind="tests.noop",
            errors=[console_data.error(1, "builtins.ValueError", "boom")],
        )
        for _ in range(3)
    ]
    console_data.record("succeeded", queue="default", kind="tests.noop")
    workers.start("--concurrency", "2")
    page = new_page("operator")

    page.goto(server.url + "/jobs/?state=failed")
    page.check("[data-select-all]")
    assert page.inner_text("[data-selected-count]") == "3 jobs selected"
    page.click("button[value=retry]")
    heading = page.inner_text("h1")
    page.click("button[type=submit]:has-text('Retry 3 jobs')")
    flash = page.inner_text(".flash")

    assert heading == "Retry 3 jobs?"
    assert flash == "3 jobs retried."
    wait_for(
        lambda: (
            JobRecord.objects.filter(pk__in=[r.id for r in dead], state="succeeded").count() == 3
        ),
        timeout=20,
        message="the retried jobs to succeed",
    )
    assert not page.errors


WATCH_FOR_MARKER = """
new MutationObserver((_, observer) => {
  const line = [...document.querySelectorAll("#log-lines .log-line")]
    .find(el => el.textContent.includes("marker"));
  if (line) { window.markerShownAt = Date.now(); observer.disconnect(); }
}).observe(document.getElementById("job-log"), {childList: true, subtree: true});
"""


def test_a_log_line_shows_within_a_second(
    new_page: Any, server: Server, workers: Workers, tmp_path: Path
) -> None:
    go, done = tmp_path / "go", tmp_path / "done"
    job = browser_jobs.log_on_signal.enqueue(
        go=str(go), done=str(done), line="the <em>marker</em> line"
    )
    workers.start("--queues", "browser", env={"JOBSITE_JOB_MODULES": JOB_MODULES})
    wait_for(
        lambda: Job.objects.filter(pk=job.id, state="running").exists(),
        timeout=20,
        message="the job to start",
    )
    page = new_page("viewer")
    page.goto(f"{server.url}/jobs/{job.id}/")
    page.wait_for_selector("[data-live].on")
    page.evaluate(WATCH_FOR_MARKER)

    go.touch()
    wait_until(page, "window.markerShownAt", timeout=10000)
    written = JobLog.objects.get(job_id=job.id, text__contains="marker").at
    shown_after = page.evaluate("window.markerShownAt") / 1000 - written.timestamp()

    assert shown_after < 1.0, f"the log line showed {shown_after:.2f}s after the job wrote it"
    assert page.inner_text("#log-lines .log-line .text") == "the <em>marker</em> line"
    screenshot(page, "job-live-light")
    done.touch()
    page.wait_for_selector("#job-state-badge.s-succeeded", timeout=10000)
    assert not page.errors


def test_pausing_a_queue_stops_claims_until_resumed(
    new_page: Any, server: Server, workers: Workers
) -> None:
    from tests.support import jobs

    jobs.noop.enqueue()  # creates the queue
    workers.start("--concurrency", "2")
    page = new_page("operator")
    page.goto(server.url + "/queues/default/")

    page.click("button:has-text('Pause…')")
    page.click("button:has-text('Pause default')")  # the confirmation
    page.wait_for_selector("#queue-badge .s-paused")
    held = jobs.noop.enqueue()
    # A window: no worker may take the held job while its queue is paused.
    time.sleep(1.5)
    still_waiting = Job.objects.filter(pk=held.id, state="available").exists()
    page.click("button:has-text('Resume…')")
    page.click("button:has-text('Resume default')")

    assert still_waiting
    wait_for(
        lambda: JobRecord.objects.filter(pk=held.id, state="succeeded").exists(),
        timeout=15,
        message="the held job to run after resume",
    )
    assert not page.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_in_light_and_dark(new_page: Any, server: Server, scheme: str) -> None:
    data = console_data.seed()
    console_data.history()
    page = new_page("operator", color_scheme=scheme)
    pages = {**PAGES, "job": f"/jobs/{data.running.id}/", "dead-job": f"/jobs/{data.dead[-1].id}/"}

    for name, url in pages.items():
        page.goto(server.url + url)
        page.wait_for_load_state("networkidle")
        screenshot(page, f"{name}-{scheme}")
    page.goto(server.url + "/jobs/")
    page.check("[data-select-all]")
    page.click("button[value=retry]")
    screenshot(page, f"confirm-{scheme}")
    page.goto(server.url + "/jobs/?state=failed")
    page.check("[data-all-matching]")
    page.click("button[value=redrive]")
    screenshot(page, f"confirm-matching-{scheme}")

    assert not page.errors


def test_narrow_window(new_page: Any, server: Server) -> None:
    data = console_data.seed()
    page = new_page("operator", viewport={"width": 390, "height": 844})

    urls = {"overview": "/", "jobs": "/jobs/", "job": f"/jobs/{data.running.id}/"}
    for name, url in urls.items():
        page.goto(server.url + url)
        page.wait_for_load_state("networkidle")
        screenshot(page, f"{name}-narrow")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{name} scrolls sideways ({width}px)"


def test_keyboard_shortcuts_and_theme_toggle(new_page: Any, server: Server) -> None:
    page = new_page("viewer", color_scheme="light")
    page.goto(server.url + "/jobs/")

    page.keyboard.press("/")
    focused = page.evaluate("document.activeElement.id")
    page.keyboard.press("Escape")
    page.keyboard.press("?")
    dialog_open = page.is_visible("#shortcuts-dialog")
    page.keyboard.press("Escape")
    page.click("[data-theme-toggle]")  # auto -> light
    page.click("[data-theme-toggle]")  # light -> dark
    page.reload()
    theme = page.evaluate("document.documentElement.dataset.theme")
    page.keyboard.press("g")
    page.keyboard.press("w")
    page.wait_for_url(server.url + "/workers/")

    assert focused == "f-q"
    assert dialog_open
    assert theme == "dark"
    screenshot(page, "shortcuts-dark")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_running_flow_changes_colour_live(
    new_page: Any, server: Server, workers: Workers, tmp_path: Path, scheme: str
) -> None:
    from queue_engine.flows import Flow
    from tests.support import jobs

    go = tmp_path / "go"
    flow = Flow("nightly import")
    flow.add("download", browser_jobs.gate, go=str(go))
    parts = flow.fan_out(
        "transform", jobs.number, [{"value": i} for i in range(3)], depends_on=["download"]
    )
    flow.add("publish", jobs.sum_outputs, depends_on=parts)
    flow_id = flow.submit()
    workers.start(
        "--queues", "flows", "--concurrency", "4", env={"JOBSITE_JOB_MODULES": JOB_MODULES}
    )
    page = new_page("operator", color_scheme=scheme)

    page.goto(f"{server.url}/flows/{flow_id}/")
    page.wait_for_selector("#flow-graph svg a.node.s-running", timeout=10000)
    running = page.get_attribute("#flow-graph svg a.node.s-running", "aria-label")
    waiting = page.locator("#flow-graph svg a.node.s-blocked").count()
    screenshot(page, f"flow-running-{scheme}")
    go.touch()
    page.wait_for_selector("#flow-state-badge.s-succeeded", timeout=20000)
    wait_until(
        page,
        "document.querySelectorAll('#flow-graph svg a.node.s-succeeded').length === 5",
        timeout=5000,
    )
    screenshot(page, f"flow-succeeded-{scheme}")
    timeline_rows = page.locator("#flow-timeline .tl-row").count()
    critical = page.locator("#flow-timeline .tl-row.critical .tl-label").all_inner_texts()
    page.goto(f"{server.url}/flows/")
    screenshot(page, f"flows-{scheme}")
    page.goto(f"{server.url}/flows/{flow_id}/")
    page.click("#flow-graph svg a.node:has-text('publish')")
    page.wait_for_url(f"{server.url}/jobs/*/")
    children_heading = page.inner_text("#job-flow h3:has-text('Parents')")

    assert running is not None and running.startswith("download")
    assert waiting == 4
    assert children_heading.startswith("Parents 3")
    assert timeline_rows == 5
    assert critical[0] == "download" and critical[-1] == "publish" and len(critical) == 3
    assert JobRecord.objects.get(flow_id=flow_id, node_key="publish").result == 3
    assert not page.errors


def test_the_jobs_list_follows_a_job_to_success_keeping_the_selection(
    new_page: Any, server: Server, workers: Workers
) -> None:
    from tests.support import jobs

    done = console_data.record("succeeded", queue="default", kind="tests.noop")
    waiting = jobs.noop.enqueue()
    page = new_page("operator")
    page.goto(server.url + "/jobs/")
    page.wait_for_selector("[data-live].on")
    page.evaluate("window.notReloaded = true")
    page.check(f"#job-row-{waiting.id} input[name=ids]")
    page.check(f"#job-row-{done.id} input[name=ids]")
    before = page.inner_text(f"#job-row-{waiting.id} .badge")

    workers.start("--concurrency", "2")
    page.wait_for_selector(f"#job-row-{waiting.id} .badge.s-succeeded", timeout=15000)
    jobs.noop.enqueue()
    page.wait_for_selector("#jobs-newer a", timeout=10000)
    screenshot(page, "jobs-live")

    assert before == "available"
    assert page.evaluate("window.notReloaded") is True
    assert page.is_checked(f"#job-row-{waiting.id} input[name=ids]")
    assert page.is_checked(f"#job-row-{done.id} input[name=ids]")
    assert page.inner_text("[data-selected-count]") == "2 jobs selected"
    assert page.inner_text("#jobs-newer a") == "1 new job — show"
    assert page.locator("tr[id^=job-row-]").count() == 2  # the new job was not inserted
    assert not page.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_editing_a_queue_with_the_keyboard(new_page: Any, server: Server, scheme: str) -> None:
    from queue_engine.models import GroupLimit, QueueConfig

    QueueConfig.objects.create(name="emails")
    page = new_page("operator", color_scheme=scheme)
    page.goto(server.url + "/queues/emails/")

    page.focus("summary:has-text('Edit configuration')")
    page.keyboard.press("Enter")
    screenshot(page, f"queue-edit-form-{scheme}")
    page.fill("#cfg-max_concurrency", "many")
    page.press("#cfg-max_concurrency", "Enter")
    page.wait_for_selector(".field-error")
    screenshot(page, f"queue-edit-invalid-{scheme}")
    page.fill("#cfg-max_concurrency", "8")
    page.fill("#cfg-lock_duration", "15m")
    page.press("#cfg-lock_duration", "Enter")
    page.wait_for_selector(".changes")
    screenshot(page, f"queue-edit-confirm-{scheme}")
    page.keyboard.press("Enter")  # the confirm button has the focus
    page.wait_for_selector(".flash-success")
    page.focus("summary:has-text('Add or change a group limit')")
    page.keyboard.press("Enter")
    page.fill("#group-key", "<b>acme</b>/eu")
    page.fill("#group-max", "2")
    page.press("#group-max", "Enter")
    page.wait_for_selector(".changes")
    page.keyboard.press("Enter")
    page.wait_for_selector(".flash-success")
    screenshot(page, f"queue-edited-{scheme}")

    config = QueueConfig.objects.get(name="emails")
    assert (config.max_concurrency, config.lock_duration) == (8, 900)
    assert GroupLimit.objects.get().group_key == "<b>acme</b>/eu"
    assert page.locator("dt.mono", has_text="<b>acme</b>/eu").count() == 1
    assert not page.errors


def test_requeue_a_failed_flow_from_its_page(
    new_page: Any, server: Server, workers: Workers, tmp_path: Path
) -> None:
    from queue_engine.flows import Flow
    from tests.support import jobs

    fixed = tmp_path / "fixed"
    flow = Flow("invoices")
    flow.add("collect", jobs.number, value=2)
    flow.add("charge", browser_jobs.fails_until, marker=str(fixed), depends_on=["collect"])
    flow.add("email", jobs.sum_outputs, depends_on=["collect", "charge"])
    flow_id = flow.submit()
    workers.start("--queues", "flows", env={"JOBSITE_JOB_MODULES": JOB_MODULES})
    page = new_page("operator")
    page.goto(f"{server.url}/flows/{flow_id}/")
    page.wait_for_selector("#flow-state-badge.s-failed", timeout=15000)
    dead = page.locator("#flow-graph svg a.node.s-failed").count()

    fixed.touch()  # the operator fixed what made it fail
    page.click("button[value=requeue]")
    confirmation = page.inner_text("main")
    page.click("button[type=submit]:has-text('Requeue flow')")
    page.wait_for_selector("#flow-state-badge.s-succeeded", timeout=20000)

    assert dead == 1
    assert "1 dead or cancelled node runs again" in confirmation
    assert JobRecord.objects.get(flow_id=flow_id, node_key="email").result == 3
    assert not page.errors


def test_a_page_signed_out_elsewhere_says_so_and_goes_to_sign_in(
    new_page: Any, server: Server
) -> None:
    from django.contrib.sessions.models import Session

    job = Job.objects.create(kind="tests.noop", queue="browser", name="open in a tab")
    page = new_page("viewer")
    page.goto(f"{server.url}/jobs/{job.id}/")
    page.wait_for_selector("[data-live].on")

    Session.objects.all().delete()  # the only session: "log out" in another browser
    notice = page.wait_for_selector("[data-access-lost]", timeout=5000)
    text = notice.inner_text()
    live = page.get_attribute("[data-live]", "class")
    screenshot(page, "job-signed-out")
    page.wait_for_url(f"{server.url}/login/?next=/jobs/{job.id}/", timeout=10000)

    assert "You were signed out, so this page stopped updating" in text
    assert live is not None and "on" not in live.split()
    assert page.is_visible("#id_username")
    assert not page.errors
