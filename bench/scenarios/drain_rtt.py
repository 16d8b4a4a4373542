"""The drain across a network: 2 worker processes whose connections cross added latency.

Three fleets (`runworker --concurrency 200 --processes 2`, async no-op kind), each on a
queue of its own, reach Postgres through a bench.relay: one adds nothing (the
baseline: the relay's own cost is the same for all three), one adds RTTS[0] ms to each
round trip and one RTTS[1] ms. The three drains of 20,000 jobs take turns, as `drain`
times them. The round trip a `SELECT 1` really takes through each relay is measured
and reported beside the delay asked for (asyncio's timers fire up to a millisecond
late). The bench process's own connections (filling, polling) go straight to the server.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from psycopg.conninfo import make_conninfo

from bench.harness import BenchEnv, log, per_second
from bench.jobs import ASYNC_KIND
from bench.relay import measure_rtt, relay
from bench.workers import (
    CONCURRENCY,
    STATS_NOTE,
    compare_many,
    database_url,
    fill_ours,
    fleet,
    ours_timed,
)

NAME = "drain_rtt"
N = 20_000
PROCESSES = 2
RTTS = (1.0, 5.0)  # ms added to each round trip
TARGETS = {1.0: 0.7}  # of the same-run drain through the relay with nothing added


def relay_target() -> str:
    """Where the server listens, as bench.relay takes it: HOST:PORT or a socket path."""
    from django.db import connection

    s = connection.settings_dict
    host = s.get("HOST") or "/var/run/postgresql"
    port = s.get("PORT") or 5432
    return f"{host}/.s.PGSQL.{port}" if host.startswith("/") else f"{host}:{port}"


def run(env: BenchEnv) -> list[dict[str, Any]]:
    delays = (0.0, *RTTS)
    target = relay_target()
    with ExitStack() as stack:
        ports = {d: stack.enter_context(relay(target, d)) for d in delays}
        measured = {
            d: measure_rtt(make_conninfo(env.conninfo, host="127.0.0.1", port=str(p)))
            for d, p in ports.items()
        }
        log(
            "  round trip through the relays: "
            + ", ".join(f"+{d:g} ms: {m:.2f} ms" for d, m in measured.items())
        )
        timeds = []
        for d, port in ports.items():
            queue = f"rtt{d:g}"
            workers = stack.enter_context(
                fleet(env, queue, processes=PROCESSES, url=database_url(via_port=port))
            )
            timeds.append(ours_timed(env, workers, fill_ours(N, ASYNC_KIND, queue=queue)))
        seconds = dict(zip(delays, compare_many(env, timeds), strict=True))
    base = per_second(N, seconds[0.0])
    rows = []
    for d in RTTS:
        ratio = TARGETS.get(d)
        rows.append(
            env.result(
                NAME,
                unit="jobs/s",
                samples=per_second(N, seconds[d]),
                baseline_samples=base,
                target=f">= {ratio} of the drain through the relay with no delay"
                if ratio
                else "none set (for information)",
                target_ratio=ratio,
                n=N,
                rtt_ms=d,
                measured_rtt_ms=round(measured[d], 3),
                baseline_rtt_ms=round(measured[0.0], 3),
                processes=PROCESSES,
                method=f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, async "
                f"no-op kind, connected through bench.relay adding {d:g} ms to each round "
                f"trip; time from un-pausing until all {N:,} jobs are in the history" + STATS_NOTE,
                baseline_method="the same, through a relay that adds nothing; the three "
                "fleets' drains take turns",
            )
        )
    return rows
