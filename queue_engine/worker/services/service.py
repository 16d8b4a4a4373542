"""The one shape of a leader service.

A service has a `name` (unique among the leader's services, used in logs and events),
an `interval` (seconds between two runs; 0 runs it on every leader tick), one run step
`run(conn)` that does a bounded amount of work in short transactions on the leader's
connection and says whether more work is waiting, and `close()`, which stops whatever
the service runs in the background. `runner.Every` decides when a step runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import psycopg


class Service(ABC):
    name: ClassVar[str]
    interval: ClassVar[float]

    @abstractmethod
    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        """One step; True when more work is waiting (the runner runs it again at once)."""

    async def close(self) -> None:  # noqa: B027  # not abstract: most need nothing
        """Stop what the service runs in the background; most run nothing there."""
