"""Benchmarks for jobsite's queue engine, each set against a hand-written psycopg baseline.

Run `python -m bench` (every scenario) or `python -m bench NAME` (one); `make bench`
and `make bench SCENARIO=NAME` do the same. Results go to stdout as JSON lines and to
an HTML report under bench/reports/.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Makes the kinds "bench.noop", "bench.async_noop" and "bench.flaky" resolvable by
    # dotted path in any process (a worker, say), without importing Django at `import bench`.
    if name in ("noop", "async_noop", "flaky"):
        from bench import jobs

        return getattr(jobs, name)
    raise AttributeError(name)
