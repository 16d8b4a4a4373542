"""The threads plain-function handlers run in, and what happens to one that outlives its
job's idle timeout: it is abandoned (Python cannot stop a thread) and its job settles
without it."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution

log = logging.getLogger("queue_engine.worker")


class HandlerThreads:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.pool = self._new_pool()
        # Executions whose plain function runs in a thread now, in flight or abandoned
        # (an idle timeout); changed by the threads themselves.
        self.running: set[Execution] = set()
        self._abandoned_in_pool = 0

    def _new_pool(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=self.concurrency * 2, thread_name_prefix="job")

    def returned(self, execution: Execution) -> None:
        """Called by the thread of an abandoned plain function when it returns at last."""
        log.info(
            "job %s: its abandoned handler returned; what it did is dropped "
            "(%d abandoned handler thread(s) left in this process)",
            execution.job_id,
            self.abandoned(),
        )

    def abandoned(self) -> int:
        return sum(1 for e in list(self.running) if e.cancel_reason == "idle timeout")

    def abandon(self, execution: Execution, timeout: float) -> None:
        """A plain function past its idle timeout: its job settles now without it."""
        log.warning(
            "job %s: idle for more than %ss; abandoning its handler thread "
            "(%d abandoned handler thread(s) in this process)",
            execution.job_id,
            timeout,
            self.abandoned(),
        )
        # Abandoned threads keep their place in the pool; once they fill its headroom
        # over the slots, new jobs get a new pool rather than wait for a free thread.
        self._abandoned_in_pool += 1
        if self._abandoned_in_pool >= self.concurrency:
            self.pool.shutdown(wait=False)
            self.pool = self._new_pool()
            self._abandoned_in_pool = 0

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
