from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.tasks import task, task_backends
from django.tasks.base import TaskResult, TaskResultStatus
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.utils import timezone

from queue_engine import ops
from queue_engine.definition.job import Backoff
from queue_engine.definition.registry import registry
from queue_engine.definition.tasks import definition_for_task
from queue_engine.models import Job, JobRecord
from tests.support import jobs
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


# Django 6.1's task() passes extra options on to the backend's task_class; django-stubs'
# task() does not take them yet.
@task(priority=10, queue_name="reports", max_attempts=4, backoff=Backoff.fixed(3))  # type: ignore[call-overload, untyped-decorator]
def build_report(account_id: int, fmt: str = "pdf") -> str:
    return f"report-{account_id}.{fmt}"


@task(takes_context=True)
def with_context(context, value: int) -> int:  # type: ignore[no-untyped-def]
    return value


@task()
async def async_task(value: int) -> int:
    return value


def test_task_enqueues_a_job_that_reports_ready() -> None:
    result = build_report.enqueue(7, fmt="csv")

    job = Job.objects.get(pk=int(result.id))
    assert (job.kind, job.queue, job.priority) == (build_report.module_path, "reports", 10)
    assert (job.max_attempts, job.backoff) == (4, None)
    assert job.payload == {"args": [7], "kwargs": {"fmt": "csv"}}
    assert result.status == TaskResultStatus.READY
    assert build_report.get_result(result.id).args == [7]


def test_a_parked_task_reports_running() -> None:
    result = build_report.enqueue(8)
    Job.objects.filter(pk=int(result.id)).update(state="parked")

    assert build_report.get_result(result.id).status == TaskResultStatus.RUNNING


def test_run_after_schedules_the_job() -> None:
    later = timezone.now() + dt.timedelta(minutes=10)

    result = build_report.using(run_after=later).enqueue(1)

    job = Job.objects.get(pk=int(result.id))
    assert (job.state, job.run_at) == ("scheduled", later)


def test_async_and_context_tasks_are_accepted() -> None:
    with_context.enqueue(3)
    async_task.enqueue(4)

    context_definition = registry.get(with_context.module_path)
    async_definition = registry.get(async_task.module_path)
    assert context_definition is not None and context_definition.takes_context
    assert async_definition is not None and async_definition.is_async


def test_finished_job_reports_result_and_errors() -> None:
    result = build_report.enqueue(9)
    job = Job.objects.get(pk=int(result.id))
    JobRecord.objects.create(
        id=job.id,
        queue=job.queue,
        kind=job.kind,
        state="succeeded",
        payload=job.payload,
        attempt=2,
        result="report-9.pdf",
        worker="w2",
        started_at=timezone.now(),
        errors=[{"class": "builtins.TimeoutError", "traceback": "Traceback...", "worker": "w1"}],
    )
    job.delete()

    fresh = build_report.get_result(result.id)

    assert fresh.status == TaskResultStatus.SUCCESSFUL
    assert fresh.return_value == "report-9.pdf"
    assert [e.exception_class for e in fresh.errors] == [TimeoutError]
    assert fresh.worker_ids == ["w1", "w2"]


def test_unknown_result_id_raises() -> None:
    backend = task_backends["default"]

    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result("999999")
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result("not-a-number")


def test_bad_arguments_are_refused_as_invalid_task() -> None:
    with pytest.raises(InvalidTask, match="datetime"):
        build_report.enqueue(dt.datetime(2026, 1, 1))

    assert not Job.objects.exists()


def test_priority_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidTask, match="priority"):
        build_report.using(priority=1000)


def test_max_attempts_below_one_is_refused_as_invalid_task() -> None:
    with pytest.raises(InvalidTask, match="max_attempts must be a whole number of at least 1"):
        build_report.using(max_attempts=0)


def undecorated() -> None:
    """Declared as a task by the tests below, each with its own options."""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"backoff": 30}, r"backoff must be a Backoff, such as Backoff\.fixed\(30\), not 30"),
        ({"idle_timeout": "soon"}, r"idle_timeout must be"),
        ({"idle_timeout": 0}, r"idle_timeout must be more than 0 seconds"),
    ],
)
def test_bad_engine_options_are_refused_when_the_task_is_declared(
    options: dict[str, object], message: str
) -> None:
    # The worker would otherwise fail on them when the task runs, or when it retries.
    with pytest.raises(InvalidTask, match=message):
        task(**options)(undecorated)  # type: ignore[call-overload]


def test_an_idle_timeout_as_a_timedelta_is_seconds() -> None:
    declared = task(idle_timeout=dt.timedelta(minutes=2))(undecorated)  # type: ignore[call-overload]

    definition = definition_for_task(declared)
    assert definition is not None and definition.idle_timeout == 120.0


def test_max_attempts_of_one_means_one_attempt() -> None:
    result = build_report.using(max_attempts=1).enqueue(42)

    assert Job.objects.get(pk=int(result.id)).max_attempts == 1


# --- run by a real worker -------------------------------------------------------------


def finished(result: TaskResult[..., Any]) -> TaskResult[..., Any]:
    return wait_for(
        lambda: (fresh := result.task.get_result(result.id)).is_finished and fresh,
        timeout=30,
        message=f"task {result.id} to finish",
    )


def test_a_worker_runs_an_enqueued_task_and_its_result_holds_the_return_value(
    workers: Workers,
) -> None:
    result = jobs.task_total.enqueue([1, 2, 3], label="sum")
    workers.start()

    done = finished(result)

    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == {"label": "sum", "total": 6}
    assert (done.args, done.kwargs, done.errors) == ([[1, 2, 3]], {"label": "sum"}, [])
    assert done.enqueued_at is not None and done.started_at is not None
    assert done.finished_at is not None and done.started_at <= done.finished_at
    assert len(done.worker_ids) == 1 and done.worker_ids[0]
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == done.return_value


def test_a_failed_task_reports_its_error(workers: Workers) -> None:
    result = jobs.task_refuses.enqueue("no such account")
    workers.start()

    done = finished(result)

    assert done.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in done.errors] == [LookupError]
    assert "no such account" in done.errors[0].traceback
    assert "task_refuses" in done.errors[0].traceback
    with pytest.raises(ValueError, match="Task failed"):
        done.return_value  # noqa: B018


def test_a_task_that_succeeds_on_its_second_attempt_keeps_the_first_error(
    workers: Workers,
) -> None:
    result = jobs.task_second_try.enqueue(21)
    workers.start()

    done = finished(result)

    assert (done.status, done.return_value, done.attempts) == (TaskResultStatus.SUCCESSFUL, 42, 2)
    assert [e.exception_class for e in done.errors] == [ConnectionError]
    assert "attempt 1 lost its connection" in done.errors[0].traceback


def test_a_running_task_reports_running_then_successful(workers: Workers) -> None:
    result = jobs.task_async_rest.enqueue(2.0)
    workers.start()

    running = wait_for(
        lambda: (
            (fresh := jobs.task_async_rest.get_result(result.id)).status == TaskResultStatus.RUNNING
            and fresh
        ),
        timeout=20,
        message="the task to start",
    )

    assert running.started_at is not None and running.finished_at is None
    assert len(running.worker_ids) == 1 and running.worker_ids[0]
    assert not running.is_finished
    with pytest.raises(ValueError, match="not finished"):
        running.return_value  # noqa: B018
    assert finished(result).return_value == "rested 2.0s"


def test_a_task_cancelled_while_it_runs_reports_the_cancel_as_its_error(workers: Workers) -> None:
    result = jobs.task_async_rest.enqueue(60.0)
    workers.start()
    wait_for(
        lambda: jobs.task_async_rest.get_result(result.id).status == TaskResultStatus.RUNNING,
        timeout=20,
        message="the task to start",
    )

    ops.cancel_job(int(result.id), actor="alice")

    done = finished(result)
    assert done.status == TaskResultStatus.FAILED
    [error] = done.errors
    assert error.exception_class_path == "queue_engine.Cancelled"
    assert issubclass(error.exception_class, Exception)  # importable, as Django resolves it


@pytest.fixture
async def thread_connection_closed() -> AsyncIterator[None]:
    """Close the connection aenqueue and aget_result open in asgiref's thread, which
    would otherwise keep the test database from being dropped."""
    yield
    await sync_to_async(connections.close_all)()


async def test_aenqueue_and_aget_result_run_through_a_worker(
    workers: Workers, thread_connection_closed: None
) -> None:
    result = await jobs.task_total.aenqueue([4, 5])
    workers.start()

    deadline = time.monotonic() + 30
    while not (fresh := await jobs.task_total.aget_result(result.id)).is_finished:
        assert time.monotonic() < deadline, f"task {result.id} did not finish in 30s"
        await asyncio.sleep(0.05)

    assert fresh.status == TaskResultStatus.SUCCESSFUL
    assert fresh.return_value == {"label": "", "total": 9}
    await result.arefresh()
    assert result.return_value == {"label": "", "total": 9}
