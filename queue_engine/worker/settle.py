"""The settle: finished jobs grouped by how they finished, written in one transaction
with the statements each group needs (and the refresh of the flows they belong to)."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.payloads import storable
from queue_engine.worker.execution import Outcome, error_json
from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.script import Prepared, Script

log = logging.getLogger("queue_engine.worker")

# What a settle apart from a claim leaves: the console's hints, and whether it left
# children of a flow node to count down in chunks.
type Settled = Callable[[list[str], bool], None]

MAX_EVENT_IDS = 200  # ids per console hint; NOTIFY payloads stay far below 8000 bytes

# The settle statements, prepared once per connection (see worker/script.py).
PROGRESS = Prepared("qe_progress", sql.PROGRESS)
SETTLE_SUCCEEDED = Prepared("qe_settle_succeeded", sql.SETTLE_SUCCEEDED)
SETTLE_SUCCEEDED_FLOW = Prepared("qe_settle_succeeded_flow", sql.SETTLE_SUCCEEDED_FLOW)
SETTLE_FAILED = Prepared("qe_settle_failed", sql.SETTLE_FAILED)
SETTLE_CANCELLED = Prepared("qe_settle_cancelled", sql.SETTLE_CANCELLED)
SETTLE_RETRY = Prepared("qe_settle_retry", sql.SETTLE_RETRY)
SETTLE_SNOOZED = Prepared("qe_settle_snoozed", sql.SETTLE_SNOOZED)
LOCK_MAILBOXES = Prepared("qe_lock_mailboxes", sql.LOCK_MAILBOXES)
SETTLE_PARKED = Prepared("qe_settle_parked", sql.SETTLE_PARKED)
WAKE_MAILED = Prepared("qe_wake_mailed", sql.WAKE_MAILED)
RELEASE = Prepared("qe_release", sql.RELEASE)
RECORD_RESULT = Prepared("qe_record_result", sql.RECORD_RESULT)
RECORD_RESULT_FLOW = Prepared("qe_record_result_flow", sql.RECORD_RESULT_FLOW)
REFRESH_FLOWS = Prepared("qe_refresh_flows", sql.REFRESH_FLOWS)
RELEASE_COUNTED = Prepared("qe_release_counted", sql.RELEASE_COUNTED)
MARK_UPSTREAM_FAILED = Prepared("qe_mark_upstream_failed", sql.MARK_UPSTREAM_FAILED)


def refused(exc: BaseException) -> bool:
    """Whether Postgres (or psycopg, before sending) refused the data of a statement:
    SQLSTATE class 22 or 23, or text that cannot be encoded. Sent again, it fails again."""
    return isinstance(exc, psycopg.DataError | psycopg.IntegrityError | UnicodeError)


def why_refused(exc: BaseException) -> str:
    sqlstate = getattr(exc, "sqlstate", None)
    text = " ".join(str(exc).split())[:300]
    return storable(f"{sqlstate}: {text}" if sqlstate else text)


async def settle_one_by_one(
    lane: ReconnectingConnection,
    outcomes: list[Outcome],
    progress: dict[int, tuple[int, float, str]],
    *,
    chunk: int,
    worker_id: str,
    settled: Settled,
) -> None:
    """Settle each outcome alone, so that only one Postgres refuses is affected: that
    job is dead-lettered with an engine error naming what was refused."""
    for outcome in outcomes:
        job_id = outcome.execution.job_id
        report = progress.get(job_id)
        try:
            await settle_alone(lane, outcome, report, chunk=chunk, settled=settled)
            continue
        except (psycopg.Error, UnicodeError) as exc:
            if not refused(exc):
                log.exception("job %s: settle failed; it comes back after its lease", job_id)
                continue
            reason = why_refused(exc)
        log.error("job %s: Postgres refused its outcome (%s); dead-lettering it", job_id, reason)
        execution = outcome.execution
        failure = Outcome(
            "failed",
            execution,
            error=error_json(
                execution.attempt,
                "queue_engine.OutcomeRefused",
                f"Postgres refused to store this job's outcome ({outcome.kind}): {reason}. "
                "The job is dead-lettered with this error instead; its handler's "
                "logs show what it did.",
                "",
                worker_id,
            ),
        )
        try:
            await settle_alone(lane, failure, None, chunk=chunk, settled=settled)
        except (psycopg.Error, UnicodeError):
            log.exception("job %s: settle failed; it comes back after its lease", job_id)


async def settle_alone(
    lane: ReconnectingConnection,
    outcome: Outcome,
    report: tuple[int, float, str] | None,
    *,
    chunk: int,
    settled: Settled,
) -> None:
    batch = SettleBatch.of([outcome])
    batch.chunk = chunk
    if report is not None:
        batch.progress[outcome.execution.job_id] = report
    if not batch:
        return
    queues, _ = batch.runnable_now()
    sent: list[Script] = []

    async def action(conn: psycopg.AsyncConnection) -> None:
        script = Script()
        batch.settle_in(script)
        await script.run(conn)
        sent.append(script)

    # Once: a settle that committed before its connection broke must not be sent
    # again as if it had not (the next settle's fence would refuse it anyway).
    await lane.run(action, what="settle", attempts=1)
    if queues:
        with contextlib.suppress(psycopg.Error):
            await lane.run(
                lambda c: c.execute(sql.NOTIFY_QUEUES, [queues]), what="wake", attempts=1
            )
    settled(batch.hints(), bool(sent) and batch.left_children(sent[-1]))


@dataclass
class SettleBatch:
    """Finished jobs grouped by how they finished, as the arrays the settle SQL takes."""

    succeeded: list[Outcome] = field(default_factory=list)
    failed: list[Outcome] = field(default_factory=list)
    retry: list[Outcome] = field(default_factory=list)
    snoozed: list[Outcome] = field(default_factory=list)
    parked: list[Outcome] = field(default_factory=list)
    released: list[Outcome] = field(default_factory=list)
    cancelled: list[Outcome] = field(default_factory=list)
    results: list[Outcome] = field(default_factory=list)
    progress: dict[int, tuple[int, float, str]] = field(default_factory=dict)
    places: list[tuple[str, int, int]] = field(default_factory=list)  # name, sent, place
    # Children of one flow node the settle counts down (the worker's FLOW_RELEASE_CHUNK),
    # and the places of the statements that may leave FlowRelease rows for the rest.
    chunk: int = 1000
    marking: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        """Whether there is anything to settle."""
        return bool(
            self.succeeded
            or self.failed
            or self.retry
            or self.snoozed
            or self.parked
            or self.released
            or self.cancelled
            or self.results
            or self.progress
        )

    @functools.cached_property
    def flows(self) -> list[int]:
        """The flows whose state these outcomes may change (asked twice per settle)."""
        return sorted(
            {
                o.execution.flow_id
                for o in self.succeeded + self.failed + self.cancelled + self.results
                if o.execution.flow_id is not None
            }
        )

    @classmethod
    def of(cls, outcomes: list[Outcome]) -> SettleBatch:
        batch = cls()
        for outcome in sorted(outcomes, key=lambda o: o.execution.job_id):
            if outcome.kind == "dropped":
                execution = outcome.execution
                if execution.completed_in_transaction and (
                    outcome.result is not None or execution.flow_id is not None
                ):
                    batch.results.append(outcome)  # a flow node's children wait for it
                continue
            getattr(batch, outcome.kind).append(outcome)
        return batch

    def settle_in(self, script: Script) -> None:
        """Add the settle's transaction to `script`, and the refresh of its flows."""
        if self:
            script.raw("BEGIN")
            self.add_to(script)
            script.raw("COMMIT")
        self.refresh_in(script)

    def refresh_in(self, script: Script) -> None:
        """Add what follows the settle's commit: the refresh of its flows."""
        if self.flows:
            # Again after the commit, with a fresh snapshot: two workers settling the
            # last nodes of a flow at once each see the other's node still live inside
            # their transactions, and neither would end the flow. The refresh that
            # starts last sees both commits.
            script.add(REFRESH_FLOWS, [self.flows])
            script.add(RELEASE_COUNTED, [self.flows])

    def add_to(self, script: Script) -> None:
        """Add the settle statements to a transaction `script` has begun: the progress
        not flushed yet, then SETTLE_STEPS in their order, each that has jobs to settle,
        then the refresh of the flows they touch."""
        self.places = []
        self.marking = []
        if self.progress:
            ids = sorted(self.progress)
            params: dict[str, Any] = {
                "ids": ids,
                "tokens": [self.progress[i][0] for i in ids],
                "fractions": [self.progress[i][1] for i in ids],
                "messages": [self.progress[i][2] for i in ids],
            }
            self.places.append(("progress", 0, script.add(PROGRESS, params)))
        for step in SETTLE_STEPS:
            items = step.outcomes(self)
            if not items:
                continue
            params = {"ids": [o.execution.job_id for o in items]}
            if step.tokens:
                params["tokens"] = [o.execution.token for o in items]
            for name, attribute in step.columns:
                params[name] = [getattr(o, attribute) for o in items]
            if step.marks:
                params["chunk"] = self.chunk
            place = script.add(step.statement, params, rows=step.marks)
            self.places.append((step.name, len(items) if step.counts else 0, place))
            if step.marks:
                self.marking.append(place)
        if self.flows:
            script.add(REFRESH_FLOWS, [self.flows])

    def runnable_now(self) -> tuple[list[str], bool]:
        """For sql.WAKE_LEFT: the queues of the jobs this settle makes runnable at once,
        and whether it counts down flow children (whose queues the settle notes itself)."""
        queues = sorted(
            {o.execution.queue for o in self.retry + self.snoozed + self.released if o.delay <= 0}
        )
        released = any(o.execution.flow_id is not None for o in self.succeeded + self.results)
        return queues, released

    def hints(self) -> list[str]:
        """The console's hints for these outcomes (ids only), MAX_EVENT_IDS jobs each."""
        changed = changed_outcomes(self)
        if not changed:
            return []
        queues = sorted({o.execution.queue for o in changed})
        flows = sorted({o.execution.flow_id for o in changed if o.execution.flow_id is not None})
        ids = [o.execution.job_id for o in changed]
        return [
            json.dumps(
                {
                    "type": "jobs",
                    "ids": ids[i : i + MAX_EVENT_IDS],
                    "queues": queues,
                    "flows": flows[:MAX_EVENT_IDS] if i == 0 else [],
                }
            )
            for i in range(0, len(ids), MAX_EVENT_IDS)
        ]

    def left_children(self, script: Script) -> bool:
        """Whether this settle left children of a flow node to count in chunks."""
        return any(row[-1] for place in self.marking for row in script.rows(place))

    def report(self, logger: logging.Logger, script: Script) -> None:
        stale: dict[str, int] = defaultdict(int)
        for name, sent, place in self.places:
            rowcount = script.rowcount(place)
            if (
                name not in ("results", "flow", "progress", "upstream", "mailboxes", "mailed")
                and 0 <= rowcount < sent
            ):
                stale[name] += sent - rowcount
        for name, count in stale.items():
            logger.info(
                "%d %s job(s) were no longer ours (cancelled, rescued, or settled by "
                "a try whose commit went through unseen): left as is",
                count,
                name,
            )


def changed_outcomes(batch: SettleBatch) -> list[Outcome]:
    return (
        batch.succeeded
        + batch.failed
        + batch.retry
        + batch.snoozed
        + batch.parked
        + batch.released
        + batch.cancelled
    )


@dataclass(frozen=True)
class SettleStep:
    """One statement of the settle: the outcomes it settles (none: it is left out), and
    what it takes beside their ids: their tokens (the fence of the attempt they belong
    to) and the columns of `Outcome` it names, each as the array parameter it fills."""

    name: str  # as SettleBatch.report and the places name it
    statement: Prepared
    outcomes: Callable[[SettleBatch], list[Outcome]]
    columns: tuple[tuple[str, str], ...] = ()  # (parameter, Outcome attribute)
    tokens: bool = True
    counts: bool = True  # whether its rows are the outcomes it settles (in places)
    # Counts a flow node's children down, SettleBatch.chunk at a time, and may leave
    # FlowRelease rows for the rest of a big fan-out.
    marks: bool = False


def _plain(items: list[Outcome]) -> list[Outcome]:
    return [o for o in items if o.execution.flow_id is None]


def _in_flows(items: list[Outcome]) -> list[Outcome]:
    return [o for o in items if o.execution.flow_id is not None]


RESULTS = (("results", "result"),)

# The settle's statements, in the transaction's order.
SETTLE_STEPS: tuple[SettleStep, ...] = (
    SettleStep("succeeded", SETTLE_SUCCEEDED, lambda b: _plain(b.succeeded), RESULTS),
    SettleStep(
        "flow", SETTLE_SUCCEEDED_FLOW, lambda b: _in_flows(b.succeeded), RESULTS, marks=True
    ),
    SettleStep("failed", SETTLE_FAILED, lambda b: b.failed, (("errors", "error"),)),
    SettleStep(
        "retried", SETTLE_RETRY, lambda b: b.retry, (("delays", "delay"), ("errors", "error"))
    ),
    SettleStep(
        "snoozed",
        SETTLE_SNOOZED,
        lambda b: b.snoozed,
        (("delays", "delay"), ("payloads", "payload")),
    ),
    # After the mailboxes' locks: a signal being sent now commits first.
    SettleStep("mailboxes", LOCK_MAILBOXES, lambda b: b.parked, tokens=False, counts=False),
    SettleStep(
        "parked", SETTLE_PARKED, lambda b: b.parked, (("untils", "until"), ("waits", "payload"))
    ),
    # A statement of its own: its snapshot sees the signals sent meanwhile.
    SettleStep("mailed", WAKE_MAILED, lambda b: b.parked, tokens=False, counts=False),
    SettleStep("released", RELEASE, lambda b: b.released),
    SettleStep("cancelled", SETTLE_CANCELLED, lambda b: b.cancelled),
    SettleStep("results", RECORD_RESULT, lambda b: _plain(b.results), RESULTS, tokens=False),
    SettleStep(
        "results",
        RECORD_RESULT_FLOW,
        lambda b: _in_flows(b.results),
        RESULTS,
        tokens=False,
        marks=True,
    ),
    # In the same transaction: what waits on a dead node never counts as waiting.
    SettleStep(
        "upstream",
        MARK_UPSTREAM_FAILED,
        lambda b: _in_flows(b.failed + b.cancelled),
        tokens=False,
        counts=False,
    ),
)
