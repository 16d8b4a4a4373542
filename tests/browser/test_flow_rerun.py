"""Rerun a flow from a node with an edited input, and the kill switch, in Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queue_engine.models import FlowRun, JobRecord
from tests.browser import jobs as browser_jobs
from tests.support import kind_jobs
from tests.support.browser import JOB_MODULES, Server, screenshot, wait_until
from tests.support.step_runs import step_runs  # noqa: F401  the fixture
from tests.support.workers import Workers

STEP_MODULES = f"{JOB_MODULES},tests.support.step_jobs"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_rerun_a_failed_flow_from_a_node_with_an_edited_input(
    new_page: Any, server: Server, workers: Workers, tmp_path: Path, scheme: str
) -> None:
    from queue_engine.flows import Flow
    from tests.support import jobs

    fixed = tmp_path / "fixed"
    fixed.touch()
    flow = Flow("invoices")
    flow.add("collect", jobs.number, value=2)
    flow.add(
        "charge", browser_jobs.fails_until, marker=str(tmp_path / "missing"), depends_on=["collect"]
    )
    flow.add("email", jobs.sum_outputs, depends_on=["collect", "charge"])
    flow_id = flow.submit()
    workers.start("--queues", "flows", env={"JOBSITE_JOB_MODULES": JOB_MODULES})
    page = new_page("operator", color_scheme=scheme)
    page.goto(f"{server.url}/flows/{flow_id}/")
    page.wait_for_selector("#flow-state-badge.s-failed", timeout=15000)

    page.click("#flow-nodes tr:has-text('charge') a:has-text('Rerun from here')")
    page.wait_for_selector("[data-payload-editor]")
    plan = page.inner_text("main")
    editor = page.locator("[data-payload-editor]")
    submit = page.locator("[data-payload-submit]")
    editor.fill('{"marker": ')
    not_json = page.inner_text("#payload-check")
    disabled_on_bad_json = submit.is_disabled()
    editor.fill('{"marker": 3, "colour": "red"}')
    misfit = page.inner_text("#payload-check")
    editor.fill("")
    editor.type(f'{{"marker": "{fixed}"}}')  # typed, as an operator would
    wait_until(page, "!document.querySelector('[data-payload-submit]').disabled")
    screenshot(page, f"rerun-from-node-{scheme}")
    submit.click()
    new_id = FlowRun.objects.exclude(pk=flow_id).get().pk
    page.wait_for_url(f"{server.url}/flows/{new_id}/")
    page.wait_for_selector("#flow-state-badge.s-succeeded", timeout=20000)
    screenshot(page, f"rerun-new-flow-{scheme}")

    assert "2 nodes run" in plan and "1 node reused from flow" in plan
    assert "Not JSON yet" in not_json and disabled_on_bad_json
    assert "“marker” should be string, not integer." in misfit
    assert "Unknown parameter “colour”" in misfit
    assert page.locator(f"#flow-nodes a:has-text('reused from flow #{flow_id}')").count() == 1
    assert JobRecord.objects.get(flow_id=new_id, node_key="email").result == 3
    assert (
        JobRecord.objects.get(flow_id=new_id, node_key="collect").meta["reused_from"]["flow"]
        == flow_id
    )
    page.goto(f"{server.url}/audit/")
    page.click("details.diff summary")
    assert str(fixed) in page.inner_text("pre.diff")
    assert not page.errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_rerun_with_masked_secrets_keeps_them_unless_typed_anew(
    new_page: Any, server: Server, workers: Workers, tmp_path: Path, scheme: str
) -> None:
    from queue_engine.flows import Flow
    from tests.support import jobs

    fixed = tmp_path / "fixed"
    fixed.touch()
    flow = Flow("sync")
    flow.add(
        "sync",
        jobs.connect,
        api_token="sk-live-ORIGINAL",
        db_url="postgres://u:pg-SECRET@h/db",
        marker=str(tmp_path / "missing"),
    )
    flow_id = flow.submit()
    workers.start("--queues", "flows", env={"JOBSITE_JOB_MODULES": JOB_MODULES})
    page = new_page("operator", color_scheme=scheme)
    page.goto(f"{server.url}/flows/{flow_id}/")
    page.wait_for_selector("#flow-state-badge.s-failed", timeout=15000)

    page.click("#flow-nodes tr:has-text('sync') a:has-text('Rerun from here')")
    editor = page.locator("[data-payload-editor]")
    shown = editor.input_value()
    html = page.content()
    editor.fill(shown.replace(str(tmp_path / "missing"), str(fixed)))  # only the marker
    wait_until(page, "!document.querySelector('[data-payload-submit]').disabled")
    screenshot(page, f"sec-rerun-masked-{scheme}")
    page.click("[data-payload-submit]")
    new_id = FlowRun.objects.exclude(pk=flow_id).get().pk
    page.wait_for_url(f"{server.url}/flows/{new_id}/")
    page.wait_for_selector("#flow-state-badge.s-succeeded", timeout=20000)

    assert '"api_token": "********"' in shown
    assert '"db_url": "postgres://u:********@h/db"' in shown
    assert "sk-live" not in html and "pg-SECRET" not in html
    ran = JobRecord.objects.get(flow_id=new_id, node_key="sync")
    assert ran.payload["api_token"] == "sk-live-ORIGINAL"
    assert ran.payload["db_url"] == "postgres://u:pg-SECRET@h/db"
    assert ran.result == "connected"
    page.goto(f"{server.url}/audit/")
    page.click("details.diff summary")
    diff = page.inner_text("pre.diff")
    assert str(fixed) in diff and ": changed" not in diff and "sk-live" not in diff
    assert not page.errors


def test_pausing_a_kind_from_the_kinds_page(new_page: Any, server: Server) -> None:
    kind_jobs.paused_kind.enqueue_many([{"n": i} for i in range(4)])
    page = new_page("operator")
    page.goto(server.url + "/")
    page.keyboard.press("g")
    page.keyboard.press("k")
    page.wait_for_url(server.url + "/kinds/")
    page.click("tr:has-text('tests.switch.paused') button:has-text('Pause')")
    confirmation = page.inner_text("main")
    page.click("button[type=submit]:has-text('Pause tests.switch.paused')")
    page.wait_for_selector(".flash-success")
    screenshot(page, "kinds-paused")

    assert "Its 4 waiting jobs stay queued" in confirmation
    row = page.locator("tr:has-text('tests.switch.paused')")
    assert row.locator(".badge.s-paused").count() == 1
    assert row.locator("button:has-text('Resume')").count() == 1
    page.goto(server.url + "/")
    assert "tests.switch.paused" in page.inner_text("#paused-kinds")
    assert not page.errors


def test_the_job_page_shows_durable_steps_as_they_are_recorded(
    new_page: Any,
    server: Server,
    workers: Workers,
    step_runs: None,  # noqa: F811
) -> None:
    from tests.support import step_jobs

    job_id = step_jobs.three_steps.enqueue(fail_on=1).pk
    page = new_page("viewer")
    page.goto(f"{server.url}/jobs/{job_id}/")
    page.wait_for_selector("[data-live].connected, .live-dot", timeout=10000)
    hidden_before = page.locator("#job-steps").is_hidden()

    workers.start("--queues", "steps", env={"JOBSITE_JOB_MODULES": STEP_MODULES})
    wait_until(page, "document.querySelectorAll('#job-steps tbody tr').length === 3", 20000)
    wait_until(
        page, "document.querySelector('#job-state-badge').textContent === 'succeeded'", 20000
    )
    screenshot(page, "job-steps")

    rows = page.locator("#job-steps tbody tr").all_inner_texts()
    assert hidden_before
    assert [r.split("\t")[:2] for r in rows] == [["one", "1"], ["two", "2"], ["three", "2"]]
    assert not page.errors
