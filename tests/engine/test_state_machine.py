"""The job lifecycle as a state machine: hypothesis drives the hot-path SQL and the
operator actions in random orders and checks, after every step, that the database
agrees with a small Python model of what must be true.

Simulated workers are plain psycopg connections that run the statements of
queue_engine.sql with the parameters queue_engine.worker.lanes passes (claim,
settle, release, heartbeat, progress) and those of the leader (promote, rescue with
max_rescues=3). A worker can be killed: its claims stay leased until rescued, and
its old tokens go stale. Operator actions go through queue_engine.ops on Django's
connection (cancel, retry, bulk retry, redrive, redrive of the queue's dead letter,
remove); each is checked for its count, its audit event and, for cancels of
running jobs, the control message the workers get. Jobs sometimes share a dedup
key. After every step the database is compared with the model:

* nothing is lost: every enqueued id is in exactly one of the live table and the
  history, unless an operator removed it;
* at most one live lease per job: a job is running iff the model holds exactly one
  lease for it (a worker's current claim, or the orphaned claim of a killed
  worker not yet rescued), and the row's claim_token and lease_owner are that
  lease's;
* a stale settle (a token whose lease ended by settle, cancel, rescue or release,
  including a killed worker's) changes nothing at all;
* a history row never changes until a redrive/retry moves it back to the live
  table, with attempt 0;
* a running job's attempt never exceeds its max_attempts;
* and every job's state, attempt, rescues, error count, dedup key and redrive count
  are what the model says.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import psycopg
import pytest
from django.db import connection
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from queue_engine import ops, sql
from queue_engine.enqueueing.prepare import JobSpec
from queue_engine.enqueueing.single import enqueue
from queue_engine.exceptions import OpsError
from tests.support import jobs  # noqa: F401  (registers tests.noop)

QUEUE = "statemachine"
WORKERS = ("sm-w0", "sm-w1", "sm-w2")
MAX_RESCUES = 3
ACTOR = "state-machine"
TABLES = (
    "queue_engine_job",
    "queue_engine_jobrecord",
    "queue_engine_auditevent",
    "queue_engine_joblog",
)

SETTINGS = settings(
    max_examples=75,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@dataclass
class Expected:
    """What the model says about one job id."""

    where: str  # "live", "history" or "removed"
    state: str
    max_attempts: int
    priority: int = 0
    dedup: str | None = None
    attempt: int = 0
    rescues: int = 0
    errors: int = 0
    redriven: int = 0
    worker: str = ""  # the history row's worker column
    cancel_asked: bool = False  # running, and an operator asked it to stop

    def facts(self) -> tuple[Any, ...]:
        return (
            self.state,
            self.attempt,
            self.max_attempts,
            self.priority,
            self.dedup,
            self.rescues,
            self.errors,
            self.redriven,
        )


def error_text(job_id: int, attempt: int, worker: str, what: str) -> str:
    return json.dumps(
        {
            "attempt": attempt,
            "class": f"tests.{what}",
            "message": what,
            "traceback": "",
            "worker": worker,
            "at": "2000-01-01T00:00:00+00:00",
        }
    )


class JobLifecycle(RuleBasedStateMachine):
    # Set by the test function: one autocommit connection per simulated worker,
    # and one for the leader services.
    conns: ClassVar[dict[str, psycopg.Connection[Any]]] = {}
    leader: ClassVar[psycopg.Connection[Any] | None] = None
    listener: ClassVar[psycopg.Connection[Any] | None] = None  # LISTEN qe_control

    def __init__(self) -> None:
        super().__init__()
        reset_tables()
        self.tokens = itertools.count(1_000_001)
        self.jobs: dict[int, Expected] = {}
        self.claims: dict[str, dict[int, int]] = {w: {} for w in WORKERS}  # id -> token
        self.orphans: dict[int, tuple[str, int]] = {}  # id -> (killed worker, token)
        self.stale: list[tuple[str, int, int]] = []  # (worker, id, token), lease ended
        self.frozen: dict[int, Any] = {}  # history rows as first seen
        self.audited = 0  # audit events so far
        self.control_messages()  # drop what an earlier (failed) example left

    def teardown(self) -> None:
        reset_tables()

    # --- helpers ------------------------------------------------------------------

    def held(self) -> list[tuple[str, int, int]]:
        """Current claims of live workers: (worker, id, token)."""
        return sorted((w, i, t) for w, claims in self.claims.items() for i, t in claims.items())

    def ids(self, where: str | None = None, state: str | None = None) -> list[int]:
        return sorted(
            i
            for i, e in self.jobs.items()
            if (where is None or e.where == where) and (state is None or e.state == state)
        )

    def lease_of(self, job_id: int) -> tuple[str, int] | None:
        for worker, claims in self.claims.items():
            if job_id in claims:
                return worker, claims[job_id]
        return self.orphans.get(job_id)

    def end_lease(self, job_id: int) -> str:
        """The job's lease ended: its token is stale from now on. Returns its worker."""
        lease = self.lease_of(job_id)
        assert lease is not None, f"job {job_id} had no lease in the model"
        worker, token = lease
        self.claims[worker].pop(job_id, None)
        self.orphans.pop(job_id, None)
        self.stale.append((worker, job_id, token))
        return worker

    def to_history(self, job_id: int, state: str, worker: str) -> None:
        e = self.jobs[job_id]
        e.where, e.state, e.worker = "history", state, worker

    def redrive_batch(self, ids: list[int]) -> None:
        """Ended jobs back to live, attempt 0. A dedup key held by a live job, or by an
        earlier job of the batch, is dropped."""
        held = {self.jobs[i].dedup for i in self.ids("live")} - {None}
        for job_id in sorted(ids):
            e = self.jobs[job_id]
            if e.dedup in held:
                e.dedup = None
            held.add(e.dedup)
            e.where, e.state, e.attempt, e.rescues, e.worker = "live", "available", 0, 0, ""
            e.redriven += 1
            self.frozen.pop(job_id, None)

    def control_messages(self) -> list[dict[str, Any]]:
        assert self.listener is not None
        return [json.loads(n.payload) for n in self.listener.notifies(timeout=0)]

    def audits_since(self) -> list[tuple[str, int]]:
        """Audit events written since the last call: (action, count)."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT action, count FROM queue_engine_auditevent ORDER BY id")
            rows = [tuple(r) for r in cursor.fetchall()]
        new, self.audited = rows[self.audited :], len(rows)
        return new

    def conn(self, worker: str) -> psycopg.Connection[Any]:
        return self.conns[worker]

    # --- enqueue --------------------------------------------------------------------

    @rule(
        max_attempts=st.sampled_from([1, 2, 3, 5]),
        priority=st.integers(-1, 1),
        scheduled=st.sampled_from([False, False, False, True]),
        dedup=st.sampled_from([None, "k"]),
    )
    def enqueue_job(
        self, max_attempts: int, priority: int, scheduled: bool, dedup: str | None
    ) -> None:
        job = enqueue(
            JobSpec(
                kind="tests.noop",
                queue=QUEUE,
                max_attempts=max_attempts,
                priority=priority,
                delay=3600 if scheduled else None,
                dedup_key=dedup,
            )
        )
        holders = [i for i in self.ids("live") if dedup and self.jobs[i].dedup == dedup]
        if holders:  # the live holder of the key comes back, nothing new
            assert (job.id, job.deduplicated) == (holders[0], True)  # type: ignore[attr-defined]
            return
        state = "scheduled" if scheduled else "available"
        assert job.state == state
        assert job.id not in self.jobs
        self.jobs[job.id] = Expected("live", state, max_attempts, priority, dedup)

    # --- the worker's hot path ----------------------------------------------------------

    @rule(
        worker=st.sampled_from(WORKERS),
        limit=st.integers(1, 3),
        alone=st.booleans(),
        plain=st.booleans(),
    )
    def claim(self, worker: str, limit: int, alone: bool, plain: bool) -> None:
        """A claim alone takes one suspect (rescued twice or more), as a worker sends it;
        any other claim takes none, and says whether one waits. The queue has no limits:
        the plain claim does the same as the full one."""
        limit = 1 if alone else limit
        conn = self.conn(worker)
        best = [
            r[0]
            for r in conn.execute(
                """SELECT id FROM queue_engine_job
                WHERE state = 'available' AND queue = %s AND run_at <= now()
                  AND (rescues >= 2) = %s
                ORDER BY priority DESC, run_at, id LIMIT %s""",
                [QUEUE, alone, limit],
            )
        ]
        token = next(self.tokens)
        claim = {
            **sql.NO_FLOORS,
            "all_queues": False,
            "queues": [QUEUE],
            "labels": [],
            "limit": limit,
            "alone": alone,
            "worker": worker,
            "token": token,
        }
        with conn.transaction():  # as runtime's settle-and-claim does
            rows = conn.execute(sql.CLAIM_PLAIN if plain else sql.CLAIM, claim).fetchall()
        markers = {r[1] for r in rows if r[0] is None}
        rows = [r for r in rows if r[0] is not None]
        got = sorted(r[0] for r in rows)
        suspects = [i for i in self.ids("live", "available") if self.jobs[i].rescues >= 2]
        available = [i for i in self.ids("live", "available") if (i in suspects) == alone]
        assert ("suspects" in markers) == bool(suspects and not alone), (markers, suspects)
        assert len(got) == min(limit, len(available)), (got, available)
        assert set(got) <= set(available), (got, available)
        assert got == sorted(best), ("not the best jobs first", got, best)
        for job_id, _kind, queue, _payload, attempt, max_attempts, *_ in rows:
            e = self.jobs[job_id]
            e.state = "running"
            e.attempt += 1
            assert (queue, attempt, max_attempts) == (QUEUE, e.attempt, e.max_attempts)
            assert self.lease_of(job_id) is None, f"job {job_id} claimed while leased"
            self.claims[worker][job_id] = token

    @precondition(lambda self: self.held())
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        worker, job_id, token = data.draw(st.sampled_from(self.held()), label="claim")
        rows = (
            self.conn(worker)
            .execute(
                sql.SETTLE_SUCCEEDED,
                {
                    "ids": [job_id],
                    "tokens": [token],
                    "results": [json.dumps({"job": job_id})],
                },
            )
            .fetchall()
        )
        assert [r[0] for r in rows] == [job_id]
        self.to_history(job_id, "succeeded", self.end_lease(job_id))
        self.jobs[job_id].cancel_asked = False  # a success stands

    @precondition(lambda self: self.held())
    @rule(
        data=st.data(),
        fatal=st.sampled_from([False, False, True]),
        delay=st.sampled_from([0.0, 0.0, 3600.0]),
    )
    def fail(self, data: st.DataObject, fatal: bool, delay: float) -> None:
        """A failed attempt, settled as runtime's Execution._failure decides."""
        worker, job_id, token = data.draw(st.sampled_from(self.held()), label="claim")
        e = self.jobs[job_id]
        error = error_text(job_id, e.attempt, worker, "Boom")
        conn = self.conn(worker)
        retry = {"ids": [job_id], "tokens": [token], "delays": [delay], "errors": [error]}
        if e.cancel_asked and not (fatal or e.attempt >= e.max_attempts):
            # A job asked to stop is not run again: the retry is refused.
            assert conn.execute(sql.SETTLE_RETRY, retry).fetchall() == []
            return
        self.end_lease(job_id)
        e.errors += 1
        e.cancel_asked = False
        if fatal or e.attempt >= e.max_attempts:
            rows = conn.execute(
                sql.SETTLE_FAILED,
                {
                    "ids": [job_id],
                    "tokens": [token],
                    "errors": [error],
                },
            ).fetchall()
            assert [r[0] for r in rows] == [job_id]
            self.to_history(job_id, "failed", worker)
        else:
            rows = conn.execute(sql.SETTLE_RETRY, retry).fetchall()
            e.state = "scheduled" if delay > 0 else "available"
            assert rows == [(job_id, QUEUE, e.state)]

    @precondition(lambda self: self.held())
    @rule(data=st.data(), new_payload=st.booleans())
    def snooze(self, data: st.DataObject, new_payload: bool) -> None:
        worker, job_id, token = data.draw(st.sampled_from(self.held()), label="claim")
        asked = self.jobs[job_id].cancel_asked
        rows = (
            self.conn(worker)
            .execute(
                sql.SETTLE_SNOOZED,
                {
                    "ids": [job_id],
                    "tokens": [token],
                    "delays": [0.0],
                    "payloads": [json.dumps({"cursor": 1}) if new_payload else None],
                },
            )
            .fetchall()
        )
        if asked:  # not run again
            assert rows == []
            return
        assert rows == [(job_id, QUEUE, "available")]
        self.end_lease(job_id)
        e = self.jobs[job_id]
        e.state = "available"
        e.attempt -= 1

    @precondition(lambda self: any(self.jobs[h[1]].cancel_asked for h in self.held()))
    @rule(data=st.data())
    def stop_on_request(self, data: st.DataObject) -> None:
        """The worker stopped the handler of a job an operator asked to stop."""
        asked = [h for h in self.held() if self.jobs[h[1]].cancel_asked]
        worker, job_id, token = data.draw(st.sampled_from(asked), label="claim")
        rows = (
            self.conn(worker)
            .execute(sql.SETTLE_CANCELLED, {"ids": [job_id], "tokens": [token]})
            .fetchall()
        )
        assert [r[0] for r in rows] == [job_id]
        e = self.jobs[job_id]
        e.errors += 1
        e.cancel_asked = False
        self.to_history(job_id, "cancelled", self.end_lease(job_id))

    def holder(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted({w for w, _, _ in self.held()})), label="worker")

    @precondition(lambda self: self.held())
    @rule(data=st.data())
    def release_all(self, data: st.DataObject) -> None:
        """Shutdown timeout: the worker gives back everything it holds."""
        worker = self.holder(data)
        claims = dict(self.claims[worker])
        rows = (
            self.conn(worker)
            .execute(
                sql.RELEASE,
                {
                    "ids": list(claims),
                    "tokens": list(claims.values()),
                },
            )
            .fetchall()
        )
        given_back = sorted(i for i in claims if not self.jobs[i].cancel_asked)
        assert sorted(r[0] for r in rows) == given_back  # the others stay, to be cancelled
        for job_id in given_back:
            self.end_lease(job_id)
            e = self.jobs[job_id]
            e.state = "available"
            e.attempt = max(e.attempt - 1, 0)

    @precondition(lambda self: self.held())
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        worker = self.holder(data)
        claims = self.claims[worker]
        rows = (
            self.conn(worker)
            .execute(
                sql.HEARTBEAT,
                {
                    "ids": list(claims),
                    "tokens": list(claims.values()),
                },
            )
            .fetchall()
        )
        assert sorted(r[0] for r in rows) == sorted(claims), "a current lease was lost"

    @precondition(lambda self: self.held())
    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        """The worker dies (SIGKILL) and restarts with the same id: its claims are
        orphaned, still leased in the database until the leader rescues them."""
        worker = self.holder(data)
        for job_id, token in self.claims[worker].items():
            self.orphans[job_id] = (worker, token)
        self.claims[worker] = {}

    @precondition(lambda self: self.orphans)
    @rule(data=st.data())
    def orphan_completes_in_time(self, data: st.DataObject) -> None:
        """A worker taken for dead (partitioned, hung) settles before its lease expired:
        the token is still current, so the settle is accepted."""
        job_id = data.draw(st.sampled_from(sorted(self.orphans)), label="orphan")
        worker, token = self.orphans[job_id]
        rows = (
            self.conn(worker)
            .execute(
                sql.SETTLE_SUCCEEDED,
                {
                    "ids": [job_id],
                    "tokens": [token],
                    "results": ["null"],
                },
            )
            .fetchall()
        )
        assert [r[0] for r in rows] == [job_id]
        self.to_history(job_id, "succeeded", self.end_lease(job_id))
        self.jobs[job_id].cancel_asked = False

    def reclaimed(self) -> list[tuple[str, int, int]]:
        """Stale claims of jobs that run again now, under a newer claim."""
        return [s for s in self.stale if self.lease_of(s[1]) is not None]

    @precondition(lambda self: self.stale)
    @rule(data=st.data())
    def stale_settle(self, data: st.DataObject) -> None:
        """Every way a worker can report on a claim whose lease ended changes nothing,
        whatever the job's state now (ended, waiting, redriven, removed, or running
        under a newer claim)."""
        self.settle_stale(data.draw(st.sampled_from(self.stale), label="stale claim"))

    @precondition(lambda self: self.reclaimed())
    @rule(data=st.data())
    def stale_settle_of_reclaimed_job(self, data: st.DataObject) -> None:
        """The case fencing is for: the job runs again under a newer claim (after a
        rescue, release, retry or redrive) when the old claim's reports arrive."""
        self.settle_stale(data.draw(st.sampled_from(self.reclaimed()), label="stale claim"))

    def settle_stale(self, stale: tuple[str, int, int]) -> None:
        worker, job_id, token = stale
        base = {"ids": [job_id], "tokens": [token]}
        error = error_text(job_id, 0, worker, "Stale")
        before = snapshot()
        for how, statement, params in (
            ("succeeded", sql.SETTLE_SUCCEEDED, {**base, "results": ['"stale"']}),
            ("failed", sql.SETTLE_FAILED, {**base, "errors": [error]}),
            ("retry", sql.SETTLE_RETRY, {**base, "delays": [0.0], "errors": [error]}),
            ("snoozed", sql.SETTLE_SNOOZED, {**base, "delays": [0.0], "payloads": [None]}),
            ("release", sql.RELEASE, base),
            ("cancelled", sql.SETTLE_CANCELLED, base),
            ("heartbeat", sql.HEARTBEAT, base),
            ("progress", sql.PROGRESS, {**base, "fractions": [0.5], "messages": ["stale"]}),
        ):
            cursor = self.conn(worker).execute(statement, params)
            assert cursor.rowcount == 0, f"stale {how} of job {job_id} matched a row"
        assert snapshot() == before, f"a stale report on job {job_id} changed the tables"

    # --- leader services ----------------------------------------------------------------

    @precondition(lambda self: self.ids("live", "running"))
    @rule(data=st.data())
    def rescue(self, data: st.DataObject) -> None:
        """Some leases expire (a hung worker stopped heartbeating but still believes it
        holds them); the leader rescues them."""
        self.expire_and_rescue(
            data.draw(
                st.lists(
                    st.sampled_from(self.ids("live", "running")),
                    min_size=1,
                    max_size=3,
                    unique=True,
                ),
                label="expired",
            )
        )

    @precondition(lambda self: self.orphans)
    @rule()
    def rescue_orphans(self) -> None:
        """The leases of killed workers expire; the leader rescues them."""
        self.expire_and_rescue(sorted(self.orphans))

    def expire_and_rescue(self, expired: list[int]) -> None:
        assert self.leader is not None
        self.leader.execute(
            """UPDATE queue_engine_job
                                  SET lease_expires_at = now() - interval '1 second'
                                WHERE id = ANY(%s)""",
            [expired],
        )
        rows = self.leader.execute(
            sql.RESCUE_EXPIRED, {"limit": 1000, "max_rescues": MAX_RESCUES}
        ).fetchall()
        want = []
        for job_id in sorted(expired):
            e = self.jobs[job_id]
            if e.cancel_asked:  # its worker is gone: cancelled, as it would have settled
                want.append(("cancelled", job_id, QUEUE))
                e.errors += 1
                e.cancel_asked = False
                self.to_history(job_id, "cancelled", self.end_lease(job_id))
                continue
            dead = e.rescues + 1 >= MAX_RESCUES or e.attempt >= e.max_attempts
            want.append(("dead" if dead else "revived", job_id, QUEUE))
            worker = self.end_lease(job_id)
            e.rescues += 1
            e.errors += 1
            if dead:
                self.to_history(job_id, "failed", worker)
            else:
                e.state = "available"
        assert sorted(rows) == sorted(want)

    @precondition(lambda self: self.ids("live", "scheduled"))
    @rule(data=st.data())
    def promote(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.ids("live", "scheduled")), label="due")
        assert self.leader is not None
        self.leader.execute(
            "UPDATE queue_engine_job SET run_at = now() - interval '1 second' WHERE id = %s",
            [job_id],
        )
        rows = self.leader.execute(sql.PROMOTE_SCHEDULED, {"limit": 1000}).fetchall()
        assert rows == [(QUEUE, 1)]  # its queue, and the one queue woken
        self.jobs[job_id].state = "available"

    # --- operator actions ---------------------------------------------------------------

    @precondition(lambda self: self.jobs)
    @rule(
        data=st.data(),
        action=st.sampled_from(
            ["cancel", "redrive", "retry", "retry_many", "remove", "redrive_queue"]
        ),
    )
    def operator(self, data: st.DataObject, action: str) -> None:
        """One operator action (one rule for them all, so that they do not crowd out
        the workers' steps), on ids of any state, including ended and removed ones."""
        getattr(self, f"op_{action}")(data)

    def some_ids(self, where: str) -> st.SearchStrategy[list[int]]:
        """Up to 3 ids of jobs `where` (live, history), or all of them (select all in
        the console), or up to 3 of any state."""

        def ids(pool: list[int]) -> st.SearchStrategy[list[int]]:
            return st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True)

        preferred = self.ids(where)
        if not preferred:
            return ids(self.ids())
        return st.one_of(ids(preferred), st.just(preferred), ids(self.ids()))

    def op_cancel(self, data: st.DataObject) -> None:
        ids = data.draw(self.some_ids("live"), label="cancel ids")
        assert self.control_messages() == [], "a control message nobody expected"
        count = ops.cancel_jobs(ids, actor=ACTOR)
        live = [i for i in ids if self.jobs[i].where == "live" and not self.jobs[i].cancel_asked]
        running = sorted(i for i in live if self.jobs[i].state == "running")
        assert count == len(live)
        assert self.audits_since() == ([("cancel", count)] if count else [])
        if running:  # the workers running them are told to stop
            assert self.listener is not None
            told = [json.loads(n.payload) for n in self.listener.notifies(timeout=5, stop_after=1)]
            assert len(told) == 1 and sorted(told[0].pop("ids")) == running, told
            assert told[0] == {"action": "cancel", "by": ACTOR}, told
        for job_id in live:
            if self.jobs[job_id].state == "running":
                self.jobs[job_id].cancel_asked = True  # running until its worker stops it
                continue
            self.jobs[job_id].errors += 1
            self.to_history(job_id, "cancelled", "")

    def op_retry(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.ids()), label="retry id")
        e = self.jobs[job_id]
        try:
            outcome = ops.retry_job(job_id, actor=ACTOR)
        except OpsError:
            outcome = "refused"
        audits = self.audits_since()
        if e.where == "removed" or (e.where == "live" and e.state == "running"):
            assert (outcome, audits) == ("refused", [])
        elif e.where == "live":
            assert (outcome, audits) == ("run_now", [("retry", 1)])
            e.state = "available"
        else:
            assert (outcome, audits) == ("redriven", [("retry", 1)])
            self.redrive_batch([job_id])

    def op_retry_many(self, data: st.DataObject) -> None:
        """Retry a selection: waiting jobs run now, ended ones are redriven, running ones
        are left alone."""
        ids = data.draw(self.some_ids("history"), label="retry ids")
        count = ops.retry_jobs(ids, actor=ACTOR)
        waiting = [
            i
            for i in ids
            if self.jobs[i].where == "live" and self.jobs[i].state in ("available", "scheduled")
        ]
        ended = [i for i in ids if self.jobs[i].where == "history"]
        assert count == len(waiting) + len(ended)
        assert self.audits_since() == [("retry", n) for n in (len(waiting), len(ended)) if n]
        for job_id in waiting:
            self.jobs[job_id].state = "available"
        self.redrive_batch(ended)

    def op_redrive(self, data: st.DataObject) -> None:
        ids = data.draw(self.some_ids("history"), label="redrive ids")
        count = ops.redrive_jobs(ids, actor=ACTOR)
        ended = [
            i
            for i in ids
            if self.jobs[i].where == "history" and self.jobs[i].state in ("failed", "cancelled")
        ]
        assert count == len(ended)
        assert self.audits_since() == ([("redrive", count)] if count else [])
        self.redrive_batch(ended)

    def op_redrive_queue(self, data: st.DataObject) -> None:
        """The queue's whole dead letter, in batches of two (separate transactions)."""
        dead = self.ids("history", "failed")
        count = ops.redrive_queue(QUEUE, actor=ACTOR, batch_size=2)
        assert count == len(dead)
        batches = [dead[n : n + 2] for n in range(0, len(dead), 2)]
        assert self.audits_since() == [("redrive_queue", len(b)) for b in batches]
        for batch in batches:
            self.redrive_batch(batch)

    def op_remove(self, data: st.DataObject) -> None:
        ids = data.draw(self.some_ids("live"), label="remove ids")
        count = ops.remove_jobs(ids, actor=ACTOR)
        gone = [
            i
            for i in ids
            if self.jobs[i].where == "history"
            or (self.jobs[i].where == "live" and self.jobs[i].state != "running")
        ]
        assert count == len(gone)
        assert self.audits_since() == ([("remove", count)] if count else [])
        for job_id in gone:
            self.jobs[job_id].where = "removed"
            self.frozen.pop(job_id, None)

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def database_matches_the_model(self) -> None:
        facts = """state, attempt, max_attempts, priority, dedup_key, rescues,
                   jsonb_array_length(errors), COALESCE((meta->>'redriven')::int, 0)"""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, {facts}, claim_token, lease_owner FROM queue_engine_job")
            live = {r[0]: (r[1:9], r[9], r[10]) for r in cursor.fetchall()}
            cursor.execute(f"""SELECT id, {facts}, worker, to_jsonb(r)::text
                                 FROM queue_engine_jobrecord r""")
            history = {r[0]: (r[1:9], r[9], r[10]) for r in cursor.fetchall()}

        # Nothing lost, nothing in both tables, nothing unexpected.
        assert not live.keys() & history.keys(), f"in both tables: {live.keys() & history.keys()}"
        assert sorted(live) == self.ids("live"), ("live table", sorted(live), self.ids("live"))
        assert sorted(history) == self.ids("history"), (
            "history",
            sorted(history),
            self.ids("history"),
        )

        # One lease per job at most, in the model and in the database.
        held = [i for claims in self.claims.values() for i in claims] + list(self.orphans)
        assert len(held) == len(set(held)), f"a job leased twice: {held}"
        running = sorted(i for i, (row, _, _) in live.items() if row[0] == "running")
        assert running == sorted(held), ("running rows vs leases", running, sorted(held))

        for job_id, (row, token, owner) in live.items():
            e = self.jobs[job_id]
            assert row == e.facts(), (job_id, "database", row, "model", e)
            lease = self.lease_of(job_id)
            if e.state == "running":
                assert (owner, token) == lease, (job_id, (owner, token), lease)
                assert 1 <= e.attempt <= e.max_attempts, (job_id, e.attempt, e.max_attempts)
            else:
                assert lease is None and token is None and owner is None, (job_id, token, owner)

        for job_id, (row, worker, document) in history.items():
            e = self.jobs[job_id]
            assert (*row, worker) == (*e.facts(), e.worker), (
                job_id,
                "history",
                (*row, worker),
                "model",
                e,
            )
            # A terminal row never changes until a redrive takes it back.
            first = self.frozen.setdefault(job_id, document)
            assert document == first, f"history row {job_id} changed:\n{first}\n{document}"


def reset_tables() -> None:
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"DELETE FROM {table}")  # fixed table names


def snapshot() -> tuple[list[str], list[str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_jsonb(j)::text FROM queue_engine_job j ORDER BY id")
        live = [r[0] for r in cursor.fetchall()]
        cursor.execute("SELECT to_jsonb(r)::text FROM queue_engine_jobrecord r ORDER BY id")
        history = [r[0] for r in cursor.fetchall()]
    return live, history


@pytest.fixture
def simulated_workers(transactional_db: None) -> Iterator[None]:
    from queue_engine.connections import conninfo

    info = conninfo()
    names = (*WORKERS, "leader", "listener")
    opened = {name: psycopg.connect(info, autocommit=True) for name in names}
    for conn in opened.values():  # commits need not wait for the disk here
        conn.execute("SET synchronous_commit = off")
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
    opened["listener"].execute("LISTEN qe_control")
    JobLifecycle.conns = {w: opened[w] for w in WORKERS}
    JobLifecycle.leader = opened["leader"]
    JobLifecycle.listener = opened["listener"]
    try:
        yield
    finally:
        JobLifecycle.conns, JobLifecycle.leader, JobLifecycle.listener = {}, None, None
        for conn in opened.values():
            conn.close()


def test_job_lifecycle_state_machine(simulated_workers: None) -> None:
    run_state_machine_as_test(JobLifecycle, settings=SETTINGS)
