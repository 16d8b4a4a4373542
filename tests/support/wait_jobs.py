"""Job kinds that wait for signals and sleep durably, for tests/worker/test_waits.py.

Every step's effect is a row in test_step_runs (tests/support/step_jobs.py), so the
tests count what ran, across parks, resumes and kills.
"""

from __future__ import annotations

import time
from typing import Any

from queue_engine import JobContext, job
from tests.support.step_jobs import effect


@job(kind="tests.wait_signal", queue="waits", max_attempts=3)
def wait_signal(
    ctx: JobContext, timeout: float | None = None, hang_after: bool = False, pause: float = 0
) -> Any:
    ctx.step("before", effect, ctx.job_id, "before", ctx.attempt)
    time.sleep(pause)  # the test sends a signal meanwhile
    payload = ctx.wait_for_signal("go", timeout=timeout)
    if hang_after and ctx.attempt == 1:  # the test kills the worker while this sleeps
        effect(ctx.job_id, "resumed", ctx.attempt)
        # The job's work, longer than any test.
        time.sleep(60)
    ctx.step("after", effect, ctx.job_id, "after", ctx.attempt)
    return payload


@job(kind="tests.two_signals", queue="waits")
def two_signals(ctx: JobContext) -> list[Any]:
    first = ctx.wait_for_signal("go")
    second = ctx.wait_for_signal("go")
    return [first, second]


@job(kind="tests.signal_or_default", queue="waits")
def signal_or_default(ctx: JobContext, timeout: float) -> Any:
    return ctx.wait_for_signal("go", timeout=timeout, default={"none": True})


@job(kind="tests.async_wait_signal", queue="waits")
async def async_wait_signal(ctx: JobContext) -> Any:
    return {"got": await ctx.await_for_signal("go")}


@job(kind="tests.durable_sleep", queue="waits")
def durable_sleep(ctx: JobContext, seconds: float) -> dict[str, Any]:
    ctx.step("before", effect, ctx.job_id, "before", ctx.attempt)
    ctx.sleep_for(seconds)
    ctx.step("after", effect, ctx.job_id, "after", ctx.attempt)
    return {"slept": seconds}


@job(kind="tests.echo_outputs", queue="flows")
def echo_outputs(ctx: JobContext) -> dict[str, Any]:
    """A flow node's parents' outputs, as it read them."""
    return dict(ctx.outputs)
