"""The job kinds the benchmarks enqueue (and that later scenarios' workers run)."""

from __future__ import annotations

from queue_engine import job
from queue_engine.definitions import JobDefinition

KIND = "bench.noop"
QUEUE = "bench"


def _noop(to: str, subject: str = "Hello") -> None:
    """Does nothing: the benchmarks measure the engine, not the handler."""


noop: JobDefinition = job(_noop, kind=KIND, queue=QUEUE)


def sample_payloads(n: int, tag: str = "") -> list[dict[str, str]]:
    """`n` small payloads for `noop`, shaped like an e-mail job's arguments."""
    return [{"to": f"user{i}@example.com", "subject": f"Hello {tag}".strip()} for i in range(n)]
