"""A wake-up hint wakes as few workers as its jobs need (worker/roster.py).

The workers here poll every 30 s, so a job that starts at once was claimed on a hint:
a hint that reached no worker able to take the job would leave it waiting half a minute.
"""

from __future__ import annotations

from queue_engine.models import JobRecord, WorkerProcess
from queue_engine.worker.heartbeat import BEAT_MAX
from queue_engine.worker.roster import Roster, Wake
from tests.support import jobs
from tests.support.workers import Workers, heard_of_each_other, wait_for

QUEUE = "hints"
SLOW_POLL = ("--poll-interval", "30")


def start_fleet(workers: Workers, *flags: list[str]) -> list[str]:
    """One worker per entry of `flags`, with ids w0, w1, ...; returns once each has read
    the registry with all of them in it (a heartbeat after the last one registered)."""
    ids = [f"w{i}" for i in range(len(flags))]
    for worker_id, extra in zip(ids, flags, strict=True):
        workers.start("--queues", QUEUE, "--worker-id", worker_id, *SLOW_POLL, *extra)
    wait_for(
        lambda: WorkerProcess.objects.filter(id__in=ids).count() == len(ids),
        timeout=40,
        message="the workers to register",
    )
    wait_for(
        lambda: heard_of_each_other(ids),
        timeout=BEAT_MAX + 10,
        message="a heartbeat of each worker after the last one registered",
    )
    return ids


def run_one(definition, **kwargs) -> JobRecord:  # type: ignore[no-untyped-def]
    job = definition.using(queue=QUEUE).enqueue(**kwargs)
    wait_for(
        lambda: JobRecord.objects.filter(pk=job.id).exists(),
        timeout=5,
        message=f"job {job.id} to end (its hint reached no worker that could take it)",
    )
    return JobRecord.objects.get(pk=job.id)


def test_jobs_enqueued_one_at_a_time_go_round_the_fleet(workers: Workers) -> None:
    ids = start_fleet(workers, [], [], [])
    ran = [run_one(jobs.noop).worker for _ in range(9)]
    # Consecutive job ids are consecutive tickets: each hint woke one worker, in turn,
    # so the fleet takes them in a fixed cycle. Were every worker woken, the fastest
    # would take each job, and such a cycle would come about once in thousands of runs.
    assert sorted(ran[:3]) == ids, (ran, workers.output())
    assert ran == ran[:3] * 3, (ran, workers.output())


def test_a_busy_worker_hands_its_hint_to_one_with_room(workers: Workers) -> None:
    quick_stop = ["--concurrency", "1", "--shutdown-timeout", "1"]
    start_fleet(workers, quick_stop, quick_stop)
    jobs.cooperative.using(queue=QUEUE).enqueue(seconds=20)
    busy = wait_for(
        lambda: WorkerProcess.objects.filter(in_flight=1).first(),  # at its next beat
        timeout=BEAT_MAX + 2,
        message="a worker to report the slow job",
    )
    # Half of these hints name the busy worker: it hands them on, and the other runs all.
    ran = {run_one(jobs.noop).worker for _ in range(4)}
    assert ran == {next(i for i in ("w0", "w1") if i != busy.id)}, workers.output()


def test_jobs_that_need_labels_wake_every_worker(workers: Workers) -> None:
    start_fleet(workers, [], ["--labels", "gpu"], [])
    labelled = jobs.noop.using(labels=["gpu"])
    ran = {run_one(labelled).worker for _ in range(6)}
    assert ran == {"w1"}, workers.output()


def ring(*members: tuple[str, int, int]) -> list[tuple[object, ...]]:
    return [
        (worker_id, [], concurrency, in_flight) for worker_id, concurrency, in_flight in members
    ]


def test_a_hint_is_for_as_many_workers_as_its_jobs_need() -> None:
    rows = ring(("a", 10, 0), ("b", 10, 0), ("c", 10, 0), ("d", 10, 0))
    rosters = {}
    for worker_id in "abcd":
        rosters[worker_id] = Roster(worker_id)
        rosters[worker_id].update(rows)

    def woken(payload: str) -> set[str]:
        wake = Wake.parse(payload)
        return {w for w, r in rosters.items() if r.decide(wake, free=10)[0]}

    assert woken("0 1 0 - - q") == {"a"}
    assert woken("5 1 0 - - q") == {"b"}  # tickets go round the ring
    assert woken("3 15 0 - - q") == {"d", "a"}  # 15 jobs need two workers of 10
    assert woken("3 40 0 - - q") == set("abcd")
    assert woken("3 0 0 - - q") == set("abcd")  # count 0: everyone (jobs with labels)
    assert woken("q") == set("abcd")  # a bare queue name, as NOTIFY_QUEUES sends
    assert woken("queue with spaces") == set("abcd")
    assert Wake.parse("7 2 1 0 5 a queue").queue == "a queue"


def test_a_full_worker_hands_a_hint_on_once_round_the_ring_at_most() -> None:
    rows = ring(("a", 2, 2), ("b", 2, 2), ("c", 2, 0))
    a = Roster("a")
    a.update(rows)
    claim, other = a.decide(Wake.parse("0 1 0 - - q"), free=0)
    assert (claim, other) == (False, Wake(2, 1, 1, "q", None))  # b is full too: on to c
    c = Roster("c")
    c.update(rows)
    assert other is not None and c.decide(other, free=2) == (True, None)
    # A worker the hint has already gone round to, full, keeps it: the busy workers'
    # settles claim as their slots free.
    assert c.decide(Wake(2, 1, 2, "q"), free=0) == (False, None)
    everyone_full = ring(("a", 2, 2), ("b", 2, 2))
    a.update(everyone_full)
    assert a.decide(Wake.parse("0 1 0 - - q"), free=0) == (False, None)


def test_a_worker_not_in_its_own_view_yet_claims() -> None:
    roster = Roster("new")
    assert roster.decide(Wake.parse("0 1 0 - - q"), free=5) == (True, None)
    roster.update(ring(("a", 5, 0)))
    assert roster.decide(Wake.parse("0 1 0 - - q"), free=5) == (True, None)
