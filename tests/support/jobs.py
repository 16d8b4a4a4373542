"""Job kinds used by the tests (imported by the tests and by worker subprocesses)."""

from __future__ import annotations

from typing import Any

from queue_engine import Backoff, job


@job(kind="tests.noop")
def noop(**kwargs: Any) -> None:
    return None


@job(
    kind="tests.add",
    queue="math",
    priority=5,
    max_attempts=3,
    backoff=Backoff.fixed(2),
    name=lambda p: f"{p['a']} + {p['b']}",
    group_key=lambda p: f"acct-{p['a']}",
)
def add(a: int, b: int) -> int:
    return a + b


@job(kind="tests.positional")
def positional(x: int, /, y: int, *rest: int, flag: bool = False, **extra: Any) -> list[Any]:
    return [x, y, list(rest), flag, extra]


@job(kind="tests.async_echo")
async def async_echo(ctx: Any, value: str) -> str:
    return value


# --- behaviours exercised by the worker tests --------------------------------------

import asyncio  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from django.db import connection  # noqa: E402

from queue_engine import Fatal, Retry, Snooze  # noqa: E402

logger = logging.getLogger("tests.support.jobs")


def record_execution(job_id: int, attempt: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
        cursor.execute(
            "INSERT INTO test_executions (job_id, attempt, pid) VALUES (%s, %s, %s)",
            [job_id, attempt, os.getpid()],
        )


@job(kind="tests.record", queue="record")
def record(ctx: Any, pause: float = 0.0) -> int:
    record_execution(ctx.job_id, ctx.attempt)
    if pause:
        # The job's work.
        time.sleep(pause)
    return ctx.attempt


_tally_fd: int | None = None


@job(kind="tests.tally", queue="tally")
async def tally(ctx: Any, pause: float = 0.0) -> int:
    """tests.record without the database round trip, for runs of many thousand jobs.

    Appends "job_id attempt pid" to this process's file in $JOBSITE_TEST_TALLY_DIR. An
    O_APPEND write is in the page cache when it returns, so it survives a kill -9.
    """
    global _tally_fd
    if _tally_fd is None:
        path = os.path.join(os.environ["JOBSITE_TEST_TALLY_DIR"], f"{os.getpid()}.tally")
        _tally_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(_tally_fd, f"{ctx.job_id} {ctx.attempt} {os.getpid()}\n".encode())
    if pause:
        await asyncio.sleep(pause)
    return ctx.attempt


@job(kind="tests.async_noop", queue="fast")
async def async_noop() -> None:
    return None


@job(kind="tests.async_orm", max_attempts=1)
async def async_orm(ctx: Any, direct: bool) -> int:
    """Reads its own running row through Django's async ORM, or (direct) straight from
    the worker's event loop, which Django refuses."""
    from queue_engine.models import Job

    mine = Job.objects.filter(pk=ctx.job_id, state="running")
    return mine.count() if direct else await mine.acount()


@job(kind="tests.flaky", max_attempts=5, backoff=Backoff.fixed(0.1))
def flaky(ctx: Any, succeed_on: int) -> str:
    if ctx.attempt < succeed_on:
        raise ConnectionError(f"attempt {ctx.attempt} failed")
    return f"ok on {ctx.attempt}"


@job(kind="tests.always_fails", max_attempts=3, backoff=Backoff.fixed(0.05))
def always_fails() -> None:
    raise ValueError("this never works")


@job(kind="tests.fatal", max_attempts=10)
def fatal() -> None:
    raise Fatal("the card was declined")


@job(kind="tests.fatal_by_default", max_attempts=10, on_error="fatal")
def fatal_by_default() -> None:
    raise KeyError("missing")


@job(kind="tests.retry_later", max_attempts=3)
def retry_later(ctx: Any, delay: float) -> int:
    if ctx.attempt == 1:
        raise Retry("rate limited", delay=delay)
    return ctx.attempt


@job(kind="tests.snoozer", max_attempts=1)
def snoozer(ctx: Any, cursor: int = 0) -> int:
    if cursor < 3:
        raise Snooze(0.1, payload={"cursor": cursor + 1})
    return cursor


@job(kind="tests.talker")
def talker(ctx: Any) -> None:
    print("line one from print")
    logger.warning("line two from logging")
    ctx.log("line three from ctx.log")
    print("line four to stderr", file=__import__("sys").stderr)
    ctx.progress(0.5, "halfway")


@job(kind="tests.async_talker")
async def async_talker(ctx: Any) -> None:
    print("async print")
    ctx.log("async ctx.log")
    await asyncio.sleep(0.01)
    logger.warning("async logging")


@job(kind="tests.backend", queue="threads", max_attempts=1)
def backend(pause: float = 0.0) -> dict[str, Any]:
    """The Postgres backend of this handler's Django connection, after an ORM query, and
    the thread it ran on; one attempt only, so a query on a dead connection shows."""
    import threading

    # The job's work.
    time.sleep(pause)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    return {"pid": pid, "thread": threading.get_ident()}


@job(kind="tests.heap", queue="threads", max_attempts=1)
def heap() -> dict[str, int]:
    """What the cyclic garbage collector of this worker process walks and what it keeps
    off (frozen at start-up)."""
    import gc

    return {"frozen": gc.get_freeze_count(), "walked": len(gc.get_objects())}


@job(kind="tests.cooperative", queue="slow")
def cooperative(ctx: Any, seconds: float) -> str:
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        if ctx.sleep(0.05):
            return "stopped early"
        ctx.progress(elapsed / seconds, f"{elapsed:.1f}s of {seconds}s")
    return "finished"


@job(kind="tests.async_sleeper", queue="slow")
async def async_sleeper(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "finished"


@job(kind="tests.silent_async", idle_timeout=1, max_attempts=2, backoff=Backoff.fixed(60))
async def silent_async() -> None:
    await asyncio.sleep(30)


@job(kind="tests.silent_sync", idle_timeout=1, max_attempts=5)
def silent_sync(ctx: Any) -> None:
    ctx.sleep(4)


@job(kind="tests.atomic_writer")
def atomic_writer(ctx: Any, key: str, stall: float = 0.0) -> str:
    if stall:
        # The job's work, before its atomic block.
        time.sleep(stall)
    with ctx.atomic(), connection.cursor() as cursor:
        cursor.execute("INSERT INTO test_effects (key, job_id) VALUES (%s, %s)", [key, ctx.job_id])
    return key


@job(kind="tests.report_once", queue="slow")
def report_once(ctx: Any, before: float, after: float) -> str:
    """One progress report, `before` seconds in; then `after` seconds more."""
    ctx.sleep(before)
    ctx.progress(0.5, "halfway")
    ctx.sleep(after)
    return "reported"


@job(kind="tests.atomic_hold", queue="slow")
def atomic_hold(ctx: Any, seconds: float) -> str:
    """Hold its own job row locked in ctx.atomic() for `seconds`: a long transaction."""
    with ctx.atomic():
        # The job's work.
        time.sleep(seconds)
    return "held"


@job(kind="tests.atomic_node", queue="flows")
def atomic_node(ctx: Any, label: str) -> dict[str, Any]:
    """A flow node that completes inside ctx.atomic(), then returns its output."""
    with ctx.atomic():
        pass
    return {"label": label}


@job(kind="tests.needs_gpu", labels=["gpu"])
def needs_gpu() -> str:
    return "gpu"


@job(kind="tests.poison", queue="poison")
def poison() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@job(kind="tests.beside_poison", queue="poison")
def beside_poison(seconds: float = 1.0) -> str:
    # The job's work.
    time.sleep(seconds)
    return "done"


@job(kind="tests.returns_set")
def returns_set() -> set[int]:
    return {1, 2}


@job(kind="tests.capped", queue="capped")
def capped(ctx: Any, pause: float = 0.3) -> None:
    record_execution(ctx.job_id, ctx.attempt)
    # The job's work.
    time.sleep(pause)


@job(kind="tests.grouped", queue="grouped", group_key=lambda p: p["key"])
def grouped(ctx: Any, key: str, pause: float = 0.3) -> None:
    record_execution(ctx.job_id, ctx.attempt)
    # The job's work.
    time.sleep(pause)


# --- flows ---------------------------------------------------------------------------


@job(kind="tests.node", queue="flows")
def node(ctx: Any, label: str = "", fail: bool = False) -> dict[str, Any]:
    record_execution(ctx.job_id, ctx.attempt)
    if fail:
        raise Fatal(f"{label} failed on purpose")
    return {"label": label, "saw": sorted(ctx.outputs)}


@job(kind="tests.sum_outputs", queue="flows")
def sum_outputs(ctx: Any) -> int:
    return sum(v for v in ctx.outputs.values() if isinstance(v, int))


@job(kind="tests.number", queue="flows")
def number(value: int) -> int:
    return value


@job(kind="tests.spawner", queue="flows")
def spawner(ctx: Any, width: int, depth: int) -> str:
    """Grow the join 'join' with `width` children, each spawning again while depth > 1."""
    ctx.fan_out_into(
        "join",
        "tests.spawner" if depth > 1 else "tests.number",
        [{"width": width, "depth": depth - 1} if depth > 1 else {"value": 1} for _ in range(width)],
    )
    return "spawned"


@job(kind="tests.collect", queue="flows")
def collect(ctx: Any) -> dict[str, int]:
    values = list(ctx.outputs.values())
    return {"parents": len(values), "ones": sum(1 for v in values if v == 1)}


@job(kind="tests.async_spawner", queue="flows", max_attempts=1)
async def async_spawner(ctx: Any, width: int) -> list[int]:
    """Grow the join 'join' from an async handler: one keyed child, then `width` more."""
    first = await ctx.aspawn_into("join", "tests.number", value=10, key="first")
    rest = await ctx.afan_out_into("join", "tests.number", [{"value": 1} for _ in range(width)])
    return [first, *rest]


# --- flows: spawn keys unique per flow (tests/test_flows_dynamic.py) -----------------


@job(kind="tests.key_clasher", queue="flows", max_attempts=1)
def key_clasher(ctx: Any) -> str:
    """Spawn two children keyed 'other' into 'join' (named coordinator[other], as a
    declared node is)."""
    ctx.spawn_into("join", "tests.number", value=1, key="other")
    ctx.spawn_into("join", "tests.number", value=1, key="other")
    return "spawned"


@job(kind="tests.counted_number", queue="flows")
def counted_number(ctx: Any, value: int) -> int:
    record_execution(ctx.job_id, ctx.attempt)
    return value


@job(kind="tests.spawn_then_fail", queue="flows", max_attempts=3, backoff=Backoff.fixed(0.1))
def spawn_then_fail(ctx: Any, width: int) -> str:
    """Fan out `width` children into 'join', then fail the first attempt."""
    ctx.fan_out_into("join", "tests.counted_number", [{"value": 1} for _ in range(width)])
    if ctx.attempt == 1:
        raise ConnectionError("failed after spawning")
    return "spawned"


@job(kind="tests.spawn_in_atomic", queue="flows", max_attempts=1)
def spawn_in_atomic(ctx: Any) -> str:
    """Spawn a child into 'join' inside ctx.atomic(): it commits with the node's success."""
    with ctx.atomic():
        ctx.spawn_into("join", "tests.number", value=1, key="child")
    return "spawned"


@job(kind="tests.spawn_by", queue="flows", max_attempts=1)
def spawn_by(ctx: Any, how: str) -> str:
    """Spawn one child into 'join' given as a JobSpec, or (wrongly) with a positional argument."""
    from queue_engine.enqueueing.prepare import JobSpec

    if how == "spec":
        ctx.spawn_into("join", JobSpec(kind="tests.number", payload={"value": 1}, priority=9))
    else:
        ctx.spawn_into("join", "tests.number", 1)
    return "spawned"


@job(kind="tests.fails_until", queue="flows", max_attempts=1)
def fails_until(path: str) -> str:
    """Dead until the file `path` exists (a test creates it before requeueing the flow)."""
    if not os.path.exists(path):
        raise Fatal(f"{path} is not there yet")
    return "fixed"


@job(kind="tests.spawn_twice", queue="flows", max_attempts=1)
def spawn_twice(ctx: Any) -> list[int]:
    """Fan out two children into 'join', then spawn one more, none of them keyed."""
    first = ctx.fan_out_into("join", "tests.number", [{"value": 1}, {"value": 1}])
    return [*first, ctx.spawn_into("join", "tests.number", value=1)]


@job(kind="tests.spawn_one_failing", queue="flows", max_attempts=1)
def spawn_one_failing(ctx: Any, path: str) -> str:
    """Spawn into 'join' a child that succeeds and one dead until `path` exists."""
    ctx.spawn_into("join", "tests.number", value=1)
    ctx.spawn_into("join", "tests.fails_until", path=path, key="flaky")
    return "spawned"


# --- text Postgres cannot store, handlers that ignore ctx, shutdown give-backs -------


@job(kind="tests.unstorable", queue="unstorable", max_attempts=1)
def unstorable(ctx: Any, what: str = "", value: str = "ok", lines: list[str] | None = None) -> str:
    """Fails, prints or reports the text `what` says; else returns `value`."""
    if what == "print_lines":
        for line in lines or []:
            print(line)
    if what == "raise_nul":
        raise ValueError("bad\x00byte")
    if what == "raise_surrogate":
        raise ValueError("bad\ud800half")
    if what == "print_nul":
        print("a\x00b")
    if what == "progress_nul":
        ctx.progress(0.5, "half\x00way")
    return value


@job(kind="tests.blocked_sync", queue="blocked", idle_timeout=1, max_attempts=1)
def blocked_sync(ctx: Any, seconds: float, key: str = "") -> str:
    """Blocks without a word to ctx (no heartbeat, no ctx.sleep); then writes `key`."""
    # The job's work.
    time.sleep(seconds)
    if key:
        with ctx.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO test_effects (key, job_id) VALUES (%s, %s)", [key, ctx.job_id]
            )
    return "returned"


def record_span(job_id: int, attempt: int, event: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_spans (job_id, attempt, pid, event, at) "
            "VALUES (%s, %s, %s, %s, clock_timestamp())",
            [job_id, attempt, os.getpid(), event],
        )


@job(kind="tests.span_sync", queue="spans", max_attempts=3)
def span_sync(ctx: Any, seconds: float, cooperative: bool = False) -> str:
    """Records its start and its end in test_spans; sleeps in between, heeding ctx or not."""
    record_span(ctx.job_id, ctx.attempt, "start")
    if cooperative:
        told = ctx.sleep(seconds)
    else:
        # The job's work.
        time.sleep(seconds)
        told = ctx.is_cancelled()
    record_span(ctx.job_id, ctx.attempt, "told" if told else "end")
    return "done"


@job(kind="tests.span_async", queue="spans", max_attempts=3)
async def span_async(ctx: Any, seconds: float) -> str:
    from asgiref.sync import sync_to_async

    await sync_to_async(record_span)(ctx.job_id, ctx.attempt, "start")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        await asyncio.shield(sync_to_async(record_span)(ctx.job_id, ctx.attempt, "told"))
        raise
    await sync_to_async(record_span)(ctx.job_id, ctx.attempt, "end")
    return "done"


@job(kind="tests.atomic_then_die", queue="atomic")
def atomic_then_die(ctx: Any, key: str, set_result: bool = True) -> str:
    """Writes `key` in ctx.atomic(), then its worker dies before the next settle."""
    with ctx.atomic() as block, connection.cursor() as cursor:
        cursor.execute("INSERT INTO test_effects (key, job_id) VALUES (%s, %s)", [key, ctx.job_id])
        if set_result:
            block.result = {"key": key}
    os.kill(os.getpid(), signal.SIGKILL)
    return key


@job(kind="tests.atomic_result", queue="atomic", max_attempts=1)
def atomic_result(ctx: Any, key: str) -> None:
    with ctx.atomic() as block, connection.cursor() as cursor:
        cursor.execute("INSERT INTO test_effects (key, job_id) VALUES (%s, %s)", [key, ctx.job_id])
        block.result = {1, 2}


# --- django.tasks run by a real worker (tests/test_tasks_backend.py) ------------------

from django.tasks import task  # noqa: E402

# Django 6.1's task() passes extra options on to the backend's task_class; django-stubs'
# task() does not take them yet.


@task(queue_name="tasks", max_attempts=1)  # type: ignore[call-overload, untyped-decorator]
def task_total(values: list[int], label: str = "") -> dict[str, Any]:
    return {"label": label, "total": sum(values)}


@task(queue_name="tasks", max_attempts=1)  # type: ignore[call-overload, untyped-decorator]
def task_refuses(reason: str) -> None:
    raise LookupError(reason)


@task(queue_name="tasks", max_attempts=2, backoff=Backoff.fixed(0.1), takes_context=True)  # type: ignore[call-overload, untyped-decorator]
def task_second_try(context: Any, value: int) -> int:
    if context.attempt == 1:
        raise ConnectionError(f"attempt {context.attempt} lost its connection")
    return value * context.attempt


@task(queue_name="tasks", max_attempts=1)  # type: ignore[call-overload, untyped-decorator]
async def task_async_rest(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"rested {seconds}s"


@job(kind="tests.connect", queue="flows")
def connect(api_token: str, db_url: str, marker: str = "", hosts: list[Any] | None = None) -> str:
    """Secrets in its payload; dead at once (Fatal) while `marker` names no file."""
    if marker and not Path(marker).exists():
        raise Fatal("the database refused the connection (create the marker file to fix it)")
    return "connected"
