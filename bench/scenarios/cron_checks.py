"""How fast `check_cron` refuses hostile cron expressions, against checking a plain one.

A schedule's cron comes from settings, the admin or a form post, so any text may reach
the parser; each hostile expression (tests/support/cron.py: huge lists, huge numbers,
"never fires" rules that a naive search would walk for years) must be refused at once.
`value` is the slowest refusal (ms), the median over repeats; the baseline is the
slowest of as many checks of "*/5 * * * *".
"""

from __future__ import annotations

import time
from typing import Any

from bench.harness import BenchEnv
from queue_engine.exceptions import ScheduleError
from queue_engine.schedules.recurrence import check_cron
from tests.support.cron import HOSTILE

NAME = "cron_checks"
PLAIN = "*/5 * * * *"
TARGET_MS = 10.0


def run(env: BenchEnv) -> list[dict[str, Any]]:
    check_cron(PLAIN)  # imports and caches warm
    samples, baseline = [], []
    for _ in range(env.repeats):
        samples.append(max(refusal_ms(expression) for expression in HOSTILE))
        baseline.append(max(check_ms(PLAIN) for _ in HOSTILE))
    return [
        env.result(
            NAME,
            unit="ms",
            samples=samples,
            baseline_samples=baseline,
            target=f"< {TARGET_MS:.0f} ms for every hostile expression",
            target_value=TARGET_MS,
            n=len(HOSTILE),
            method="check_cron(expression) for each hostile expression of tests/support/cron.py; "
            "value = the slowest refusal",
            baseline_method=f"check_cron({PLAIN!r}), as many times; the slowest",
        )
    ]


def refusal_ms(expression: str) -> float:
    started = time.perf_counter()
    try:
        check_cron(expression)
    except ScheduleError:
        return (time.perf_counter() - started) * 1000
    raise AssertionError(f"check_cron accepted a hostile expression: {expression[:40]!r}")


def check_ms(expression: str) -> float:
    started = time.perf_counter()
    check_cron(expression)
    return (time.perf_counter() - started) * 1000
