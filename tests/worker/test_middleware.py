"""QUEUE_ENGINE['JOB_MIDDLEWARE'] around every attempt in a real worker, and
QUEUE_ENGINE['ENQUEUE_MIDDLEWARE'] adding to a job's meta at enqueue."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core import checks
from django.test import override_settings

from queue_engine import JobSpec, enqueue_many
from queue_engine.models import Job, JobRecord
from tests.support import obs_jobs
from tests.support.obs import burst, lines
from tests.support.workers import Workers

pytestmark = pytest.mark.slow

RECORDING = ["tests.support.obs_jobs.Recording", "tests.support.obs_jobs.Inner"]


def test_middleware_wraps_every_attempt_outermost_first_for_sync_and_async_handlers(
    workers: Workers, tmp_path: Path
) -> None:
    record = tmp_path / "record.jsonl"
    sync = obs_jobs.ok.enqueue(value=2)
    async_ = obs_jobs.async_ok.enqueue(value=2)
    flaky = obs_jobs.flaky.enqueue()

    burst(workers, {"JOB_MIDDLEWARE": RECORDING}, OBS_RECORD=str(record))

    seen = lines(record)
    assert sorted(s["built"] for s in seen if "built" in s) == ["inner", "outer"]  # once each
    for job, result in ((sync, 4), (async_, 6)):
        calls = [
            (s["mw"], s["when"], s["outcome"], s["result"]) for s in seen if s.get("job") == job.id
        ]
        assert calls == [
            ("outer", "before", None, None),
            ("inner", "before", None, None),
            ("inner", "after", "succeeded", result),
            ("outer", "after", "succeeded", result),
        ]
    attempts = [
        (s["attempt"], s["outcome"])
        for s in seen
        if s.get("job") == flaky.id and s["mw"] == "outer" and s["when"] == "after"
    ]
    assert attempts == [(1, "retry"), (2, "succeeded")]


def test_a_raising_middleware_is_logged_and_the_job_settles_as_its_handler_decided(
    workers: Workers, tmp_path: Path
) -> None:
    record = tmp_path / "record.jsonl"
    sync = obs_jobs.ok.enqueue(value=5)
    async_ = obs_jobs.async_ok.enqueue(value=5)
    dead = obs_jobs.dead.enqueue()
    chain = [
        "tests.support.obs_jobs.RaisesAfter",
        "tests.support.obs_jobs.Recording",
        "tests.support.obs_jobs.RaisesBefore",
        "tests.support.obs_jobs.SyncOnly",
    ]

    output = burst(workers, {"JOB_MIDDLEWARE": chain}, OBS_RECORD=str(record))

    records = {r.id: r for r in JobRecord.objects.all()}
    assert (records[sync.id].state, records[sync.id].result) == ("succeeded", 10)
    assert (records[async_.id].state, records[async_.id].result) == ("succeeded", 15)
    assert records[dead.id].state == "failed"
    assert [e["class"] for e in records[dead.id].errors] == ["builtins.ValueError"]
    assert not Job.objects.exists()  # nothing left behind, nothing lost
    assert "middleware broken before the handler" in output
    assert "middleware broken after the handler" in output
    assert "job middleware tests.support.obs_jobs.RaisesBefore raised" in output
    # The middleware outside the raising one still sees the handler's outcome.
    after = {s["job"]: s["outcome"] for s in lines(record) if s.get("when") == "after"}
    assert after == {sync.id: "succeeded", async_.id: "succeeded", dead.id: "failed"}
    # A sync-only middleware runs for async handlers too (its call_next is awaitable).
    assert {s["job"] for s in lines(record) if s.get("mw") == "sync_only"} == {
        sync.id,
        async_.id,
        dead.id,
    }


@override_settings(
    QUEUE_ENGINE={
        "ENQUEUE_MIDDLEWARE": [
            "tests.support.obs_jobs.broken_stamp",
            "tests.support.obs_jobs.stamp",
        ]
    }
)
@pytest.mark.django_db
def test_enqueue_hooks_add_to_meta_and_a_broken_one_loses_no_job() -> None:
    one = obs_jobs.ok.enqueue(value=1)
    many = enqueue_many([JobSpec("obs.ok", {"value": 2})])
    given = obs_jobs.ok.using(meta={"enqueued_by": "caller"}).enqueue(value=3)

    assert Job.objects.get(pk=one.id).meta == {"enqueued_by": "obs-test", "kind_seen": "obs.ok"}
    assert Job.objects.get(pk=many[0]).meta["enqueued_by"] == "obs-test"
    assert Job.objects.get(pk=given.id).meta["enqueued_by"] == "caller"  # the caller's key wins


@override_settings(
    QUEUE_ENGINE={
        "JOB_MIDDLEWARE": ["tests.support.obs_jobs.Missing"],
        "ENQUEUE_MIDDLEWARE": "tests.support.obs_jobs.stamp",
        "CONSOLE_URL": "ops.example.com",
    }
)
def test_middleware_that_does_not_import_and_a_bare_console_url_fail_the_system_check() -> None:
    errors = checks.run_checks()

    found = sorted(e.msg for e in errors if e.id in ("queue_engine.E028", "queue_engine.E029"))
    assert found[1].startswith("QUEUE_ENGINE['ENQUEUE_MIDDLEWARE'] must be a list of dotted paths")
    assert found[2].startswith(
        "QUEUE_ENGINE['JOB_MIDDLEWARE'] names 'tests.support.obs_jobs.Missing', which cannot"
    )
    assert found[0] == (
        "QUEUE_ENGINE['CONSOLE_URL'] must be None or the console's http(s) address, "
        "not 'ops.example.com'."
    )
