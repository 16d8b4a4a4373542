"""Durable steps in the console: the job page lists them, and a redrive asks whether to
keep them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queue_engine.models import AuditEvent, Job, JobRecord, JobStep

pytestmark = pytest.mark.django_db


def dead_job_with_steps() -> JobRecord:
    record = JobRecord.objects.create(
        id=9001, kind="tests.three_steps", queue="steps", state="failed", attempt=3
    )
    now = timezone.now()
    JobStep.objects.create(
        job_id=record.id,
        name="fetch <rows>",
        attempt=1,
        result={"rows": 120, "api_token": "s3cr3t-value"},
        started_at=now - timedelta(seconds=3),
        finished_at=now - timedelta(seconds=1, milliseconds=500),
    )
    JobStep.objects.create(
        job_id=record.id, name="transform", attempt=2, result=[1, 2, 3], started_at=now
    )
    return record


def test_the_job_page_lists_the_steps_masked_and_escaped(viewer: Client) -> None:
    record = dead_job_with_steps()

    page = viewer.get(f"/jobs/{record.id}/").content.decode()

    assert '<section class="panel" id="job-steps">' in page  # shown: the job has steps
    assert '<h2>Steps <span class="muted">2</span></h2>' in page
    assert "fetch &lt;rows&gt;" in page and "fetch <rows>" not in page
    assert "s3cr3t-value" not in page  # the token is masked, as in payloads
    assert "&quot;rows&quot;: 120" in page
    assert "1.5 s" in page  # how long it took
    assert page.index("fetch &lt;rows&gt;") < page.index("transform")


def test_a_job_without_steps_shows_no_steps_panel(viewer: Client) -> None:
    record = JobRecord.objects.create(id=9002, kind="tests.noop", state="succeeded")
    page = viewer.get(f"/jobs/{record.id}/").content.decode()
    assert 'id="job-steps" hidden' in page


def test_redrive_asks_whether_to_keep_the_steps_and_clears_them_when_told(
    operator: Client,
) -> None:
    record = dead_job_with_steps()

    confirm = operator.post("/jobs/bulk/", {"action": "redrive", "ids": [record.id]})
    page = confirm.content.decode()
    assert "This job recorded durable steps" in page
    assert 'name="clear_steps" value="no" checked' in page  # keeping them is the default

    operator.post(
        "/jobs/bulk/",
        {"action": "redrive", "ids": [record.id], "confirm": "yes", "clear_steps": "yes"},
    )

    assert Job.objects.get(pk=record.id).state == "available"
    assert not JobStep.objects.filter(job_id=record.id).exists()
    event = AuditEvent.objects.get(action="redrive")
    assert event.details == {"clear_steps": True}


def test_a_redrive_keeps_the_steps_by_default(operator: Client) -> None:
    record = dead_job_with_steps()
    operator.post(
        "/jobs/bulk/",
        {"action": "redrive", "ids": [record.id], "confirm": "yes", "clear_steps": "no"},
    )
    assert Job.objects.get(pk=record.id).state == "available"
    assert JobStep.objects.filter(job_id=record.id).count() == 2
