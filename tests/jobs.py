"""Job kinds used by the tests (imported by the tests and by worker subprocesses)."""

from __future__ import annotations

from typing import Any

from queue_engine import Backoff, job


@job(kind="tests.noop")
def noop(**kwargs: Any) -> None:
    return None


@job(kind="tests.add", queue="math", priority=5, max_attempts=3,
     backoff=Backoff.fixed(2), name=lambda p: f"{p['a']} + {p['b']}",
     group_key=lambda p: f"acct-{p['a']}")
def add(a: int, b: int) -> int:
    return a + b


@job(kind="tests.positional")
def positional(x: int, /, y: int, *rest: int, flag: bool = False, **extra: Any) -> list[Any]:
    return [x, y, list(rest), flag, extra]


@job(kind="tests.async_echo")
async def async_echo(ctx: Any, value: str) -> str:
    return value
