"""A worker's weighted queues: `runworker --queues critical:6,default:3,low:1`."""

from __future__ import annotations

from collections import Counter

import pytest

from queue_engine.models import JobRecord
from queue_engine.worker.weights import QueueWeights, parse_queues
from tests.support import jobs
from tests.support.sampler import Sampler
from tests.support.workers import Workers, wait_for

QUEUES = ("w_critical", "w_default", "w_low")


@pytest.mark.slow
def test_weighted_queues_share_the_claims_by_weight_while_all_have_work(
    workers: Workers, executions: None
) -> None:
    for queue in QUEUES:
        jobs.capped.using(queue=queue).enqueue_many([{"pause": 0}] * 150)

    workers.start("--queues", "w_critical:6,w_default:3,w_low:1", "--concurrency", "1")
    wait_for(lambda: JobRecord.objects.filter(queue__in=QUEUES).count() >= 100, timeout=30)

    first = JobRecord.objects.filter(queue__in=QUEUES).order_by("started_at")[:100]
    taken = Counter(record.queue for record in first)
    assert 50 <= taken["w_critical"] <= 70, taken
    assert 20 <= taken["w_default"] <= 40, taken
    assert 5 <= taken["w_low"] <= 15, taken


@pytest.mark.slow
def test_a_weighted_queue_alone_with_work_gets_the_whole_worker(
    workers: Workers, executions: None, conninfo: str
) -> None:
    ids = jobs.capped.using(queue="w_low").enqueue_many([{"pause": 0.3}] * 40)
    query = "SELECT count(*) FROM queue_engine_job WHERE queue = 'w_low' AND state = 'running'"

    with Sampler(conninfo, query) as sampler:
        workers.start("--queues", "w_critical:6,w_low:1", "--concurrency", "4")
        wait_for(lambda: JobRecord.objects.filter(pk__in=ids).count() == 40, timeout=30)

    running = Counter(n for (n,) in sampler.samples)
    assert max(running) == 4, f"samples by jobs running: {dict(running)}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("queues", "said"),
    [
        ("a:0", "the weight of 'a' must be a whole number from 1"),
        ("a:x", "the weight of 'a' must be a whole number from 1"),
        ("a:2,b:1,a", "names 'a' twice"),
    ],
)
def test_bad_queue_weights_stop_the_worker_with_what_was_wrong(
    workers: Workers, queues: str, said: str
) -> None:
    done = workers.run_burst("--queues", queues, timeout=60)

    assert done.returncode != 0
    assert said in done.stderr


def test_plain_queue_names_have_no_weights() -> None:
    assert parse_queues("a, b") == (["a", "b"], None)
    assert parse_queues("a:2,b") == (["a", "b"], {"a": 2, "b": 1})


def test_a_queue_that_had_no_work_comes_back_no_more_than_one_turn_behind() -> None:
    weights = QueueWeights(["a", "b"], {"a": 1, "b": 1})
    for _ in range(50):
        weights.claimed(["a"])  # b had nothing to give

    weights.claimed(["a", "b"])

    assert abs(weights.lags["a"] - weights.lags["b"]) <= 1.0


@pytest.mark.slow
def test_queues_without_weights_are_claimed_by_priority_across_them_as_before(
    workers: Workers, executions: None
) -> None:
    low = jobs.capped.using(queue="w_low").enqueue_many([{"pause": 0}] * 5)
    high = jobs.capped.using(queue="w_critical", priority=10).enqueue_many([{"pause": 0}] * 5)

    workers.start("--queues", "w_low,w_critical", "--concurrency", "1")
    wait_for(lambda: JobRecord.objects.filter(queue__in=QUEUES).count() == 10, timeout=30)

    order = list(
        JobRecord.objects.filter(queue__in=QUEUES)
        .order_by("started_at")
        .values_list("id", flat=True)
    )
    assert order == [*high, *low]
    assert QueueWeights(["w_low", "w_critical"], None).statement(False).name == "qe_claim"
