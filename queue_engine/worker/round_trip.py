"""The lanes' round trips (worker/lanes.py): what the last claims said, which decides how
the next one is sent (ClaimState), and one settle-and-claim message (RoundTrip)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.worker.options import WorkerOptions
from queue_engine.worker.script import Prepared, Script
from queue_engine.worker.settle import SettleBatch
from queue_engine.worker.weights import QueueWeights

WAKE_LEFT = Prepared("qe_wake_left", sql.WAKE_LEFT)
RELEASE_COUNTED_NOTED = Prepared("qe_release_counted_noted", sql.RELEASE_COUNTED_NOTED)
COUNT_DOWN_CLAIM = Prepared("qe_count_down_claim", sql.COUNT_DOWN_CLAIM)

# After a claim of a fan-out's children found every range taken by other claims, the
# seconds before a lane tries again (sooner if a claim of available jobs finds none).
RELEASE_RETRY = 0.01

Row = tuple[Any, ...]


@dataclass
class ClaimState:
    """How a worker's lanes claim, from what the last claim met (sql.CLAIM's markers).

    - `serial`: a queue with limits was in sight. The worker sends one claim at a time:
      its lanes would only wait for each other at the queue's lock, each with a smaller
      share of the room, and the lane that lost the race could leave the job at the
      head of the queue to wait behind the next one. The other lane settles meanwhile,
      and the claim is for all the worker's free slots, not a lane's share: one claim
      of twice the jobs pays for the queue's turn and its count once. Until the first
      claim says otherwise, claims take turns.
    - `full`: a fair queue was in sight (the `fair` marker): the full claim, which
      the plain claim and the one without fair share pass it over for (but no turns
      on a lock unless it has caps: `serial`). Until the first claim says otherwise,
      claims are full.
    - `backlog`: the last claim came back with all it asked for.
    """

    serial: bool = True
    full: bool = True
    backlog: bool = False
    # A fan-out's children are left to count (FlowRelease rows): the next claim counts
    # them down and takes them (sql.COUNT_DOWN_CLAIM), not before `release_after`.
    releasing: bool = False
    release_after: float = 0.0
    claiming: int = 0  # claims on their way
    freed_meanwhile: int = 0  # settles sent while a claim was on its way

    def merged(self, want: int, alone: list[str] | None) -> bool:
        """Whether the settle and the claim share one transaction: only while no queue
        with limits is in sight, so that the claim is the plain one (sql.CLAIM_PLAIN),
        which reports a queue with limits instead. A claim alone is never merged: the
        plain claim would pass over its queue if that queue has limits."""
        return bool(want) and not (self.serial or self.full) and alone is None

    def another_claim_suffices(self, want: int, outcomes: bool) -> bool:
        """Another lane's claim is on its way, this one has nothing to settle, and the
        last claim came back short (the queues had run dry): a hint makes one claim, not
        one per lane. That claim wakes this lane when it comes back full. Through a
        backlog the lanes claim side by side."""
        return bool(want and self.claiming and not outcomes and not self.backlog)

    def settles_only(self, want: int) -> bool:
        """The other lane's claim is on its way and claims take turns: settle only."""
        return bool(want and self.claiming and self.serial)

    def release_next(self, claimed: int, want: int, markers: set[str], now: float) -> None:
        """After a claim of available jobs: one that came back short, while a fan-out's
        children are left to count, is followed by a claim of those."""
        if "release" in markers and claimed < want and now >= self.release_after:
            self.releasing = True

    def released(self, counted: int, taken: int, want: int, now: float) -> bool:
        """After a claim of a fan-out's children: it goes on while it takes all it wants;
        else the claim of available jobs is next (it counted some down as available, or
        reached the end of a range). Whether to claim again at once: with no range free
        (the other lanes count them), in a moment (RELEASE_RETRY), as that claim would
        find none either; nothing else would wake the worker then (taken as they are
        released, the children send no wake-up)."""
        self.releasing = counted > 0 and taken >= want
        self.backlog = taken >= want
        if not counted:
            self.release_after = now + RELEASE_RETRY
        return counted > 0

    def passed_over(self, markers: set[str], merged: bool) -> bool:
        """Whether the claim passed over a queue that the next claim takes: the plain
        claim a queue with limits or a fair one, the claim without shares a fair one."""
        if merged:
            return bool(markers & {"limited", "fair"})
        return not self.full and "fair" in markers

    def heard(self, markers: set[str]) -> None:
        """The claim's markers: how the next one goes."""
        self.serial = "limited" in markers
        self.full = "fair" in markers


@dataclass
class RoundTrip:
    """One message: the settle of `batch` and, with `want`, a claim (`claim`, its
    parameters), in one transaction if `merged`, else the settle's commit first; and the
    wake-ups for what the settle made runnable. Sent again on a broken connection, it
    first looks for the rows an earlier try's claim took (its commit may have gone
    through unseen)."""

    batch: SettleBatch
    claim: dict[str, Any]
    statement: Prepared
    want: int
    merged: bool
    wake_queues: list[str]
    wake_released: bool
    # The claim counts down a fan-out's children (sql.COUNT_DOWN_CLAIM): the joins it
    # counted go to RELEASE_COUNTED after its commit.
    counts_down: bool = False
    # Whether the worker is stopping: asked as the message goes out, since it may wait
    # for its connection (opened, or opened again) long after `want` was decided.
    stopping: Callable[[], bool] | None = None
    tries: int = 0
    sent: list[Script] = field(default_factory=list)  # the message that went through

    async def __call__(self, conn: psycopg.AsyncConnection) -> list[Row]:
        self.tries += 1
        if self.tries > 1 and self.want:
            cur = await conn.execute(sql.RECOVER_CLAIM, self.claim)
            recovered = await cur.fetchall()
            if recovered:
                return recovered
        if self.want and self.stopping is not None and self.stopping():
            # "No more claims" was logged: a job enqueued since stays for the other
            # workers. The settle still goes, apart, as there is no claim to share it.
            self.want, self.merged, self.counts_down = 0, False, False
        script = Script()
        place = self._compose(script)
        await script.run(conn)
        self.sent.append(script)
        return script.rows(place) if place is not None else []

    def _compose(self, script: Script) -> int | None:
        """The statements, in order; the claim's place among them, if it claims.

        Apart (not merged), the settle commits first and the claim after it in a
        transaction of its own: both in one message, so one round trip still. A settle
        frees room under its queue's cap and its jobs' group caps, and counts down the
        children of flow nodes (a fan-in's join: one row every settling lane needs).
        Committed before the claim, it frees that room and that row for every claimer
        now, not after this claim has waited its turn for the queue's lock. Merged,
        where no limits make claims wait their turn: one transaction, one commit, and
        the claim takes the jobs the settle has just made runnable (a flow node's
        child, a retry)."""
        batch, place = self.batch, None
        wakes = bool(self.wake_queues or self.wake_released)
        if not self.merged:
            batch.settle_in(script)
        if self.want or wakes:
            script.raw("BEGIN")
            if not self.merged:
                # The claim's own transaction: see sql.CLAIM_COMMIT.
                script.raw(sql.CLAIM_COMMIT)
            if self.merged and batch:
                batch.add_to(script)
            if self.want:
                for setting in sql.CLAIM_SETTINGS:
                    script.raw(setting)
                place = script.add(self.statement, self.claim, rows=True)
            if wakes:
                # After the claim: the others are woken only for what it left.
                script.add(WAKE_LEFT, {"queues": self.wake_queues})
                if self.wake_released:
                    script.raw(sql.CLEAR_RELEASED)
            script.raw("COMMIT")
            if self.want and self.counts_down:
                script.add(RELEASE_COUNTED_NOTED, [])
        if self.merged:
            batch.refresh_in(script)
        return place


def claim_request(
    options: WorkerOptions,
    weights: QueueWeights,
    worker_id: str,
    want: int,
    alone: list[str] | None,
    token: int,
    floors: dict[str, Any],
    *,
    merged: bool,
    counts_down: bool,
    fair: bool = True,
) -> tuple[Prepared, dict[str, Any]]:
    """The claim statement a lane sends and its parameters: the plain claim while it is
    merged with the settle (no queue in sight has limits), else the full one, or the
    one without fair share while no fair queue is in sight (not `fair`; a claim alone
    is always full), each in the worker's weighted version if it has weights;
    COUNT_DOWN_CLAIM where it counts a fan-out's children down (`counts_down`)."""
    params = {
        **floors,
        # A claim alone looks only in the queues whose suspects' right it holds.
        "all_queues": not options.queues and alone is None,
        "queues": options.queues if alone is None else alone,
        "labels": options.labels,
        "limit": want,
        "alone": alone is not None,
        "worker": worker_id,
        "token": token,
        **weights.params(alone),
    }
    if counts_down:
        return COUNT_DOWN_CLAIM, {**params, "chunk": want, "weighted": bool(weights.weights)}
    return weights.statement(merged, fair or alone is not None), params
