"""A parked job on the console: its state word and what it waits for, light and dark."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from queue_engine.flows import Flow
from queue_engine.models import Job, JobSignal
from queue_engine.ops.jobs import reschedule_jobs
from queue_engine.ops.signals import send_signal
from queue_engine.templatetags.queue_engine import node_segments
from tests.support import jobs
from tests.support.browser import Server
from tests.support.parked import parked_job

SHOTS = Path("/work/wt/shots")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_job_page_says_what_a_parked_job_waits_for(
    new_page: Any, server: Server, scheme: str
) -> None:
    waiting = parked_job("review", None)
    sleeping = parked_job(None, timedelta(days=7, hours=1))
    page = new_page("viewer", color_scheme=scheme)

    page.goto(f"{server.url}/jobs/{waiting.id}/")
    assert page.inner_text("#job-state-badge") == "parked"
    notice = page.inner_text("#job-parked")
    assert "Waits for the signal review since 5 min ago, with no deadline." in notice
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"waits-parked-{scheme}.png"), full_page=True)

    page.goto(f"{server.url}/jobs/{sleeping.id}/")
    assert "Sleeps since 5 min ago, until in 7 d." in page.inner_text("#job-parked")
    page.goto(f"{server.url}/jobs/?state=parked")
    assert page.locator("tbody tr").count() == 2
    page.screenshot(path=str(SHOTS / f"waits-list-{scheme}.png"), full_page=True)
    assert page.errors == []


def test_a_flows_progress_bar_counts_its_parked_nodes() -> None:
    segments = node_segments({"parked": 1, "succeeded": 3})

    assert [(state, count) for state, count, _ in segments] == [("succeeded", 3), ("parked", 1)]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_an_operator_approves_a_parked_job_and_opens_a_flows_gate(
    new_page: Any, server: Server, scheme: str
) -> None:
    waiting = parked_job("review", None)
    flow = Flow("publish")
    flow.add("draft", jobs.number, value=1)
    flow.add_gate("approved", signal="approval", depends_on=["draft"])
    flow_id = flow.submit()
    page = new_page("operator", color_scheme=scheme)
    SHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{server.url}/jobs/{waiting.id}/")
    page.screenshot(path=str(SHOTS / f"gates-job-{scheme}.png"), full_page=True)
    page.get_by_role("button", name="Approve…").click()
    assert "it resumes at once" in page.inner_text("#confirm-signal")
    page.screenshot(path=str(SHOTS / f"gates-confirm-{scheme}.png"), full_page=True)
    page.get_by_role("button", name="Send signal").click()
    assert page.inner_text("#job-state-badge") == "available"

    page.goto(f"{server.url}/flows/{flow_id}/")
    assert "for the signal approval" in page.inner_text("#flow-gates")
    page.screenshot(path=str(SHOTS / f"gates-flow-{scheme}.png"), full_page=True)
    page.get_by_role("button", name="Open gate…").click()
    page.get_by_role("button", name="Open gate", exact=True).click()
    assert "1 gate opened by signal approval" in page.inner_text("body")
    assert JobSignal.objects.filter(name="approval").count() == 1
    assert page.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_an_operator_moves_a_sleeps_wake_time_after_reading_what_it_does(
    new_page: Any, server: Server, scheme: str
) -> None:
    sleeping = parked_job(None, timedelta(days=7))
    page = new_page("operator", color_scheme=scheme)
    SHOTS.mkdir(parents=True, exist_ok=True)
    sooner = timezone.localtime() + timedelta(days=2, hours=1)

    page.goto(f"{server.url}/jobs/{sleeping.id}/")
    page.get_by_text("Change the wake time").click()
    page.fill("#wake-at", f"{sooner:%Y-%m-%dT%H:%M}")
    page.screenshot(path=str(SHOTS / f"wake-time-form-{scheme}.png"), full_page=True)
    page.get_by_role("button", name="Change wake time…").click()
    assert "Its durable sleep now ends at" in page.inner_text("#confirm-signal")
    page.screenshot(path=str(SHOTS / f"wake-time-confirm-{scheme}.png"), full_page=True)
    page.get_by_role("button", name="Change wake time", exact=True).click()

    assert "now wakes at" in page.inner_text("body")
    assert "until in 2 d" in page.inner_text("#job-parked")
    assert Job.objects.get(pk=sleeping.id).run_at == sooner.replace(second=0, microsecond=0)
    assert page.errors == []


def test_the_wake_time_form_keeps_what_is_typed_until_the_wait_itself_changes(
    new_page: Any, server: Server
) -> None:
    """The live header, drawn again, keeps the open form and what the operator typed in
    it while the wait is the same one (a signal lands in the mailbox); once another
    operator moves the wake time, the form shows the new time, not the one it had."""
    sleeping = parked_job(None, timedelta(days=7))
    page = new_page("operator")
    page.goto(f"{server.url}/jobs/{sleeping.id}/")
    page.wait_for_selector("[data-live].on")
    page.get_by_text("Change the wake time").click()
    typed = f"{timezone.localtime() + timedelta(days=3):%Y-%m-%dT%H:%M}"
    page.fill("#wake-at", typed)

    send_signal(sleeping.id, "nudge", {}, actor="another operator")
    page.wait_for_selector("#job-mailbox >> text=nudge")
    assert page.input_value("#wake-at") == typed
    assert page.is_visible("#wake-at")  # still open

    later = timezone.localtime() + timedelta(days=10, hours=1)
    assert reschedule_jobs([sleeping.id], later, actor="another operator") == 1
    page.wait_for_selector("#job-parked >> text=until in 10 d")
    assert page.input_value("#wake-at") == f"{later:%Y-%m-%dT%H:%M:%S}"
    assert page.errors == []
