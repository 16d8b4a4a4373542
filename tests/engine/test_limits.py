"""Fleet-wide limits enforced at claim time: queue caps, rate limits, group (per-key) caps."""

from __future__ import annotations

import time
from collections import Counter

import psycopg
import pytest

from queue_engine import ops, sql
from queue_engine.models import GroupLimit, Job, JobRecord, QueueConfig
from tests.support import jobs
from tests.support.sampler import Sampler
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow


def test_queue_cap_holds_across_three_processes(
    workers: Workers, executions: None, conninfo: str
) -> None:
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": 3})
    ids = jobs.capped.enqueue_many([{"pause": 0.2}] * 30)
    query = "SELECT count(*) FROM queue_engine_job WHERE queue = 'capped' AND state = 'running'"

    with Sampler(conninfo, query) as sampler:
        for _ in range(3):
            workers.start("--queues", "capped", "--concurrency", "5")
        wait_for(lambda: JobRecord.objects.filter(pk__in=ids).count() == 30, timeout=40)

    peaks = [n for (n,) in sampler.samples]
    assert max(peaks) == 3, f"peak {max(peaks)} over {len(peaks)} samples"
    assert len(peaks) > 50


def test_a_cancelled_handler_that_runs_on_keeps_its_slot_under_the_cap(
    workers: Workers, executions: None
) -> None:
    """tests.capped sleeps without looking at ctx.is_cancelled(): cancelled, it runs on,
    and the job next in line must wait for it under max_concurrency=1."""
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": 1})
    first, second = jobs.capped.enqueue_many([{"pause": 2.0}, {"pause": 0.1}])
    workers.start("--queues", "capped", "--concurrency", "4")
    wait_for(lambda: Job.objects.filter(pk=first, state="running").exists(), timeout=15)

    ops.cancel_job(first, actor="ops")
    # A window: the cancelled job keeps the only slot; the next must not start.
    time.sleep(1.0)

    # Still running (asked to stop), holding the only slot; the next one waits.
    assert Job.objects.values_list("state", flat=True).get(pk=first) == "running"
    assert Job.objects.values_list("state", flat=True).get(pk=second) == "available"
    ended = wait_for(lambda: JobRecord.objects.filter(pk=first).first(), timeout=10)
    assert ended.state == "cancelled"
    second_run = wait_for(lambda: JobRecord.objects.filter(pk=second).first(), timeout=10)
    assert second_run.state == "succeeded"
    assert second_run.started_at is not None and ended.finished_at is not None
    assert second_run.started_at >= ended.finished_at


def test_rate_limit_holds_over_its_window(workers: Workers, executions: None) -> None:
    QueueConfig.objects.update_or_create(
        name="capped", defaults={"rate_limit": 5, "rate_window": 2}
    )
    jobs.capped.enqueue_many([{"pause": 0}] * 12)
    workers.start("--queues", "capped", "--concurrency", "10")

    wait_for(lambda: JobRecord.objects.filter(queue="capped").count() == 12, timeout=20)

    started = JobRecord.objects.filter(queue="capped").values_list("started_at", flat=True)
    starts = sorted(s for s in started if s is not None)
    assert len(starts) == 12
    for i, start in enumerate(starts):
        in_window = [s for s in starts[i:] if (s - start).total_seconds() < 2]
        assert len(in_window) <= 5
    assert (starts[-1] - starts[0]).total_seconds() >= 4


# The full claim, and the one without fair share a worker sends while no fair queue is
# in sight: each logs its starts.
@pytest.mark.parametrize("statement", [sql.CLAIM, sql.CLAIM_UNFAIR], ids=["full", "unfair"])
def test_a_rate_limited_queue_logs_its_starts_per_span_not_per_claim(
    transactional_db: None, conninfo: str, statement: str
) -> None:
    """Every claim sums the log over the whole rate window: with a row per claim, that
    sum grew with the claims (16,800 rows at 280 claims a second over 60 s, 3 ms)."""
    QueueConfig.objects.update_or_create(
        name="capped",
        defaults={"rate_limit": 45, "rate_window": 3600},  # spans of 6 s
    )
    jobs.capped.enqueue_many([{"pause": 0}] * 60)
    claim = {
        **sql.NO_FLOORS,
        "all_queues": False,
        "queues": ["capped"],
        "labels": [],
        "worker": "w",
        "alone": False,
    }

    with psycopg.connect(conninfo, autocommit=True) as conn:

        def claimed(token: int, limit: int) -> int:
            with conn.transaction():
                rows = conn.execute(statement, {**claim, "token": token, "limit": limit})
                return sum(1 for row in rows if row[0] is not None)

        first = [claimed(token, 2) for token in range(20)]
        last = claimed(20, 10)
        spans, starts = conn.execute(
            "SELECT count(*), sum(count) FROM queue_engine_claimlog WHERE queue = 'capped'"
        ).fetchone() or (0, 0)

    assert (sum(first), last) == (40, 5)  # the limit still holds: 45 in the window
    assert starts == 45
    assert spans in (1, 2)  # a span may end between two claims


def test_the_plain_claim_passes_over_a_queue_with_limits_and_reports_it(
    transactional_db: None, conninfo: str
) -> None:
    """A worker sends the plain claim while its last claim met no queue with limits; a
    cap set since must still hold: the plain claim leaves that queue to the full one."""
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": 2})
    jobs.capped.enqueue_many([{"pause": 0}] * 5)
    jobs.noop.enqueue_many([{}] * 3)
    claim = {
        **sql.NO_FLOORS,
        "all_queues": True,
        "queues": [],
        "labels": [],
        "worker": "w",
        "alone": False,
        "token": 1,
        "limit": 10,
    }
    with psycopg.connect(conninfo, autocommit=True) as conn:
        with conn.transaction():
            rows = conn.execute(sql.CLAIM_PLAIN, claim).fetchall()
        taken = Counter(row[2] for row in rows if row[0] is not None)
        markers = {(row[1], row[2]) for row in rows if row[0] is None}
        assert taken == {jobs.noop.queue: 3}
        assert ("limited", "capped") in markers
        with conn.transaction():
            rows = conn.execute(sql.CLAIM, {**claim, "token": 2}).fetchall()
        assert Counter(row[2] for row in rows if row[0] is not None) == {"capped": 2}


def test_a_queue_that_gains_a_cap_is_claimed_at_once_by_a_worker_claiming_plainly(
    workers: Workers, executions: None
) -> None:
    """A worker whose last claim met no queue with limits sends the plain claim, which
    passes over a queue capped since. Its next claim is the full one, at once: with
    polls every 30 s, the capped job would otherwise wait half a minute."""
    workers.start("--queues", f"{jobs.noop.queue},capped", "--poll-interval", "30")

    def ends(job_id: int, timeout: float, message: str) -> None:
        wait_for(
            lambda: JobRecord.objects.filter(pk=job_id).exists(), timeout=timeout, message=message
        )

    for _ in range(2):  # the first claim is the full one; then the worker claims plainly
        ends(jobs.noop.enqueue().id, 20, "a job of the uncapped queue to run")
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": 1})
    ends(
        jobs.capped.enqueue(pause=0).id,
        5,
        "the capped job to run (the plain claim passed over it, and no claim followed)",
    )


# Group caps alone, or with a queue cap too: the caps must hold the same.
@pytest.mark.parametrize("queue_cap", [None, 50], ids=["keys-only", "queue-capped-too"])
def test_group_caps_hold_fleet_wide_while_other_keys_flow(
    workers: Workers, executions: None, conninfo: str, queue_cap: int | None
) -> None:
    QueueConfig.objects.update_or_create(
        name="grouped", defaults={"group_concurrency": 1, "max_concurrency": queue_cap}
    )
    GroupLimit.objects.create(queue="grouped", group_key="wide", max_concurrency=3)
    calls = [{"key": "busy", "pause": 0.3}] * 8 + [{"key": "wide", "pause": 0.3}] * 9
    calls += [{"key": f"k{i}", "pause": 0.05} for i in range(20)]
    ids = jobs.grouped.enqueue_many(calls)
    query = (
        "SELECT group_key, count(*) FROM queue_engine_job WHERE queue = 'grouped' "
        "AND state = 'running' GROUP BY group_key"
    )

    with Sampler(conninfo, query) as sampler:
        for _ in range(3):
            workers.start("--queues", "grouped", "--concurrency", "6")
        wait_for(lambda: JobRecord.objects.filter(pk__in=ids).count() == len(ids), timeout=40)

    peak: dict[str, int] = {}
    for key, count in sampler.samples:
        peak[key] = max(peak.get(key, 0), count)
    assert peak["busy"] == 1 and peak["wide"] == 3
    assert all(n == 1 for k, n in peak.items() if k.startswith("k"))
    finished = dict(JobRecord.objects.filter(pk__in=ids).values_list("id", "finished_at"))
    last_busy = max(finished[i] for i in ids[:8])
    small_keys_done = max(finished[i] for i in ids[17:])
    assert small_keys_done < last_busy, "other keys waited behind the busy key"


# A busy key's backlog far larger than what one claim reads as candidates (twice its
# free slots): were the candidates read in queue order only, every one would belong to
# the busy key, at its cap, and the other keys would wait for the whole backlog.
@pytest.mark.parametrize("queue_cap", [None, 50], ids=["keys-only", "queue-capped-too"])
def test_a_busy_keys_backlog_does_not_starve_the_other_keys(
    workers: Workers, executions: None, queue_cap: int | None
) -> None:
    QueueConfig.objects.update_or_create(
        name="grouped", defaults={"group_concurrency": 1, "max_concurrency": queue_cap}
    )
    busy = jobs.grouped.enqueue_many([{"key": "busy", "pause": 0.5}] * 60)
    others = jobs.grouped.enqueue_many([{"key": f"k{i}", "pause": 0.05} for i in range(5)])

    workers.start("--queues", "grouped", "--concurrency", "4")
    wait_for(lambda: JobRecord.objects.filter(pk__in=others).count() == len(others), timeout=15)

    assert JobRecord.objects.filter(pk__in=busy).count() < 20, "the busy key's backlog ran first"


def test_a_key_held_at_zero_does_not_starve_the_other_keys(
    workers: Workers, executions: None
) -> None:
    QueueConfig.objects.update_or_create(name="grouped", defaults={"group_concurrency": 1})
    GroupLimit.objects.create(queue="grouped", group_key="held", max_concurrency=0)
    held = jobs.grouped.enqueue_many([{"key": "held", "pause": 0}] * 60)
    others = jobs.grouped.enqueue_many([{"key": f"k{i}", "pause": 0.05} for i in range(5)])

    workers.start("--queues", "grouped", "--concurrency", "4")
    wait_for(lambda: JobRecord.objects.filter(pk__in=others).count() == len(others), timeout=15)

    assert not JobRecord.objects.filter(pk__in=held).exists()


# A claim reads twice its free slots as candidates. Here all of them belong to the busy
# key, which has room for one: the claim takes that one and comes up short while other
# keys have work. The worker must claim again at once (the next claim passes the busy
# key over), not at its next poll or when the busy job ends.
@pytest.mark.parametrize("queue_cap", [None, 50], ids=["keys-only", "queue-capped-too"])
def test_a_busy_key_at_the_head_does_not_hold_the_other_keys_for_a_poll(
    workers: Workers, executions: None, queue_cap: int | None
) -> None:
    QueueConfig.objects.update_or_create(
        name="grouped", defaults={"group_concurrency": 1, "max_concurrency": queue_cap}
    )
    busy = jobs.grouped.enqueue_many([{"key": "busy", "pause": 3.0}] * 20)
    others = jobs.grouped.enqueue_many([{"key": f"k{i}", "pause": 0} for i in range(3)])

    workers.start("--queues", "grouped", "--concurrency", "4", "--poll-interval", "10")
    wait_for(lambda: JobRecord.objects.filter(pk__in=others).count() == len(others), timeout=15)

    # The busy key's first start, wherever that job is now (still running, or ended).
    busy_starts = [
        s
        for model in (Job, JobRecord)
        for s in model.objects.filter(pk__in=busy).values_list("started_at", flat=True)
        if s is not None
    ]
    first_busy = min(busy_starts)
    started = JobRecord.objects.filter(pk__in=others).values_list("started_at", flat=True)
    waited = max((s - first_busy).total_seconds() for s in started if s is not None)
    assert waited < 1.0, f"the other keys started {waited:.2f} s after the busy key's first job"
