"""The job kinds the benchmarks enqueue and their workers run (JOBSITE_JOB_MODULES=bench.jobs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from queue_engine import job
from queue_engine.definition.decorator import JobKind
from queue_engine.definition.job import Backoff

if TYPE_CHECKING:
    from queue_engine.worker.context import JobContext

KIND = "bench.noop"
ASYNC_KIND = "bench.async_noop"
FLAKY_KIND = "bench.flaky"
STEPS_KIND = "bench.steps"
ORM_KIND = "bench.orm_update"
DOOMED_KIND = "bench.doomed"
CHATTY_KIND = "bench.chatty"
WAIT_KIND = "bench.await_go"  # parks until the signal "go"
ROWS = 1_000  # drain_orm's table: each job updates one of these rows, at random
QUEUE = "bench"
FLAKY_FAILURES = 2  # a flaky job fails this many attempts, then succeeds


def _noop(to: str, subject: str = "Hello") -> None:
    """Does nothing: the benchmarks measure the engine, not the handler."""


async def _async_noop(to: str, subject: str = "Hello") -> None:
    """Does nothing, as a coroutine: runs on the worker's event loop, no thread hop."""


async def _flaky(ctx: JobContext, to: str, subject: str = "Hello") -> None:
    """Fails its first FLAKY_FAILURES attempts, then succeeds (retried at once)."""
    if ctx.attempt <= FLAKY_FAILURES:
        raise RuntimeError(f"bench: attempt {ctx.attempt} fails on purpose")


async def _doomed(ctx: JobContext, to: str, subject: str = "Hello") -> None:
    """Fails every attempt: ends in the dead letter after its last."""
    raise RuntimeError(f"bench: attempt {ctx.attempt} of a doomed job")


async def _chatty(ctx: JobContext, to: str, subject: str = "Hello") -> None:
    """Writes three log lines: what the job logs cost."""
    for line in ("starting", f"sending to {to}", "done"):
        ctx.log(line)


def _step(n: int) -> int:
    return n


def _steps(ctx: JobContext, to: str, subject: str = "Hello") -> int:
    """Three durable steps that do nothing: what recording a step costs."""
    return ctx.step("one", _step, 1) + ctx.step("two", _step, 2) + ctx.step("three", _step, 3)


def _orm_update(row: int) -> None:
    """One Django ORM UPDATE of a row, the common shape of a Django job's work."""
    from django.db.models import F

    from bench.rows import BenchRow

    BenchRow.objects.filter(pk=row).update(hits=F("hits") + 1)


noop: JobKind = job(_noop, kind=KIND, queue=QUEUE)
async_noop: JobKind = job(_async_noop, kind=ASYNC_KIND, queue=QUEUE)
orm_update: JobKind = job(_orm_update, kind=ORM_KIND, queue=QUEUE)
steps: JobKind = job(_steps, kind=STEPS_KIND, queue=QUEUE)
flaky: JobKind = job(_flaky, kind=FLAKY_KIND, queue=QUEUE, backoff=Backoff.fixed(0), max_attempts=5)
doomed: JobKind = job(
    _doomed, kind=DOOMED_KIND, queue=QUEUE, backoff=Backoff.fixed(0), max_attempts=2
)
chatty: JobKind = job(_chatty, kind=CHATTY_KIND, queue=QUEUE)


async def _await_go(ctx: JobContext, to: str, subject: str = "Hello") -> None:
    await ctx.await_for_signal("go")


await_go: JobKind = job(_await_go, kind=WAIT_KIND, queue=QUEUE)


def row_payloads(n: int, tag: str = "") -> list[dict[str, int]]:
    """`n` payloads for `orm_update`: rows spread over the table, the same for every run."""
    return [{"row": (i * 7919) % ROWS + 1} for i in range(n)]


def sample_payloads(n: int, tag: str = "") -> list[dict[str, str]]:
    """`n` small payloads for `noop`, shaped like an e-mail job's arguments."""
    return [{"to": f"user{i}@example.com", "subject": f"Hello {tag}".strip()} for i in range(n)]
