"""What runs, sampled while a test's workers run: a query read every 10 ms from a
connection of its own, in a thread."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg


class Sampler:
    """Samples running jobs per queue/group from its own connection while the test runs."""

    def __init__(self, conninfo: str, query: str) -> None:
        self.conninfo, self.query = conninfo, query
        self.samples: list[tuple[Any, ...]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            while not self.stop.is_set():
                self.samples.extend(conn.execute(self.query).fetchall())
                time.sleep(0.01)  # the sampling period, not a wait for a condition

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
