"""Awaited results: job_result / ajob_result and flow_result / aflow_result, in sync and
async views, against real runworker processes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.test import RequestFactory

from queue_engine import (
    FlowFailed,
    JobFailed,
    ResultTimeout,
    UnknownIdError,
    aflow_result,
    ajob_result,
    flow_result,
    job_result,
    ops,
    send_signal,
)
from queue_engine.flows import Flow
from queue_engine.models import Job
from tests.support import jobs, wait_jobs
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow


def sync_view(request: HttpRequest, job_id: int) -> JsonResponse:
    return JsonResponse({"result": job_result(job_id, timeout=20)})


async def async_view(request: HttpRequest, job_id: int) -> JsonResponse:
    return JsonResponse({"result": await ajob_result(job_id, timeout=20)})


def parked(job_id: int) -> None:
    wait_for(
        lambda: Job.objects.filter(pk=job_id, state="parked").exists(),
        timeout=20,
        message=f"job {job_id} to park",
    )


def result_waiters() -> int:
    """The calls of job_result/flow_result (and their async twins) waiting now: each
    LISTENs on a connection of its own before it first reads (queue_engine.results)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'queue_engine result' AND state = 'idle'"
            " AND query <> ''"  # its LISTEN done, not only connected
        )
        return int(cursor.fetchone()[0])


def test_views_get_a_job_result_when_it_ends_woken_by_listen_not_a_poll(
    transactional_db: None, workers: Workers
) -> None:
    sync_id = wait_jobs.two_signals.enqueue().pk
    async_id = wait_jobs.async_wait_signal.enqueue().pk
    workers.start("--queues", "waits")
    parked(sync_id)
    parked(async_id)
    answers: dict[str, Any] = {}
    request = RequestFactory().get("/result")

    def call_sync() -> None:
        started = time.monotonic()
        answers["sync"] = (sync_view(request, sync_id), time.monotonic() - started)

    def call_async() -> None:
        started = time.monotonic()
        answers["async"] = (asyncio.run(async_view(request, async_id)), time.monotonic() - started)

    threads = [threading.Thread(target=call_sync), threading.Thread(target=call_async)]
    for thread in threads:
        thread.start()
    wait_for(lambda: result_waiters() == 2, message="both calls to listen for the end")
    send_signal(sync_id, "go", "a")
    send_signal(sync_id, "go", "b")
    send_signal(async_id, "go", "c")
    for thread in threads:
        thread.join(30)

    response, took = answers["sync"]
    assert json.loads(response.content) == {"result": ["a", "b"]}
    assert took < 4  # a hint woke it: the fallback read comes only after 5 s
    response, took = answers["async"]
    assert json.loads(response.content) == {"result": {"got": "c"}}
    assert took < 4


def test_a_dead_or_cancelled_job_raises_with_its_failure(
    transactional_db: None, workers: Workers
) -> None:
    dead = jobs.always_fails.using(queue="waits").enqueue().pk
    waiting = wait_jobs.two_signals.enqueue().pk
    workers.start("--queues", "waits")

    with pytest.raises(JobFailed) as failed:
        job_result(dead, timeout=30)
    assert failed.value.state == "failed"
    assert failed.value.error is not None and failed.value.error["attempt"] == 3
    assert f"job {dead} died: " in str(failed.value)

    parked(waiting)
    with pytest.raises(ResultTimeout):
        job_result(waiting, timeout=0.3)
    ops.cancel_job(waiting, actor="ops@example.com")
    with pytest.raises(JobFailed, match=f"job {waiting} was cancelled"):
        asyncio.run(ajob_result(waiting, timeout=10))
    with pytest.raises(UnknownIdError, match="job 987654321 does not exist"):
        job_result(987654321)


def test_flow_result_returns_its_leaves_outputs_or_raises_with_its_dead_nodes(
    transactional_db: None, workers: Workers
) -> None:
    good = Flow("fan")
    good.add("root", jobs.number, value=1)
    good.add("left", jobs.number, value=2, depends_on=["root"])
    good.add("right", jobs.number, value=3, depends_on=["root"])
    good_id = good.submit()
    bad = Flow("doomed")
    bad.add("root", jobs.number, value=1)
    bad.add("broken", jobs.always_fails.using(queue="flows"), depends_on=["root"])
    bad_id = bad.submit()
    workers.start("--queues", "flows")

    assert flow_result(good_id, timeout=30) == {"left": 2, "right": 3}
    assert asyncio.run(aflow_result(good_id)) == {"left": 2, "right": 3}
    with pytest.raises(FlowFailed) as failed:
        asyncio.run(aflow_result(bad_id, timeout=30))
    assert failed.value.state == "failed"
    assert [f["node"] for f in failed.value.failures] == ["broken"]
    assert "node broken failed" in str(failed.value)


def test_a_flow_waits_while_a_node_is_parked_and_its_result_follows_the_signal(
    transactional_db: None, workers: Workers
) -> None:
    flow = Flow("approval")
    flow.add("draft", jobs.number, value=1)
    flow.add("review", wait_jobs.async_wait_signal, depends_on=["draft"])
    flow_id = flow.submit()
    workers.start("--queues", "flows,waits")
    review = wait_for(
        lambda: Job.objects.filter(flow_id=flow_id, node_key="review", state="parked").first(),
        timeout=20,
        message="the review node to park",
    )
    with pytest.raises(ResultTimeout):
        flow_result(flow_id, timeout=0.5)

    send_signal(review.pk, "go", "approved")

    assert flow_result(flow_id, timeout=20) == {"review": {"got": "approved"}}
