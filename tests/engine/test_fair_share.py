"""Fair share between a queue's group keys (QueueSettings.fair_share, GroupWeight)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import psycopg
import pytest

from queue_engine import ops, sql
from queue_engine.models import GroupWeight, Job, JobRecord, QueueConfig
from tests.support import jobs
from tests.support.sampler import Sampler
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow


def starts(ids: list[int]) -> list[datetime]:
    """When each of these jobs started, wherever it is now (still running, or ended)."""
    return sorted(
        s
        for model in (Job, JobRecord)
        for s in model.objects.filter(pk__in=ids).values_list("started_at", flat=True)
        if s is not None
    )


def test_a_busy_keys_backlog_delays_a_quiet_keys_job_by_about_one_turn(
    workers: Workers, executions: None
) -> None:
    QueueConfig.objects.update_or_create(name="grouped", defaults={"fair_share": True})
    busy = jobs.grouped.enqueue_many([{"key": "busy", "pause": 0}] * 2000)
    quiet = jobs.grouped.enqueue_many([{"key": f"quiet-{i}", "pause": 0} for i in range(3)])

    workers.start("--queues", "grouped", "--concurrency", "4")
    wait_for(lambda: JobRecord.objects.filter(pk__in=quiet).count() == 3, timeout=20)

    last_quiet = starts(quiet)[-1]
    ahead = [s for s in starts(busy) if s < last_quiet]
    assert len(ahead) <= 4, f"{len(ahead)} jobs of the busy key started before the quiet keys'"


def test_without_fair_share_a_queue_serves_its_keys_first_come_first_served(
    workers: Workers, executions: None
) -> None:
    busy = jobs.grouped.enqueue_many([{"key": "busy", "pause": 0}] * 30)
    quiet = jobs.grouped.enqueue_many([{"key": "quiet", "pause": 0}] * 2)

    workers.start("--queues", "grouped", "--concurrency", "1")
    wait_for(lambda: JobRecord.objects.filter(pk__in=quiet).count() == 2, timeout=20)

    assert starts(busy)[-1] < starts(quiet)[0]


def test_weights_give_the_keys_shares_of_the_running_jobs_in_their_ratio(
    workers: Workers, executions: None, conninfo: str
) -> None:
    QueueConfig.objects.update_or_create(name="grouped", defaults={"fair_share": True})
    GroupWeight.objects.create(queue="grouped", group_key="heavy", weight=3)
    jobs.grouped.enqueue_many([{"key": "heavy", "pause": 0.2}] * 150)
    jobs.grouped.enqueue_many([{"key": "light", "pause": 0.2}] * 150)
    query = (
        "SELECT count(*) FILTER (WHERE group_key = 'heavy'), "
        "count(*) FILTER (WHERE group_key = 'light') FROM queue_engine_job "
        "WHERE queue = 'grouped' AND state = 'running'"
    )

    workers.start("--queues", "grouped", "--concurrency", "8")
    wait_for(lambda: JobRecord.objects.filter(queue="grouped").count() >= 16, timeout=20)
    with Sampler(conninfo, query) as sampler:
        wait_for(lambda: JobRecord.objects.filter(queue="grouped").count() >= 100, timeout=30)

    heavy = sum(h for h, _ in sampler.samples)
    light = sum(n for _, n in sampler.samples)
    assert light > 0
    assert 2.0 <= heavy / light <= 4.5, f"heavy ran {heavy} job-samples to light's {light}"


def test_priority_still_orders_the_jobs_of_a_key(workers: Workers, executions: None) -> None:
    QueueConfig.objects.update_or_create(name="grouped", defaults={"fair_share": True})
    ids = {
        priority: jobs.grouped.using(priority=priority).enqueue(key="a", pause=0).id
        for priority in (0, 5, 10, -5)
    }
    jobs.grouped.enqueue_many([{"key": "b", "pause": 0}] * 4)

    workers.start("--queues", "grouped", "--concurrency", "1")
    wait_for(lambda: JobRecord.objects.filter(queue="grouped").count() == 8, timeout=20)

    records = JobRecord.objects.filter(pk__in=ids.values()).order_by("started_at")
    by_id = {job_id: priority for priority, job_id in ids.items()}
    in_order = [by_id[record.id] for record in records]
    assert in_order == [10, 5, 0, -5]


def test_claimers_of_a_fair_queue_without_caps_do_not_wait_for_each_other(
    transactional_db: None, conninfo: str
) -> None:
    """Its claims need the full claim (the plain one passes it over and says `fair`),
    but not the queue's lock, which guards only the counts under caps: the worker's two
    lanes may claim it side by side."""
    QueueConfig.objects.update_or_create(name="grouped", defaults={"fair_share": True})
    jobs.grouped.enqueue_many([{"key": f"k{i % 3}", "pause": 0} for i in range(9)])
    claim = {
        **sql.NO_FLOORS,
        "all_queues": False,
        "queues": ["grouped"],
        "labels": [],
        "worker": "w",
        "alone": False,
        "limit": 3,
    }
    with psycopg.connect(conninfo, autocommit=True) as one, psycopg.connect(conninfo) as two:
        with one.transaction():
            plain = one.execute(sql.CLAIM_PLAIN, {**claim, "token": 1}).fetchall()
        assert [(row[0], row[1]) for row in plain] == [(None, "fair")]

        with one.transaction():
            first = one.execute(sql.CLAIM, {**claim, "token": 2}).fetchall()
            two.execute("SET lock_timeout = '1s'")
            second = two.execute(sql.CLAIM, {**claim, "token": 3}).fetchall()  # not blocked
        two.rollback()

    taken = [{row[0] for row in rows if row[0] is not None} for rows in (first, second)]
    assert len(taken[0]) == len(taken[1]) == 3 and not taken[0] & taken[1]
    assert {row[1] for row in first if row[0] is None} == {"fair"}


def test_the_claim_without_shares_passes_a_fair_queue_over_and_reports_it(
    transactional_db: None, conninfo: str
) -> None:
    """While no fair queue is in sight, a worker sends the claim without fair share
    (sql.CLAIM_UNFAIR): every limit, no turns. A queue made fair since must not be
    claimed out of turn: that claim leaves it (and its lock) to the full claim, says
    `fair`, and takes what it would take of the other queues."""
    QueueConfig.objects.update_or_create(
        name="grouped", defaults={"fair_share": True, "max_concurrency": 5}
    )
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": 2})
    jobs.grouped.enqueue_many([{"key": f"k{i % 3}", "pause": 0} for i in range(6)])
    jobs.capped.enqueue_many([{"pause": 0}] * 4)
    claim = {
        **sql.NO_FLOORS,
        "all_queues": False,
        "queues": ["grouped", "capped"],
        "labels": [],
        "worker": "w",
        "alone": False,
        "limit": 10,
    }
    with psycopg.connect(conninfo) as holder, psycopg.connect(conninfo, autocommit=True) as conn:
        # Another claimer holds the fair queue's lock: the claim must not wait for it.
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('queue_engine:queue:grouped', 0))"
        )
        conn.execute("SET lock_timeout = '1s'")
        with conn.transaction():
            rows = conn.execute(sql.CLAIM_UNFAIR, {**claim, "token": 1}).fetchall()
        holder.rollback()
        taken = Counter(row[2] for row in rows if row[0] is not None)
        markers = {(row[1], row[2]) for row in rows if row[0] is None}
        assert taken == {"capped": 2}  # under its cap, as the full claim would
        assert {("fair", "grouped"), ("limited", "grouped"), ("limited", "capped")} <= markers

        with conn.transaction():
            rows = conn.execute(sql.CLAIM, {**claim, "token": 2}).fetchall()
        assert Counter(row[2] for row in rows if row[0] is not None) == {"grouped": 5}


def test_a_queue_made_fair_is_claimed_in_turns_by_a_worker_that_saw_none(
    workers: Workers, executions: None
) -> None:
    """A worker whose claims met no fair queue claims without shares; once a queue it
    serves is made fair, its next claim is the full one, and the keys take turns."""
    QueueConfig.objects.update_or_create(name="grouped", defaults={"group_concurrency": 100})
    # A capped queue in sight while "grouped" is paused: the claims stay ones with limits
    # (without shares), not plain ones, which would hand over to the full claim.
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": 5})
    workers.start("--queues", "capped,grouped", "--concurrency", "4")
    first = jobs.grouped.enqueue(key="warm", pause=0).id
    wait_for(lambda: JobRecord.objects.filter(pk=first).exists(), timeout=20)

    ops.pause_queue("grouped")  # the backlog and the quiet keys arrive together
    busy = jobs.grouped.enqueue_many([{"key": "busy", "pause": 0}] * 2000)
    quiet = jobs.grouped.enqueue_many([{"key": f"quiet-{i}", "pause": 0} for i in range(3)])
    # Made fair as it resumes, in one change: no claim sees it fair before it can take
    # its jobs, so the first that can is one without shares, which must pass it over.
    ops.update_queue_config("grouped", fair_share=True, paused=False)
    wait_for(lambda: JobRecord.objects.filter(pk__in=quiet).count() == 3, timeout=20)

    # In turns, one claim of 4 takes one job of each key; first come, first served,
    # it would take 4 of the busy key's first.
    ahead = [s for s in starts(busy) if s < starts(quiet)[-1]]
    assert len(ahead) <= 2, f"{len(ahead)} of the busy key's jobs went first"


def test_a_fair_queue_the_claim_without_shares_passed_over_is_claimed_at_once(
    workers: Workers, executions: None
) -> None:
    """The claim without fair share passes a fair queue over and says so; the full claim
    follows at once, not at the next poll (30 s here)."""
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": 5})
    workers.start("--queues", "capped,grouped", "--poll-interval", "30")
    first = jobs.capped.enqueue(pause=0).id  # the worker's claims see no fair queue
    wait_for(lambda: JobRecord.objects.filter(pk=first).exists(), timeout=20)

    ops.pause_queue("grouped")
    waiting = jobs.grouped.enqueue_many([{"key": f"k{i}", "pause": 0} for i in range(3)])
    QueueConfig.objects.filter(name="grouped").update(fair_share=True)
    ops.resume_queue("grouped")  # wakes the worker: its claim passes the queue over
    wait_for(
        lambda: JobRecord.objects.filter(pk__in=waiting).count() == 3,
        timeout=5,
        message="the fair queue's jobs to run (no claim followed the one that passed it over)",
    )
