"""Runs numbered across redrives, "Run again" for a succeeded job, the console's state words,
and state tabs that keep their counts under filters an index can count."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from queue_engine import ops, reads
from queue_engine.models import Job
from queue_engine.reads.jobs import JobFilter
from tests.support import console_data, jobs
from tests.support.console_data import ConsoleData
from tests.support.workers import Workers


@pytest.fixture
def data(db: None) -> ConsoleData:
    return console_data.seed()


def buttons(page: str) -> list[str]:
    state = page.split('id="job-state"')[1].split("</section>")[0]
    return re.findall(r'<button[^>]*name="action"[^>]*>([^<]+)</button>', state)


def tab_counts(page: str) -> dict[str, str]:
    tabs = page.split('id="job-tabs"')[1].split("</nav>")[0]
    found = re.findall(
        r'class="tab s-(\w+)".*?>\s*(\w+)\s*(?:<span class="tab-count">(.*?)</span>)?', tabs, re.S
    )
    return {state: re.sub(r"<[^>]+>", "", count) for state, _label, count in found}


def test_two_failures_across_a_redrive_carry_different_labels(
    workers: Workers, viewer: Client
) -> None:
    job_id = jobs.fatal.enqueue().id
    workers.run_burst()
    ops.redrive_job(job_id, actor="ops")
    workers.run_burst()

    page = viewer.get(f"/jobs/{job_id}/").content.decode()

    labels = [
        re.sub(r"<[^>]+>", "", label).strip()
        for label in re.findall(r'<div class="attempt-head">\s*<b>(.*?)</b>', page, re.S)
    ]
    assert labels == ["Run 2, attempt 1 after a redrive", "Run 1, attempt 1"]
    assert re.search(r"run <b>2</b> · attempt <b>1</b> of 10", page)


def test_a_job_never_redriven_says_attempt_only(data: ConsoleData, viewer: Client) -> None:
    page = viewer.get(f"/jobs/{data.dead[3].id}/").content.decode()

    assert "<b>Attempt 3</b>" in page and "Run 1" not in page


def test_a_succeeded_job_offers_run_again_not_retry(data: ConsoleData, operator: Client) -> None:
    page = operator.get(f"/jobs/{data.succeeded[0].id}/").content.decode()

    assert buttons(page) == ["Run again", "Remove"]


def test_a_succeeded_flow_node_offers_no_run_again(operator: Client) -> None:
    node = console_data.record("succeeded", flow_id=42, node_key="publish")

    page = operator.get(f"/jobs/{node.id}/").content.decode()

    assert buttons(page) == ["Remove"]


def test_running_a_succeeded_job_again_is_confirmed_in_those_words(
    data: ConsoleData, operator: Client
) -> None:
    page = operator.post(
        "/jobs/bulk/", {"action": "retry", "ids": [data.succeeded[0].id]}
    ).content.decode()

    assert "Run again 1 job?" in page


def test_the_tabs_keep_their_counts_under_a_kind_filter(data: ConsoleData, viewer: Client) -> None:
    page = viewer.get("/jobs/?kind=demo.charge_card").content.decode()

    counts = tab_counts(page)
    assert counts["failed"] == "4" and counts["succeeded"] == "0"
    assert counts["available"] == "0" and counts["all"] == "4"
    assert "No count for" not in page


def test_a_dead_group_keeps_its_dead_count_and_says_why_others_have_none(
    data: ConsoleData, viewer: Client
) -> None:
    page = viewer.get(
        "/jobs/?queue=billing&kind=demo.charge_card&state=failed&error_class=demo.CardDeclined"
    ).content.decode()

    counts = tab_counts(page)
    assert counts["failed"] == "3" and counts["available"] == "0"
    assert counts["succeeded"] == "" and counts["all"] == ""
    assert (
        "No count for succeeded and cancelled: no index counts ended jobs by error class."
    ) in page


def test_a_search_leaves_out_ended_counts_and_says_so(data: ConsoleData, viewer: Client) -> None:
    page = viewer.get("/jobs/?message=declined").content.decode()

    assert (
        "No count for succeeded, dead and cancelled: no index counts ended jobs by error message."
    ) in page
    assert tab_counts(page)["running"] == "0"


def test_live_counts_are_left_out_past_the_scan(data: ConsoleData) -> None:
    live = Job.objects.count()

    assert reads.filtered_live_counts(JobFilter(kind="demo.send_email"), scan=live) is not None
    assert reads.filtered_live_counts(JobFilter(kind="demo.send_email"), scan=live - 1) is None


def test_a_queue_lists_its_live_jobs_by_state_without_a_live_total(
    data: ConsoleData, viewer: Client
) -> None:
    page = viewer.get("/queues/").content.decode()

    lines = re.findall(r'<span class="sub queue-breakdown">([^<]*)</span>', page)
    assert "6 available · 1 scheduled" in lines
    assert "1 running · 1 blocked" in lines
    assert not any("live" in line for line in lines)
