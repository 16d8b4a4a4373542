"""Wait for a job's or a flow's end: `job_result`, `ajob_result`, `flow_result`,
`aflow_result`.

Each opens a connection of its own that LISTENs to the console's hints (qe_events),
which every settle and operator action sends after its commit, and reads the job or
flow again only when a hint names it. Hints are best effort (a worker killed between
its commit and its hint sends none), so the read is also repeated every RECHECK
seconds while nothing comes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.connections import conninfo
from queue_engine.durations import Seconds, to_seconds
from queue_engine.exceptions import (
    FlowFailed,
    JobFailed,
    ResultTimeout,
    UnknownIdError,
)

RECHECK = 5.0  # seconds between reads while no hint names the job or flow
FULL_HINT = 200  # a hint naming this many ids may have left some out (settle.MAX_EVENT_IDS)


@dataclass(frozen=True, slots=True)
class Watch:
    """What one call waits for: a job or a flow, by id."""

    what: str  # "job" or "flow"
    id: int

    @property
    def statement(self) -> str:
        return sql.JOB_RESULT if self.what == "job" else sql.FLOW_RESULT

    def concerns(self, payload: str) -> bool:
        """Whether a hint may be about this job or flow."""
        try:
            hint = json.loads(payload)
        except ValueError:
            return False
        if not isinstance(hint, dict) or hint.get("type") != "jobs":
            return False
        ids = hint.get("ids") or []
        if self.what == "job":
            return self.id in ids or len(ids) >= FULL_HINT
        # A settle names the flows it may end; an operator's change names only jobs.
        return "flows" not in hint or self.id in hint["flows"] or len(ids) >= FULL_HINT

    def answer(self, row: tuple[Any, ...] | None) -> tuple[bool, Any]:
        """(ended, value) from the statement's row; raises for a failure or no such id."""
        if row is None:
            raise UnknownIdError(
                f"{self.what} {self.id} does not exist (or retention removed its history)"
            )
        state, value, failure = row
        if state in ("live", "running"):
            return False, None
        if state == "succeeded":
            return True, value
        if self.what == "job":
            raise JobFailed(self.id, state, failure)
        raise FlowFailed(self.id, state, failure or [])


def _deadline(timeout: Seconds | None) -> float | None:
    seconds = to_seconds(timeout)
    return None if seconds is None else time.monotonic() + seconds


def _next_wait(watch: Watch, deadline: float | None, timeout: Seconds | None) -> float:
    if deadline is None:
        return RECHECK
    left = deadline - time.monotonic()
    if left <= 0:
        raise ResultTimeout(f"{watch.what} {watch.id} had not ended after {to_seconds(timeout)}s")
    return min(left, RECHECK)


def _conninfo() -> str:
    return conninfo(session=True, application_name="queue_engine result")


def _wait(watch: Watch, timeout: Seconds | None) -> Any:
    deadline = _deadline(timeout)
    with psycopg.connect(_conninfo(), autocommit=True) as conn:
        conn.execute("LISTEN qe_events")  # before the first read: no end goes unheard
        while True:
            ended, value = watch.answer(conn.execute(watch.statement, {"id": watch.id}).fetchone())
            if ended:
                return value
            for note in conn.notifies(timeout=_next_wait(watch, deadline, timeout)):
                if watch.concerns(note.payload):
                    break


async def _await(watch: Watch, timeout: Seconds | None) -> Any:
    deadline = _deadline(timeout)
    async with await psycopg.AsyncConnection.connect(_conninfo(), autocommit=True) as conn:
        await conn.execute("LISTEN qe_events")
        while True:
            cursor = await conn.execute(watch.statement, {"id": watch.id})
            ended, value = watch.answer(await cursor.fetchone())
            if ended:
                return value
            async for note in conn.notifies(timeout=_next_wait(watch, deadline, timeout)):
                if watch.concerns(note.payload):
                    break


def job_result(job_id: int, timeout: Seconds | None = None) -> Any:
    """The result of job `job_id` once it has succeeded, waiting (up to `timeout`
    seconds, or for ever) for it to end. Raises `JobFailed` (with its last error) if it
    died or was cancelled, `ResultTimeout` after `timeout`, and `UnknownIdError` for an
    id that names no job."""
    return _wait(Watch("job", int(job_id)), timeout)


async def ajob_result(job_id: int, timeout: Seconds | None = None) -> Any:
    """`job_result` for async code (an async view, an async handler)."""
    return await _await(Watch("job", int(job_id)), timeout)


def flow_result(flow_id: int, timeout: Seconds | None = None) -> dict[str, Any]:
    """The outputs of flow `flow_id`'s leaves (its nodes no other node waits for), by
    node key, once it has succeeded. Raises `FlowFailed` (with its dead and cancelled
    nodes' errors) if it failed or was cancelled, `ResultTimeout` after `timeout`, and
    `UnknownIdError` for an id that names no flow."""
    return _wait(Watch("flow", int(flow_id)), timeout)  # type: ignore[no-any-return]


async def aflow_result(flow_id: int, timeout: Seconds | None = None) -> dict[str, Any]:
    """`flow_result` for async code."""
    return await _await(Watch("flow", int(flow_id)), timeout)  # type: ignore[no-any-return]
