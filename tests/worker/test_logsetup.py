"""What a real `runworker` writes to its terminal: a line per finished job at -v 2, and
JSON lines with --log-format json or QUEUE_ENGINE['LOG_FORMAT']."""

from __future__ import annotations

import json

import pytest
from django.core import checks
from django.test import override_settings

from queue_engine.models import JobLog
from tests.support import jobs
from tests.support.workers import Workers

pytestmark = pytest.mark.slow


def run_burst(workers: Workers, *args: str, **env: str) -> str:
    done = workers.run_burst(*args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_verbosity_2_logs_kind_id_outcome_and_times_of_each_finished_job(
    workers: Workers,
) -> None:
    added = jobs.add.enqueue(a=1, b=2)
    fatal = jobs.fatal.enqueue()
    talker = jobs.talker.enqueue()

    output = run_burst(workers, "-v", "2")

    lines = {
        job_id: next((line for line in output.splitlines() if f"job {job_id} " in line), "")
        for job_id in (added.id, fatal.id, talker.id)
    }
    assert f"job {added.id} tests.add succeeded: ran " in lines[added.id]
    assert f"job {fatal.id} tests.fatal failed: ran " in lines[fatal.id]
    assert f"job {talker.id} tests.talker succeeded: ran " in lines[talker.id]
    assert all(" s, waited " in line and "attempt 1" in line for line in lines.values())
    # What the job prints goes to its own log, not to the worker's terminal.
    assert "line one from print" not in output
    assert JobLog.objects.filter(job_id=talker.id, text="line one from print").exists()


def test_default_verbosity_has_no_line_per_job(workers: Workers) -> None:
    added = jobs.add.enqueue(a=1, b=2)

    output = run_burst(workers)

    assert f"job {added.id} " not in output


def parsed(output: str) -> list[dict[str, object]]:
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines, "the worker wrote nothing"
    return [json.loads(line) for line in lines]  # each line is one JSON object


@pytest.mark.parametrize("how", ["flag", "setting"])
def test_json_format_writes_one_json_object_a_line(workers: Workers, how: str) -> None:
    added = jobs.add.enqueue(a=1, b=2)
    retried = jobs.always_fails.enqueue()

    if how == "flag":
        output = run_burst(workers, "-v", "2", "--log-format", "json")
    else:
        output = run_burst(workers, "-v", "2", JOBSITE_LOG_FORMAT="json")

    records = parsed(output)
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    finished = {r["job_id"]: r for r in records if r["logger"] == "queue_engine.worker.jobs"}
    done = finished[added.id]
    assert done["kind"] == "tests.add"
    assert done["queue"] == "math"
    assert done["attempt"] == 1
    assert done["outcome"] == "succeeded"
    assert done["level"] == "INFO"
    assert isinstance(done["run_time"], float) and isinstance(done["wait_time"], float)
    assert str(done["worker"])
    assert finished[retried.id]["outcome"] in ("retry", "failed")
    # Lines that are not about one job carry no job fields.
    assert any("job_id" not in r for r in records)


@override_settings(QUEUE_ENGINE={"LOG_FORMAT": "yaml"})
def test_an_unknown_log_format_fails_the_system_check() -> None:
    errors = checks.run_checks()

    assert [e.msg for e in errors if e.id == "queue_engine.E027"] == [
        "QUEUE_ENGINE['LOG_FORMAT'] must be 'text' or 'json', not 'yaml'."
    ]
