"""What a handler sees of its job: `ctx`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from queue_engine.durations import Seconds
from queue_engine.exceptions import LeaseLost
from queue_engine.payloads import dump_json
from queue_engine.worker import waits
from queue_engine.worker.steps import MISSING, Steps
from queue_engine.worker.waits import NO_DEFAULT

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution


NO_RESULT: Any = object()
T = TypeVar("T")
P = ParamSpec("P")


class AtomicBlock:
    """What `ctx.atomic()` yields: set `result` to record the job's return value with the
    block's commit, so that it survives a worker dying right after the block."""

    __slots__ = ("result",)

    def __init__(self) -> None:
        self.result: Any = NO_RESULT


class JobContext:
    """Handed to handlers that take a `ctx` parameter.

    Cheap to call from any thread: log lines and progress are buffered and
    written by the worker in batches.
    """

    def __init__(self, execution: Execution) -> None:
        self._execution = execution

    @property
    def job_id(self) -> int:
        return self._execution.job_id

    @property
    def attempt(self) -> int:
        return self._execution.attempt

    @property
    def max_attempts(self) -> int:
        return self._execution.max_attempts

    @property
    def queue(self) -> str:
        return self._execution.queue

    @property
    def kind(self) -> str:
        return self._execution.kind

    @property
    def meta(self) -> dict[str, Any]:
        return self._execution.meta_dict()

    @property
    def flow_id(self) -> int | None:
        return self._execution.flow_id

    @property
    def node_key(self) -> str | None:
        return self._execution.node_key

    @property
    def outputs(self) -> dict[str, Any]:
        """Return values of this flow node's succeeded parents, by node key."""
        text = self._execution.outputs
        return json.loads(text) if text else {}

    def spawn_into(
        self, join: str, job: Any, *args: Any, key: str | None = None, **kwargs: Any
    ) -> int:
        """Add a child that the join node `join` must also wait for (dynamic join).

        Allowed while this job runs and holds an edge into `join`; the child may
        spawn into the join in turn. Commits before returning. Returns the job id.
        """
        from queue_engine.flows.runtime import spawn_into

        return spawn_into(self._execution, join, [(job, args, kwargs, key)])[0]

    def fan_out_into(self, join: str, job: Any, calls: list[dict[str, Any]]) -> list[int]:
        """`spawn_into` for many children at once (one call = one dict of arguments)."""
        from queue_engine.flows.runtime import spawn_into

        return spawn_into(self._execution, join, [(job, (), call, None) for call in calls])

    async def aspawn_into(
        self, join: str, job: Any, *args: Any, key: str | None = None, **kwargs: Any
    ) -> int:
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.spawn_into, thread_sensitive=False)(
            join, job, *args, key=key, **kwargs
        )

    async def afan_out_into(self, join: str, job: Any, calls: list[dict[str, Any]]) -> list[int]:
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.fan_out_into, thread_sensitive=False)(join, job, calls)

    def step(self, name: str, func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run `func(*args, **kwargs)` once for this job, across its attempts.

        The result (JSON, checked as a payload is) is recorded as soon as the step returns;
        an attempt after a failure, a crash or a lost lease gets the recorded result back
        without running `func` again. Names are unique within a job. Inside `ctx.atomic()`
        the record commits with the block. Raises `StepError` for a repeated name or a
        result that is not JSON, and `LeaseLost` when the job was told to stop.
        """
        return self._steps().run(name, func, args, kwargs)  # type: ignore[no-any-return]

    @overload
    async def astep(
        self, name: str, func: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> T: ...

    @overload
    async def astep(
        self, name: str, func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T: ...

    async def astep(self, name: str, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """`step` for async handlers: `func` may be a coroutine function or a plain one."""
        return await self._steps().arun(name, func, args, kwargs)

    def wait_for_signal(
        self, name: str, timeout: Seconds | None = None, *, default: Any = NO_DEFAULT
    ) -> Any:
        """Return the payload of the next signal `name` sent to this job
        (`queue_engine.send_signal`), parking the job until one comes.

        While parked the job holds no slot, thread, connection or lease; it resumes by
        running again from the start, its finished steps and waits returning what they
        returned before. Each signal is delivered to one wait exactly once. After
        `timeout` (or an operator's "wake now") raises `SignalTimeout`, or returns
        `default` when one is given. For plain-function handlers; `await_for_signal` in
        async ones.
        """
        wait, stored = waits.begin_signal_wait(self._steps(), name)
        if stored is not MISSING:
            return waits.recorded_payload(stored)
        taken, payload = waits.consume_signal(wait, name)
        if taken:
            return payload
        return waits.after_no_signal(wait, name, timeout, default)

    async def await_for_signal(
        self, name: str, timeout: Seconds | None = None, *, default: Any = NO_DEFAULT
    ) -> Any:
        """`wait_for_signal` for async handlers."""
        wait, stored = waits.begin_signal_wait(self._steps(), name)
        if stored is not MISSING:
            return waits.recorded_payload(stored)
        taken, payload = await waits.aconsume_signal(wait, name)
        if taken:
            return payload
        if wait.ended() is not None and default is not NO_DEFAULT:
            return await waits.arecord_end(wait, {"timeout": True, "payload": default})
        return waits.after_no_signal(wait, name, timeout, default)

    def sleep_until(self, when: datetime) -> None:
        """Park the job until `when` (an aware datetime), using no attempt; it resumes by
        running again, as after `wait_for_signal`. An operator's "wake now" ends it early."""
        wait = waits.begin_sleep(self._steps(), when, None)
        if wait is not None:
            waits.record_end(wait, waits.sleep_ended(wait))

    def sleep_for(self, duration: Seconds) -> None:
        """`sleep_until` now plus `duration` (seconds or a timedelta), counted from the
        first time the handler gets here."""
        wait = waits.begin_sleep(self._steps(), None, duration)
        if wait is not None:
            waits.record_end(wait, waits.sleep_ended(wait))

    async def asleep_until(self, when: datetime) -> None:
        wait = waits.begin_sleep(self._steps(), when, None)
        if wait is not None:
            await waits.arecord_end(wait, waits.sleep_ended(wait))

    async def asleep_for(self, duration: Seconds) -> None:
        wait = waits.begin_sleep(self._steps(), None, duration)
        if wait is not None:
            await waits.arecord_end(wait, waits.sleep_ended(wait))

    def _steps(self) -> Steps:
        execution = self._execution
        if execution.steps is None:
            execution.steps = Steps(execution)
        return execution.steps

    def log(self, message: str, *, level: str = "info") -> None:
        self._execution.write_log("log", str(message), level=level)

    def progress(self, fraction: float, message: str = "") -> None:
        """Report progress (0..1) and prove liveness to the idle watchdog."""
        self._execution.report_progress(min(max(float(fraction), 0.0), 1.0), message)

    def heartbeat(self) -> None:
        """Prove liveness: re-arms the idle timeout."""
        self._execution.touch()

    def is_cancelled(self) -> bool:
        return self._execution.cancelled.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep in a plain-function handler, waking early on cancel; True if cancelled."""
        return self._execution.cancelled.wait(seconds)

    @contextmanager
    def atomic(self) -> Iterator[AtomicBlock]:
        """Commit the ORM writes in this block together with the job's success.

        The job row is locked and checked to be still ours before the block runs,
        so a job whose lease was lost raises `LeaseLost` and its writes roll back,
        and a job can never be completed twice. Only for plain-function handlers.
        A result set on the block (`with ctx.atomic() as block: ... block.result = x`)
        commits with it; a value returned after the block is recorded later.
        """
        if threading.current_thread() is threading.main_thread() or self._execution.is_async:
            raise RuntimeError(
                "ctx.atomic() uses the Django ORM, which is synchronous: use it in a plain "
                "(def, not async def) handler."
            )
        from django.db import connection, transaction

        from queue_engine import sql

        self._refuse_if_told_to_stop()
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql.LOCK_OWN_JOB, [self.job_id, self._execution.token])
                row = cursor.fetchone()
                if row is None:
                    raise LeaseLost(f"job {self.job_id} is no longer held by this worker")
                if row[0]:  # an operator asked it to stop: nothing of it commits
                    self._execution.cancel("cancelled")
                    raise LeaseLost(f"job {self.job_id} was cancelled by an operator")
            block = AtomicBlock()
            yield block
            self._refuse_if_told_to_stop()
            result = None
            if block.result is not NO_RESULT:
                result = dump_json(block.result, what=f"{self.kind}: the atomic block's result")
            with connection.cursor() as cursor:
                cursor.execute(
                    sql.SETTLE_SUCCEEDED,
                    {
                        "ids": [self.job_id],
                        "tokens": [self._execution.token],
                        "results": [result],
                    },
                )
                if cursor.fetchone() is None:
                    raise LeaseLost(f"job {self.job_id} is no longer held by this worker")
        self._execution.completed_in_transaction = True
        self._execution.touched_at = time.monotonic()

    def _refuse_if_told_to_stop(self) -> None:
        execution = self._execution
        if execution.cancelled.is_set():
            raise LeaseLost(
                f"job {self.job_id} was told to stop ({execution.cancel_reason}): "
                "nothing of this block commits"
            )
