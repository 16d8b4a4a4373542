"""queue_engine.contrib.sentry in a real worker, with a Sentry transport that writes the
events it is given to a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from queue_engine.models import JobRecord
from tests.support import obs_jobs
from tests.support.obs import burst, lines
from tests.support.workers import Workers

pytestmark = pytest.mark.slow

SENTRY = {
    "JOB_MIDDLEWARE": ["queue_engine.contrib.sentry.SentryMiddleware"],
    "CONSOLE_URL": "https://ops.example.com",
}


def test_one_event_for_a_dead_job_with_its_tags_and_none_for_a_snooze(
    workers: Workers, tmp_path: Path
) -> None:
    events_file = tmp_path / "events.jsonl"
    dead = obs_jobs.dead.enqueue()
    snoozed = obs_jobs.snooze.enqueue()
    flaky = obs_jobs.flaky.enqueue()

    burst(workers, SENTRY, OBS_SENTRY=str(events_file))

    events = lines(events_file)
    by_job = {event["contexts"]["job"]["id"]: event for event in events}
    assert JobRecord.objects.get(pk=snoozed.id).result == "woke"
    assert snoozed.id not in by_job
    assert len([e for e in events if e["contexts"]["job"]["id"] == dead.id]) == 1
    event = by_job[dead.id]
    assert event["level"] == "error"
    assert event["tags"]["job.kind"] == "obs.dead"
    assert event["tags"]["job.queue"] == "default"
    assert event["tags"]["job.outcome"] == "dead"
    [exception] = event["exception"]["values"]
    assert (exception["type"], exception["value"]) == ("ValueError", "this job always fails")
    assert exception["mechanism"] == {"type": "queue_engine", "handled": False}
    assert event["contexts"]["job"]["url"] == f"https://ops.example.com/jobs/{dead.id}/"
    assert event["contexts"]["job"]["attempt"] == 1
    # A retry that succeeds later: its failed attempt is a handled warning, not a crash.
    retried = by_job[flaky.id]
    assert (retried["level"], retried["tags"]["job.outcome"]) == ("warning", "retry")
    assert retried["exception"]["values"][0]["mechanism"]["handled"] is True
