"""What the worker's parts share: the jobs in flight, the outcomes waiting to settle,
and the events that wake its loops."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from queue_engine.worker.floors import Floors

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution, Outcome


@dataclass(eq=False)
class Shared:
    inflight: dict[int, Execution] = field(default_factory=dict)
    # Finished jobs waiting for the next settle (a lane takes them all at once).
    outcomes: list[Outcome] = field(default_factory=list)
    # Set to wake the claim lanes: a finished job, a hint, a stop.
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # Set while jobs run: the flusher, the heartbeat and the idle watchdog sleep on it
    # when the worker is idle, so an idle worker wakes a few times a second at most.
    busy: asyncio.Event = field(default_factory=asyncio.Event)
    # Whether a claim may find work: cleared by a claim that came back short, set by
    # anything that may have made jobs runnable (a hint, a settle, a poll).
    maybe_more: bool = True
    # The shortest lease of the jobs claimed so far: the heartbeat beats well within it.
    min_lock: float = 60.0
    # Set when a settle left children of a big fan-out to count down in chunks.
    counting_down: asyncio.Event = field(default_factory=asyncio.Event)
    counting: bool = False
    # Where the claims of each queue start (floors.py): moved by claims, lowered by
    # the listener's wake-ups.
    floors: Floors = field(default_factory=Floors)

    # Counts wake(): a claim that was on its way when jobs arrived must not clear
    # maybe_more, as its snapshot may have missed them.
    woken: int = 0

    def wake(self) -> None:
        self.maybe_more = True
        self.woken += 1
        self.wakeup.set()
