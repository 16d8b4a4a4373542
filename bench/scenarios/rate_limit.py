"""A rate limit per key, held by four worker processes racing for it.

One queue, its rate limit RATE starts per WINDOW second applied to each group key
(rate_limit_per_key), a backlog over KEYS keys that never runs dry, and one
`runworker --processes 4` serving it for `--duration` seconds (DURATION by default; a
try of the bench: `make bench SCENARIO=rate_limit DURATION=5`). Then, from the jobs'
own start times (queue_engine_job and queue_engine_jobrecord.started_at, the database's
clock):

- `value`: the most starts of any one key in any window of WINDOW seconds, windows
  sliding over the starts (not fixed buckets). It must not exceed RATE.
- `ratio`: the starts over the run against the most the limit allows
  (KEYS x RATE per WINDOW over the run). The target: at least SHARE_OF_IDEAL.
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import datetime
from typing import Any

from bench.harness import BenchEnv, log
from bench.jobs import ASYNC_KIND, QUEUE
from bench.windows import most_in_a_window
from bench.workers import configure_queue, extra_tables, fill_ours, fleet, resume

NAME = "rate_limit"
PROCESSES = 4
KEYS = 5
RATE = 100
WINDOW = 1
DURATION = 60.0
SHARE_OF_IDEAL = 0.9
BACKLOG = 1.3  # jobs enqueued, as a share of what the run may start: it never runs dry

STARTS = """
SELECT group_key, started_at FROM queue_engine_job
 WHERE queue = %(queue)s AND started_at >= %(since)s AND started_at < %(until)s
 UNION ALL
SELECT group_key, started_at FROM queue_engine_jobrecord
 WHERE queue = %(queue)s AND started_at >= %(since)s AND started_at < %(until)s
"""


def run(env: BenchEnv) -> list[dict[str, Any]]:
    duration = env.duration or DURATION
    ideal = KEYS * RATE * duration / WINDOW
    try:
        with extra_tables(env, "queue_engine_claimlog"), fleet(env, QUEUE, PROCESSES) as workers:
            env.truncate()
            configure_queue(
                env,
                QUEUE,
                paused=True,
                rate_limit=RATE,
                rate_window=WINDOW,
                rate_limit_per_key=True,
            )
            fill_ours(int(ideal * BACKLOG), ASYNC_KIND, groups=KEYS)(0)
            with env.connect() as conn:
                conn.execute("ANALYZE queue_engine_job")
                since = conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
                resume(conn, QUEUE)
                time.sleep(duration)
                until = conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
                conn.execute(
                    "UPDATE queue_engine_queueconfig SET paused = true WHERE name = %s", [QUEUE]
                )
                workers.check_alive()
                time.sleep(1.0)  # the claims on their way commit
                rows = conn.execute(
                    STARTS, {"queue": QUEUE, "since": since, "until": until}
                ).fetchall()
    finally:
        configure_queue(env, QUEUE, paused=False)  # no limits left for later scenarios
    by_key: dict[str, list[datetime]] = defaultdict(list)
    for key, start in rows:
        by_key[key].append(start)
    most = {key: most_in_a_window(starts, WINDOW) for key, starts in by_key.items()}
    worst = max(most.values(), default=0)
    share = len(rows) / ideal
    log(
        f"  rate_limit: {len(rows):,} starts in {duration:.0f} s over {len(by_key)} keys "
        f"({share:.3f} of {ideal:,.0f}); most in a {WINDOW} s window per key: {most}"
    )
    row = env.result(
        NAME,
        unit="starts",
        samples=[worst],
        baseline_samples=[],
        target=f"<= {RATE} starts of a key in any {WINDOW} s window; "
        f"starts >= {SHARE_OF_IDEAL:.0%} of the ideal",
        target_value=RATE,
        higher_is_better=False,
        n=len(rows),
        processes=PROCESSES,
        keys=KEYS,
        duration_s=duration,
        ideal=ideal,
        most_per_key=most,
        method=f"runworker --processes {PROCESSES}, async no-op kind; queue rate_limit={RATE} "
        f"per {WINDOW} s per key over {KEYS} keys with a backlog that never runs dry, for "
        f"{duration:g} s; starts read from started_at, windows sliding over them",
    )
    row["ratio"] = round(share, 3)
    row["target_met"] = bool(row["target_met"]) and share >= SHARE_OF_IDEAL
    return [row]
