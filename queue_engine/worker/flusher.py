"""The flusher: writes what handlers report (log lines, progress) in batches, and sends
the console's hints once the settles they describe have committed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg

from queue_engine import sql
from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.settle import MAX_EVENT_IDS, refused, why_refused
from queue_engine.worker.shared import Shared

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution

log = logging.getLogger("queue_engine.worker")

type Progress = dict[int, tuple[int, float, str]]  # job id: (token, fraction, message)


@dataclass(eq=False)
class Output:
    """What handlers and settles leave for the flusher to write or send."""

    logs: list[tuple[Any, ...]] = field(default_factory=list)
    progress: Progress = field(default_factory=dict)
    flushing: Progress = field(default_factory=dict)  # progress being written now
    # Console hints (NOTIFY payloads) for settles that have committed. The flusher
    # sends them, in a transaction of their own: a NOTIFY holds Postgres's global
    # notify lock from its transaction's pre-commit until the commit is flushed, so a
    # NOTIFY inside every settle would make all settles commit one at a time, each
    # waiting for the previous one's WAL flush.
    hints: list[str] = field(default_factory=list)

    def pending(self) -> bool:
        return bool(self.logs or self.progress or self.hints)


class Flusher:
    def __init__(self, output: Output, shared: Shared, aux: ReconnectingConnection) -> None:
        self.output = output
        self.shared = shared
        self.aux = aux

    async def idle(self) -> None:
        """Return at once while jobs run or output waits; else when a job starts."""
        if not self.shared.inflight and not self.output.pending():
            self.shared.busy.clear()
            await self.shared.busy.wait()

    async def loop(self) -> None:
        while True:
            await self.idle()
            await asyncio.sleep(0.05)
            if self.output.pending():
                # Shielded: a stop mid-flush must not drop the lines already taken.
                await asyncio.shield(self.flush())

    async def flush(self) -> None:
        """Write log lines and progress reports; then send the console's hints."""
        out = self.output
        logs, out.logs = out.logs, []
        progress, out.progress = out.progress, {}
        hints, out.hints = out.hints, []
        if not logs and not progress and not hints:
            return
        out.flushing = progress
        if logs or progress:
            job_ids = sorted({row[0] for row in logs} | set(progress))[:MAX_EVENT_IDS]
            hints.append(json.dumps({"type": "log" if logs else "progress", "ids": job_ids}))
            written: set[int] = set()
            try:
                await self.aux.run(
                    lambda conn: write_output(conn, logs, progress, written),
                    what="write logs",
                    attempts=3,
                )
            except (psycopg.Error, UnicodeError) as exc:
                if refused(exc):
                    await self._write_one_by_one(logs, progress, written, why_refused(exc))
                else:
                    log.warning("dropped %d log line(s) after repeated failures", len(logs))
            self._report_again(progress, written)
        # After the commit, in a transaction that writes nothing: no WAL flush to wait for
        # while holding the notify lock. Hints only: lost, the console catches up on its
        # next refresh.
        with contextlib.suppress(psycopg.Error):
            await self.aux.run(
                lambda conn: conn.execute(sql.NOTIFY_EVENTS, [hints]), what="hint", attempts=1
            )

    async def _write_one_by_one(
        self, logs: list[tuple[Any, ...]], progress: Progress, written: set[int], reason: str
    ) -> None:
        """Write a refused batch line by line, so only what Postgres refuses is affected:
        such a line is kept as a note saying so, a progress report is dropped."""
        log.warning("Postgres refused a batch of job output (%s); writing it line by line", reason)

        async def write(lines: list[tuple[Any, ...]], reports: Progress) -> None:
            done: set[int] = set()
            await self.aux.run(
                functools.partial(write_output, logs=lines, progress=reports, written=done),
                what="write logs",
                attempts=3,
            )
            written.update(done)

        for line in logs:
            try:
                await write([line], {})
            except (psycopg.Error, UnicodeError) as exc:
                if not refused(exc):
                    log.warning("job %s: dropped a log line after repeated failures", line[0])
                    continue
                note = f"[this line could not be stored: Postgres refused it ({why_refused(exc)})]"
                with contextlib.suppress(psycopg.Error):
                    await write([(*line[:-1], note)], {})
        for job_id, report in progress.items():
            with contextlib.suppress(psycopg.Error, UnicodeError):
                await write([], {job_id: report})

    def _report_again(self, progress: Progress, written: set[int]) -> None:
        """Progress the flush could not write (its row locked, PROGRESS_UNLOCKED) goes
        with the next flush, unless a newer report replaced it or the job has ended (its
        settle carried the report)."""
        inflight: Mapping[int, Execution] = self.shared.inflight
        for job_id, report in progress.items():
            execution = inflight.get(job_id)
            if (
                job_id not in written
                and job_id not in self.output.progress
                and execution is not None
                and execution.token == report[0]
            ):
                self.output.progress[job_id] = report


LOG_COLUMNS = ("job_ids", "attempts", "seqs", "streams", "levels", "ats", "texts")


async def write_output(
    conn: psycopg.AsyncConnection,
    logs: list[tuple[Any, ...]],
    progress: Progress,
    written: set[int],
) -> None:
    """Write log lines and progress reports in one transaction; `written` gets the jobs
    whose report was written (a report on a row another transaction holds is not)."""
    async with conn.transaction():
        if logs:
            columns = [list(c) for c in zip(*logs, strict=True)]
            await conn.execute(sql.INSERT_LOGS, dict(zip(LOG_COLUMNS, columns, strict=True)))
        if progress:
            ids = list(progress)
            cur = await conn.execute(
                sql.PROGRESS_UNLOCKED,
                {
                    "ids": ids,
                    "tokens": [progress[i][0] for i in ids],
                    "fractions": [progress[i][1] for i in ids],
                    "messages": [progress[i][2] for i in ids],
                },
            )
            written.clear()
            written.update(row[0] for row in await cur.fetchall())
