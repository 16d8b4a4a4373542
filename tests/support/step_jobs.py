"""Job kinds with durable steps (ctx.step), for tests/worker/test_steps.py.

Every step's effect is a row in test_step_runs (job_id, step, attempt), written in the
handler's own connection and committed at once: what ran is counted even when the
worker is killed right after.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from django.db import connection

from queue_engine import Backoff, JobContext, job

# `seq` orders the runs: rows written by different connections (each handler thread has
# its own) need not lie in the table in the order they were written.
STEP_RUNS_TABLE = (
    "CREATE TABLE test_step_runs (seq bigserial, job_id bigint, step text, attempt int)"
)


def effect(job_id: int, step: str, attempt: int) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_step_runs (job_id, step, attempt) VALUES (%s, %s, %s)",
            [job_id, step, attempt],
        )
    return {"step": step, "attempt": attempt}


def second_step(ctx: JobContext, fail_on: int, hang_on: int) -> dict[str, Any]:
    done = effect(ctx.job_id, "two", ctx.attempt)
    if ctx.attempt == hang_on:  # the test kills the worker while this sleeps
        # The job's work, longer than any test.
        time.sleep(60)
    if ctx.attempt == fail_on:
        raise ConnectionError(f"step two failed on attempt {ctx.attempt}")
    return done


@job(kind="tests.three_steps", queue="steps", max_attempts=3, backoff=Backoff.fixed(0.1))
def three_steps(ctx: JobContext, fail_on: int = 0, hang_on: int = 0) -> list[Any]:
    one = ctx.step("one", effect, ctx.job_id, "one", ctx.attempt)
    two = ctx.step("two", second_step, ctx, fail_on, hang_on)
    three = ctx.step("three", effect, ctx.job_id, "three", ctx.attempt)
    return [one, two, three]


async def async_effect(job_id: int, step: str, attempt: int) -> dict[str, Any]:
    from asgiref.sync import sync_to_async

    await asyncio.sleep(0)
    return await sync_to_async(effect, thread_sensitive=False)(job_id, step, attempt)


@job(kind="tests.async_steps", queue="steps", max_attempts=3, backoff=Backoff.fixed(0.1))
async def async_steps(ctx: JobContext, fail_on: int = 0) -> list[Any]:
    one = await ctx.astep("one", async_effect, ctx.job_id, "one", ctx.attempt)
    # A plain function works as a step of an async handler too.
    plain = await ctx.astep("plain", lambda: {"plain": True})
    if ctx.attempt == fail_on:
        raise ConnectionError(f"failed after two steps on attempt {ctx.attempt}")
    two = await ctx.astep("two", async_effect, ctx.job_id, "two", ctx.attempt)
    return [one, plain, two]


@job(kind="tests.repeated_step", queue="steps", max_attempts=3)
def repeated_step(ctx: JobContext) -> None:
    ctx.step("same", effect, ctx.job_id, "same", ctx.attempt)
    ctx.step("same", effect, ctx.job_id, "same", ctx.attempt)


@job(kind="tests.set_step", queue="steps", max_attempts=3)
def set_step(ctx: JobContext) -> None:
    ctx.step("a set", lambda: {1, 2})


@job(kind="tests.atomic_steps", queue="steps", max_attempts=2, backoff=Backoff.fixed(0.1))
def atomic_steps(ctx: JobContext) -> str:
    """A step inside ctx.atomic() commits with the block: on attempt 1 the block rolls
    back, and its step with it, so attempt 2 runs the step again."""
    with ctx.atomic():
        ctx.step("inside", effect, ctx.job_id, "inside", ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("the block fails after its step")
    return "done"


@job(kind="tests.dead_at_three", queue="steps", max_attempts=1)
def dead_at_three(ctx: JobContext) -> str:
    """Dies before step three until the test writes a "go" row for it."""
    ctx.step("one", effect, ctx.job_id, "one", ctx.attempt)
    ctx.step("two", effect, ctx.job_id, "two", ctx.attempt)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM test_step_runs WHERE job_id = %s AND step = 'go'", [ctx.job_id]
        )
        if cursor.fetchone() is None:
            raise ValueError("step three cannot run yet")
    ctx.step("three", effect, ctx.job_id, "three", ctx.attempt)
    return "all three"
