"""Waits inside a handler: `ctx.wait_for_signal`, `ctx.sleep_until`, `ctx.sleep_for`.

A wait that cannot return yet raises Parked: the attempt ends without being counted,
and the settle parks the job (sql.SETTLE_PARKED) until a signal, its deadline or an
operator wakes it. The job then runs again from the start: the waits and steps it
passed are durable steps, named `signal:<name>#<n>` and `sleep#<n>` (the n-th of that
name in the attempt), so they return what they returned before without waiting again.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from queue_engine import sql
from queue_engine.durations import Seconds, to_seconds
from queue_engine.exceptions import LeaseLost, Parked, SignalTimeout
from queue_engine.waits import check_name
from queue_engine.worker.steps import MISSING, WRITER, Steps

NO_DEFAULT: Any = MISSING


class Wait:
    """One wait as the handler reaches it: its step name, and what an earlier attempt of
    the job parked for it (the claimed meta.parked, when it names the same step)."""

    __slots__ = ("execution", "parked", "step", "steps")

    def __init__(self, steps: Steps, kind: str) -> None:
        self.steps = steps
        self.execution = steps.execution
        seen = steps.waits.get(kind, 0) + 1
        steps.waits[kind] = seen
        self.step = f"{kind}#{seen}"
        parked = self.execution.meta_dict().get("parked")
        self.parked: dict[str, Any] | None = (
            parked if isinstance(parked, dict) and parked.get("step") == self.step else None
        )

    def recorded(self) -> Any:
        return self.steps.lookup(self.step)

    def ended(self) -> str | None:
        """How this wait was ended while parked: "due" (its deadline), "woken" (an
        operator), or None (it was not, or not yet)."""
        if self.parked is None:
            return None
        if self.parked.get("woken"):
            return "woken"
        return "due" if self.parked.get("due") else None

    def until(self, fresh: datetime | None) -> datetime | None:
        """The wait's deadline: the one it parked with first, else `fresh`."""
        if self.parked is not None:
            kept = self.parked.get("until")
            return datetime.fromisoformat(kept) if kept else None
        return fresh

    def park(self, until: datetime | None, signal: str | None = None) -> Parked:
        since = self.parked.get("since") if self.parked else None
        wait = {
            "step": self.step,
            "signal": signal,
            "since": since or datetime.now(UTC).isoformat(),
            "until": until.isoformat() if until else None,
        }
        return Parked(wait, until)


def deadline_after(duration: Seconds) -> datetime:
    seconds = to_seconds(duration) or 0.0
    return datetime.now(UTC) + timedelta(seconds=max(seconds, 0.0))


# --- signals ------------------------------------------------------------------------


def begin_signal_wait(steps: Steps, name: str) -> tuple[Wait, Any]:
    """The wait for `name` and its recorded step ({"payload"} or {"timeout"}), or MISSING."""
    wait = Wait(steps, f"signal:{check_name(name)}")
    return wait, wait.recorded()


def consume_request(wait: Wait, name: str) -> dict[str, Any]:
    execution = wait.execution
    return {
        "job": execution.job_id,
        "token": execution.token,
        "name": name,
        "step": wait.step,
        "attempt": execution.attempt,
    }


def consume_signal(wait: Wait, name: str) -> tuple[bool, Any]:
    """Take the oldest signal `name` waiting for this job, recorded as the wait's step
    in the same transaction; (taken, payload). On the worker's step-writing connection,
    or inside the handler's own transaction when it has one open (as steps are)."""
    from django.db import connection

    params = consume_request(wait, name)
    if connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute(sql.CONSUME_SIGNAL, params)
            row = cursor.fetchone()
    else:
        row = WRITER.submit(params).result()
    return consumed(wait, row)


async def aconsume_signal(wait: Wait, name: str) -> tuple[bool, Any]:
    return consumed(wait, await asyncio.wrap_future(WRITER.submit(consume_request(wait, name))))


def consumed(wait: Wait, row: tuple[Any, ...]) -> tuple[bool, Any]:
    held, taken, payload = row
    execution = wait.execution
    if not held:
        raise LeaseLost(f"job {execution.job_id} is no longer held by this worker")
    if not taken:
        return False, None
    value = json.loads(payload)
    wait.steps.recorded[wait.step] = {"payload": value}
    execution.touch()
    return True, value


def after_no_signal(wait: Wait, name: str, timeout: Seconds | None, default: Any) -> Any:
    """No signal waits in the mailbox: time out (or return the default, recorded) if
    the wait's deadline has come or an operator woke it, else park."""
    how = wait.ended()
    if how is not None:
        if default is NO_DEFAULT:
            raise SignalTimeout(
                f"no signal {name!r} came "
                + ("before an operator woke the job" if how == "woken" else "in time")
            )
        return record_end(wait, {"timeout": True, "payload": default})
    fresh = deadline_after(timeout) if timeout is not None else None
    raise wait.park(wait.until(fresh), signal=name)


def record_end(wait: Wait, value: dict[str, Any]) -> Any:
    """Record how a wait ended as its step (sync handlers); returns the payload."""
    steps = wait.steps
    steps.record(wait.step, value, steps.encode(wait.step, value), datetime.now(UTC))
    return value.get("payload")


async def arecord_end(wait: Wait, value: dict[str, Any]) -> Any:
    steps = wait.steps
    await steps.arecord(wait.step, value, steps.encode(wait.step, value), datetime.now(UTC))
    return value.get("payload")


def recorded_payload(stored: dict[str, Any]) -> Any:
    return stored.get("payload") if isinstance(stored, dict) else stored


# --- durable sleep --------------------------------------------------------------------


def begin_sleep(steps: Steps, until: datetime | None, duration: Seconds | None) -> Wait | None:
    """The sleep's wait, or None when it is over (recorded, or its time already past)."""
    wait = Wait(steps, "sleep")
    if wait.recorded() is not MISSING:
        return None
    if until is None:
        until = deadline_after(duration or 0)
    elif until.tzinfo is None:
        raise ValueError("ctx.sleep_until() needs an aware datetime (with a time zone)")
    deadline = wait.until(until)
    if wait.ended() is None and deadline is not None and deadline > datetime.now(UTC):
        raise wait.park(deadline)
    return wait


def sleep_ended(wait: Wait) -> dict[str, Any]:
    return {"woke": wait.ended() or "due"}
