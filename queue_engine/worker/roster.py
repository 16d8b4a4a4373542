"""Which workers a wake-up is for: one hint wakes as few workers as its jobs need.

Every worker LISTENs on `qe_wake`, and Postgres delivers each notification to all of
them. If every worker claimed on every hint, one job enqueued into a fleet of twenty
idle workers would cost twenty claims, nineteen of them empty (a thundering herd). So a
hint says how many jobs it is about, and carries a ticket that every worker reads alike
(the lowest job id among them):

    qe_wake  "<ticket> <count> <hops> <priority> <run_at> <queue>"

Each worker knows the live workers that serve the queue (the ring: the registry, read
at every heartbeat, in id order) and its own place in it. A hint about `count` jobs is
for the `k = ceil(count / concurrency)` workers whose places follow the ticket, modulo
the ring's size; the rest ignore it. Consecutive tickets take turns round the ring.
The highest priority and the earliest run time of those jobs (microseconds since the
epoch; `-` when the sender does not know them) let every worker, woken or not, move
its claims' floor for the queue back before them (floors.py).

- A chosen worker with no free slot hands the hint to the next worker of the ring that
  had room at its last heartbeat (one NOTIFY, `hops` + 1; never more hops than the ring
  has workers).
- `count` 0 is for everyone: jobs that need labels (only some workers may take them),
  and every payload of another shape (a bare queue name, as `NOTIFY_QUEUES` and an
  operator's `NOTIFY qe_wake, 'queue'` send).
- Views of the ring differ for a heartbeat after a worker comes or goes: a hint may
  then wake two workers or none. None costs the job its wait for the next poll of any
  idle worker (each polls every `poll_interval`), which is why the polls stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Wake:
    ticket: int
    count: int  # 0: every worker
    hops: int
    queue: str
    # The jobs' highest priority and earliest run time (µs since the epoch), if known.
    first: tuple[int, int] | None = None

    @classmethod
    def parse(cls, payload: str) -> Wake:
        parts = payload.split(" ", 5)
        if len(parts) == 6:
            try:
                ticket, count, hops = int(parts[0]), int(parts[1]), int(parts[2])
                first = None if parts[3] == "-" else (int(parts[3]), int(parts[4]))
            except ValueError:
                pass
            else:
                return cls(ticket, max(count, 0), max(hops, 0), parts[5], first)
        return cls(0, 0, 0, payload)  # a bare queue name: every worker

    def payload(self) -> str:
        first = "- -" if self.first is None else f"{self.first[0]} {self.first[1]}"
        return f"{self.ticket} {self.count} {self.hops} {first} {self.queue}"


@dataclass(frozen=True)
class Member:
    id: str
    queues: tuple[str, ...]  # empty: every queue
    concurrency: int
    in_flight: int

    def serves(self, queue: str) -> bool:
        return not self.queues or queue in self.queues


class Roster:
    """The live workers as of this worker's last heartbeat, and the hints meant for it."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.members: list[Member] = []
        self._rings: dict[str, list[Member]] = {}

    def update(self, rows: list[tuple[Any, ...]]) -> None:
        """The registry's live workers: (id, queues, concurrency, in_flight) rows."""
        self.members = sorted(
            (Member(str(r[0]), tuple(r[1] or ()), max(1, int(r[2])), int(r[3])) for r in rows),
            key=lambda m: m.id,
        )
        self._rings = {}

    def ring(self, queue: str) -> list[Member]:
        ring = self._rings.get(queue)
        if ring is None:
            ring = self._rings[queue] = [m for m in self.members if m.serves(queue)]
        return ring

    def decide(self, wake: Wake, free: int) -> tuple[bool, Wake | None]:
        """Whether this worker claims for `wake`, and the hint it hands on, if any."""
        ring = self.ring(wake.queue)
        place = next((i for i, m in enumerate(ring) if m.id == self.worker_id), None)
        if wake.count == 0 or place is None:
            return True, None  # for everyone, or this worker is not in its own view yet
        n = len(ring)
        k = -(-wake.count // min(m.concurrency for m in ring))
        if k >= n:
            return True, None
        if (place - wake.ticket) % n >= k:
            return False, None  # another worker's turn
        if free > 0:
            return True, None
        if wake.hops + 1 >= n:
            return False, None  # round the whole ring: the others' settles and polls
        for step in range(1, n):
            other = (place + step) % n
            member = ring[other]
            if (other - wake.ticket) % n >= k and member.in_flight < member.concurrency:
                return False, Wake(other, 1, wake.hops + 1, wake.queue, wake.first)
        return False, None  # everyone is busy: their settles claim as slots free
