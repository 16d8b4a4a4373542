"""Where a worker's claims of each queue start: the queue's floor, the place in the claim
index (priority, run time, id) of the last job this worker claimed there.

A claimed job's entry stays in the claim index until vacuum removes it. A claim that
walks the index from its head visits the row of every such entry to find it taken: a
few while vacuum keeps up, but every job claimed since the start of the oldest open
transaction while one holds vacuum back (a report, an idle-in-transaction session, a
stuck migration). After a minute of that at 10,000 jobs a second, each claim would
read tens of thousands of pages. From its floor, a claim reads none of them.

What makes this safe:
- Jobs that become runnable before a floor (a higher priority, an earlier run time: a
  promoted scheduled job, a transaction that committed after later ones, a flow's
  child of higher priority) come with a wake-up naming their highest priority and
  earliest run time. Every worker lowers its floor to it, whether or not the wake-up
  is for it (roster.Wake.first). A wake-up that does not say (a bare queue name, as the
  operator's actions and the rescue of expired leases send) drops the queue's floor.
- A floor moves no further than the first job whose wake-up came while the claim that
  moves it was on its way: that job may have committed after the claim's snapshot.
- Queues with limits (a cap, a rate limit, group caps) claim without floors (sql.CLAIM):
  a job their limits pass over must be seen again when they let it through.
- The rest (a row another worker's claim had locked, then rolled back): a claim without
  floors every FLOORLESS_EVERY seconds, and at every poll of an idle worker. Such a
  claim walks every entry the floors skip, seconds of work while vacuum is held back:
  after one that took t seconds, the next waits at least LOOK_BEHIND_SPACING * t, and
  polls keep their floors while the last took more than CHEAP.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from queue_engine import sql

FLOORLESS_EVERY = 5.0
LOOK_BEHIND_SPACING = 50  # a claim without floors takes at most 1/50 of a lane's time
CHEAP = 0.05  # seconds
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_ID = 2**63 - 1

type Key = tuple[int, datetime, int]  # priority, run_at, id


def order(key: Key) -> tuple[int, datetime, int]:
    """A key in the claim index's order (priority descending, then run time, then id)."""
    return (-key[0], key[1], key[2])


class Floors:
    def __init__(self) -> None:
        self.keys: dict[str, Key] = {}
        # For each claim on its way, per queue, the first job a wake-up named since it
        # was sent (None: a wake-up that did not say where; None for all of them: the
        # listener reconnected, and wake-ups may have been missed).
        self.meanwhile: dict[int, dict[str, Key | None] | None] = {}
        self._claims = 0
        self.look_behind = False  # the next claim goes without floors (a poll)
        self.next_look = time.monotonic() + FLOORLESS_EVERY
        self.looking: dict[int, float] = {}  # claims without floors on their way: sent at
        self.look_cost = 0.0  # seconds the last claim without floors took

    def for_claim(self, alone: bool) -> tuple[dict[str, Any], int]:
        """A claim about to be sent: its floor parameters (none, for a claim without
        floors), and its number (for claimed() or dropped())."""
        self._claims += 1
        self.meanwhile[self._claims] = {}
        now = time.monotonic()
        polled, self.look_behind = self.look_behind, False
        if (
            alone
            or not self.keys
            or (now >= self.next_look and not self.looking)
            or (polled and self.look_cost <= CHEAP)
        ):
            self.looking[self._claims] = now
            self.next_look = now + FLOORLESS_EVERY
            return dict(sql.NO_FLOORS), self._claims
        keys = list(self.keys.items())
        return (
            {
                "floor_queues": [q for q, _ in keys],
                "floor_priorities": [k[0] for _, k in keys],
                "floor_run_ats": [k[1] for _, k in keys],
                "floor_ids": [k[2] for _, k in keys],
            },
            self._claims,
        )

    def dropped(self, claim: int) -> None:
        """A claim that took nothing (it failed, or was not sent)."""
        self.meanwhile.pop(claim, None)
        self._looked(claim)

    def _looked(self, claim: int) -> bool:
        """Whether `claim` went without floors; if so, when the next one may."""
        sent = self.looking.pop(claim, None)
        if sent is None:
            return False
        now = time.monotonic()
        self.look_cost = now - sent
        self.next_look = now + max(FLOORLESS_EVERY, LOOK_BEHIND_SPACING * self.look_cost)
        return True

    def claimed(self, claim: int, rows: Iterable[tuple[Any, ...]]) -> None:
        """After a claim: each queue's floor moves to the last job it took there (rows of
        sql.CLAIM: id, kind, queue, ..., priority, run_at), or to the first job a
        wake-up named meanwhile if that comes before. After a claim without floors,
        which may have taken jobs behind a floor and stopped short of it, the floor
        moves there even if that is back."""
        meanwhile = self.meanwhile.pop(claim, {})
        floorless = self._looked(claim)
        if meanwhile is None:
            return
        last: dict[str, Key] = {}
        for row in rows:
            key: Key = (row[-2], row[-1], row[0])
            seen = last.get(row[2])
            if seen is None or order(key) > order(seen):
                last[row[2]] = key
        for queue, key in last.items():
            if queue in meanwhile:
                first = meanwhile[queue]
                if first is None:
                    self.keys.pop(queue, None)
                    continue
                key = min(key, first, key=order)
            floor = self.keys.get(queue)
            if floorless or floor is None or order(key) > order(floor):
                self.keys[queue] = key

    def lower(self, queue: str, first: tuple[int, int] | None) -> None:
        """Jobs became runnable in `queue`, the first of them at `first` (priority, run
        time in µs since the epoch) or, if None, anywhere."""
        key: Key | None = None
        if first is not None:
            priority, micros = first
            key = (priority, EPOCH + timedelta(microseconds=micros - 1), MAX_ID)
        for seen in self.meanwhile.values():
            if seen is None:
                continue
            if queue in seen:
                earlier = seen[queue]
                seen[queue] = (
                    None if key is None or earlier is None else min(earlier, key, key=order)
                )
            else:
                seen[queue] = key
        floor = self.keys.get(queue)
        if floor is None:
            return
        if key is None:
            del self.keys[queue]
        elif order(key) < order(floor):
            self.keys[queue] = key

    def forget(self) -> None:
        """Wake-ups may have been missed (the listener reconnected): no floors."""
        self.keys.clear()
        for claim in self.meanwhile:
            self.meanwhile[claim] = None
