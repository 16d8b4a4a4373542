from __future__ import annotations

import datetime as dt

import pytest
from django.tasks import task, task_backends
from django.tasks.base import TaskResultStatus
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.utils import timezone

from queue_engine.definitions import Backoff
from queue_engine.models import Job, JobRecord
from queue_engine.registry import registry
from queue_engine.tasks_backend import definition_for_task

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
