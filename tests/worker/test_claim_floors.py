"""Claims start at their queue's floor (worker/floors.py) and never leave a job behind.

The worker here polls every 30 s, so a job left behind a floor would wait that long:
each test gives it a few seconds.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from queue_engine.models import Job, JobRecord, WorkerProcess
from queue_engine.worker.floors import (
    EPOCH,
    FLOORLESS_EVERY,
    LOOK_BEHIND_SPACING,
    MAX_ID,
    Floors,
)
from tests.support import jobs
from tests.support.workers import Workers, ended, wait_for

QUEUE = "floors"


@pytest.fixture
def worker(workers: Workers) -> Workers:
    workers.start("--queues", QUEUE, "--poll-interval", "30", "--concurrency", "1")
    wait_for(lambda: WorkerProcess.objects.exists(), timeout=40, message="the worker")
    return workers


def ended_soon(job_id: int, timeout: float = 4) -> JobRecord:
    """Ended within a few seconds: a job left behind the claim floor waits much longer."""
    return ended(job_id, timeout, why=" (left behind the floor?)")


def test_a_job_committed_after_later_ones_were_claimed_still_runs(
    worker: Workers, conninfo: str
) -> None:
    ended_soon(jobs.noop.using(queue=QUEUE).enqueue().id)  # the queue exists, and is known
    with psycopg.connect(conninfo) as late:
        # Its run time is its INSERT's; the jobs after it run first, which moves the
        # worker's floor past that time.
        held = late.execute(
            "INSERT INTO queue_engine_job (kind, queue, payload) "
            "VALUES ('tests.noop', %s, '{}') RETURNING id",
            [QUEUE],
        ).fetchone()[0]  # type: ignore[index]
        after = [jobs.noop.using(queue=QUEUE).enqueue().id for _ in range(3)]
        for job_id in after:
            ended_soon(job_id)
        late.commit()

    assert ended_soon(held).state == "succeeded", worker.output()


def test_a_higher_priority_job_goes_before_the_rest_of_the_queue(worker: Workers) -> None:
    first = jobs.cooperative.using(queue=QUEUE).enqueue(seconds=1.5)
    rest = [jobs.noop.using(queue=QUEUE).enqueue().id for _ in range(3)]
    wait_for(
        lambda: Job.objects.filter(pk=first.id, state="running").exists(),
        timeout=5,
        message="the first job to start",
    )
    urgent = jobs.noop.using(queue=QUEUE, priority=10).enqueue()

    order = [ended_soon(job_id, timeout=8) for job_id in [first.id, urgent.id, *rest]]
    started = sorted(order, key=lambda r: r.started_at or r.finished_at)
    assert [r.id for r in started] == [first.id, urgent.id, *rest], worker.output()


def key(priority: int, at: datetime, job_id: int) -> tuple[int, datetime, int]:
    return (priority, at, job_id)


def micros(at: datetime) -> int:
    return (at - EPOCH) // timedelta(microseconds=1)


T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def row(job_id: int, queue: str, priority: int, at: datetime) -> tuple[object, ...]:
    """A claim's row as Floors reads it: id, kind, queue, ..., priority, run_at."""
    return (job_id, "kind", queue, priority, at)


def test_a_claim_moves_the_floor_and_a_wake_up_behind_it_lowers_it() -> None:
    floors = Floors()
    params, claim = floors.for_claim(alone=False)
    assert params["floor_queues"] == []  # no floor yet
    floors.claimed(claim, [row(1, "q", 0, T0), row(2, "q", 0, T0 + timedelta(seconds=1))])
    assert floors.keys == {"q": key(0, T0 + timedelta(seconds=1), 2)}

    later = T0 + timedelta(seconds=5)
    floors.lower("q", (0, micros(later)))  # ahead of the floor: nothing to do
    assert floors.keys["q"] == key(0, T0 + timedelta(seconds=1), 2)
    floors.lower("q", (0, micros(T0)))  # behind it: the floor goes back before it
    assert floors.keys["q"] == key(0, T0 - timedelta(microseconds=1), MAX_ID)
    floors.lower("q", (5, micros(later)))  # a higher priority comes first
    assert floors.keys["q"] == key(5, later - timedelta(microseconds=1), MAX_ID)
    floors.lower("q", None)  # a wake-up that does not say where: no floor
    assert floors.keys == {}


def test_a_claim_moves_the_floor_no_further_than_a_job_woken_meanwhile() -> None:
    floors = Floors()
    floors.keys["q"] = key(0, T0, 1)
    params, claim = floors.for_claim(alone=False)
    assert params["floor_queues"] == ["q"]
    # While the claim is on its way, a job is woken that its snapshot may not see.
    floors.lower("q", (0, micros(T0 + timedelta(seconds=1))))
    floors.claimed(claim, [row(9, "q", 0, T0 + timedelta(seconds=2))])
    assert floors.keys["q"] == key(0, T0 + timedelta(seconds=1, microseconds=-1), MAX_ID)

    _, claim = floors.for_claim(alone=False)
    floors.forget()  # the listener reconnected: wake-ups may be lost
    floors.claimed(claim, [row(10, "q", 0, T0 + timedelta(seconds=3))])
    assert floors.keys == {}


def test_claims_go_without_floors_now_and_then_and_less_when_that_is_slow() -> None:
    floors = Floors()
    floors.keys["q"] = key(0, T0, 1)

    def floorless(alone: bool = False) -> bool:
        params, claim = floors.for_claim(alone)
        floors.claimed(claim, [])
        return params["floor_queues"] == []

    assert floorless(alone=True)  # a suspect's claim: never a floor
    assert not floorless()
    floors.look_behind = True  # an idle worker's poll
    assert floorless()
    assert not floorless()
    floors.next_look -= FLOORLESS_EVERY
    assert floorless()
    assert not floorless()

    # A claim without floors that took 2 s (vacuum held back): the next waits 100 s,
    # and polls keep their floors meanwhile.
    floors.next_look -= FLOORLESS_EVERY
    params, claim = floors.for_claim(False)
    assert params["floor_queues"] == []
    floors.looking[claim] -= 2.0
    floors.claimed(claim, [])
    assert floors.next_look - time.monotonic() > 2.0 * LOOK_BEHIND_SPACING - 1
    floors.look_behind = True
    assert not floorless()
    floors.dropped(99)  # unknown claim numbers are ignored
