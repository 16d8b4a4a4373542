"""Signals from the console: a parked job's Approve, signal form, Wake now and
wake time, its mailbox, and a flow's Open gate; operator only, confirmed first, audited."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from queue_engine import send_signal
from queue_engine.flows import Flow
from queue_engine.models import AuditEvent, Job, JobSignal
from tests.support import jobs, wait_jobs
from tests.support.parked import parked_job

pytestmark = pytest.mark.django_db(transaction=True)


def signal_url(job: Job) -> str:
    return reverse("queue_engine:job_signal", args=[job.pk])


def test_approve_asks_first_then_sends_the_awaited_signal_and_audits_it(operator: Any) -> None:
    job = parked_job("review", None)
    page = operator.get(reverse("queue_engine:job", args=[job.pk])).content.decode()
    assert "Approve…" in page and "Wake now…" in page

    asked = operator.post(signal_url(job), {"name": "review", "payload": "{}"})

    assert "The job waits for this signal: it resumes at once" in asked.content.decode()
    assert not JobSignal.objects.exists() and not AuditEvent.objects.exists()
    operator.post(signal_url(job), {"name": "review", "payload": "{}", "confirm": "yes"})
    assert Job.objects.get(pk=job.pk).state == "available"
    assert JobSignal.objects.get(job_id=job.pk).payload == {}
    event = AuditEvent.objects.get(action="signal")
    assert (event.target, event.details["signal"]) == (str(job.pk), "review")


def test_a_signal_payload_is_masked_in_the_audit(operator: Any) -> None:
    job = parked_job("review", None)
    payload = '{"approved": true, "api_key": "s3cret"}'

    operator.post(signal_url(job), {"name": "review", "payload": payload, "confirm": "yes"})

    assert JobSignal.objects.get(job_id=job.pk).payload == {"approved": True, "api_key": "s3cret"}
    details = AuditEvent.objects.get(action="signal").details
    assert details["payload"] == {"approved": True, "api_key": "********"}
    assert "s3cret" not in operator.get(reverse("queue_engine:audit")).content.decode()


def test_bad_json_is_refused_with_a_clear_error_and_writes_nothing(operator: Any) -> None:
    job = parked_job("review", None)

    refused = operator.post(
        signal_url(job), {"name": "review", "payload": "{approved: yes}", "confirm": "yes"}
    )

    assert refused.status_code == 400
    assert "The payload is not valid JSON" in refused.content.decode()
    assert Job.objects.get(pk=job.pk).state == "parked"
    assert not JobSignal.objects.exists() and not AuditEvent.objects.exists()


def test_a_viewer_cannot_send_a_signal_nor_see_the_buttons(viewer: Any) -> None:
    job = parked_job("review", None)
    assert "Approve…" not in viewer.get(reverse("queue_engine:job", args=[job.pk])).content.decode()

    refused = viewer.post(signal_url(job), {"name": "review", "payload": "{}", "confirm": "yes"})

    assert refused.status_code == 403
    assert not JobSignal.objects.exists()


def test_wake_now_asks_first_then_wakes_the_sleeping_job(operator: Any) -> None:
    job = parked_job(None, timedelta(days=7))
    url = reverse("queue_engine:job_wake", args=[job.pk])

    asked = operator.post(url)

    assert "Its durable sleep ends now" in asked.content.decode()
    assert Job.objects.get(pk=job.pk).state == "parked"
    operator.post(url, {"confirm": "yes"})
    assert Job.objects.get(pk=job.pk).state == "available"
    assert AuditEvent.objects.get(action="wake").target == str(job.pk)


def test_change_wake_time_shows_the_deadline_asks_first_and_moves_it(operator: Any) -> None:
    job = parked_job(None, timedelta(days=7))
    until = datetime.fromisoformat(Job.objects.get(pk=job.pk).meta["parked"]["until"])
    page = operator.get(reverse("queue_engine:job", args=[job.pk])).content.decode()
    assert f'value="{timezone.localtime(until):%Y-%m-%dT%H:%M:%S}"' in page
    url = reverse("queue_engine:job_reschedule", args=[job.pk])
    sooner = timezone.localtime() + timedelta(days=1)
    typed = f"{sooner:%Y-%m-%dT%H:%M}"

    asked = operator.post(url, {"when": typed}).content.decode()

    assert "Its durable sleep now ends at" in asked and "Change wake time</button>" in asked
    assert Job.objects.get(pk=job.pk).run_at == until  # nothing changed yet
    operator.post(url, {"when": typed, "confirm": "yes"})
    moved = Job.objects.get(pk=job.pk)
    assert moved.state == "parked"
    assert moved.run_at == sooner.replace(second=0, microsecond=0)
    assert AuditEvent.objects.get(action="reschedule").target == str(job.pk)


def test_a_wake_time_already_past_ends_the_wait_and_a_bad_one_changes_nothing(
    operator: Any,
) -> None:
    job = parked_job("review", timedelta(days=7))
    url = reverse("queue_engine:job_reschedule", args=[job.pk])

    refused = operator.post(url, {"when": "next tuesday"}, follow=True).content.decode()
    assert "is not a date and time" in refused and "Nothing was changed." in refused
    past = f"{timezone.localtime() - timedelta(minutes=1):%Y-%m-%dT%H:%M:%S}"
    asked = operator.post(url, {"when": past}).content.decode()
    assert "ends now with no signal" in asked and "End the wait now</button>" in asked
    assert not AuditEvent.objects.exists()

    operator.post(url, {"when": past, "confirm": "yes"})
    job = Job.objects.get(pk=job.pk)
    assert job.state == "available" and job.meta["parked"]["due"] is True


def test_the_job_page_lists_the_signals_in_its_mailbox(viewer: Any) -> None:
    job = wait_jobs.wait_signal.enqueue().pk
    send_signal(job, "go", {"n": 1, "password": "hunter2"})

    page = viewer.get(reverse("queue_engine:job", args=[job])).content.decode()

    assert 'id="job-mailbox"' in page and "go" in page
    assert "hunter2" not in page


def test_open_gate_sends_the_flow_signal_to_its_gates_and_audits_it(operator: Any) -> None:
    flow = Flow("publish")
    flow.add("draft", jobs.number, value=1)
    flow.add_gate("approved", signal="approval", depends_on=["draft"])
    flow_id = flow.submit()
    gate = Job.objects.get(flow_id=flow_id, node_key="approved")
    page = operator.get(reverse("queue_engine:flow", args=[flow_id])).content.decode()
    assert "Open gate…" in page
    url = reverse("queue_engine:flow_gate", args=[flow_id])

    asked = operator.post(url, {"name": "approval"})

    assert "sent with an empty payload" in asked.content.decode()
    assert not JobSignal.objects.exists()
    operator.post(url, {"name": "approval", "confirm": "yes"})
    assert JobSignal.objects.get(job_id=gate.pk).name == "approval"
    event = AuditEvent.objects.get(action="open_gate")
    assert (event.target, event.details["gates"]) == (str(flow_id), [gate.pk])
