"""GET /metrics: the engine's figures in the Prometheus text format (prometheus-client).

Off unless QUEUE_ENGINE["METRICS_TOKEN"] is set; then a scrape must send
`Authorization: Bearer <token>`. An address that sent METRICS_FAILURE_LIMIT wrong tokens
within METRICS_FAILURE_WINDOW seconds gets 429 until that window ends, whatever it sends
(client_address: REMOTE_ADDR, or X-Forwarded-For from TRUSTED_PROXIES). Every figure is read at scrape time from what the
console reads (bounded queue counts, estimated above their caps) and from the metrics
rollup's last complete minutes, never from a scan of the history, so a scrape costs the
same with ten rows or ten million.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from queue_engine import conf, ops, reads, sql
from queue_engine.console.client_address import client_address
from queue_engine.states import STATES

WINDOW = timedelta(minutes=5)  # the rollup's minutes the *_5m figures cover


class EngineCollector:
    """One scrape's worth of figures, read when the registry collects."""

    def collect(self) -> Iterator[Metric]:
        with reads.time_limited():
            yield from self.queues()
            yield from self.recent()
            yield from self.workers()
            yield from self.health()

    def queues(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "queue_engine_jobs",
            "Jobs by queue and state (estimated above the console's exact-count caps).",
            labels=["queue", "state"],
        )
        dead = GaugeMetricFamily(
            "queue_engine_dead_letter_jobs", "Dead (failed for good) jobs kept.", labels=["queue"]
        )
        oldest = GaugeMetricFamily(
            "queue_engine_oldest_waiting_seconds",
            "Age of the oldest job that could run now and waits (0 when none waits).",
            labels=["queue"],
        )
        paused = GaugeMetricFamily(
            "queue_engine_queue_paused", "1 while the queue is paused.", labels=["queue"]
        )
        for queue in reads.queue_stats():
            for state in STATES:
                jobs.add_metric([queue.name, state], queue.counts.get(state, 0))
            dead.add_metric([queue.name], queue.dead)
            latency = queue.latency
            oldest.add_metric([queue.name], latency.total_seconds() if latency else 0.0)
            paused.add_metric([queue.name], 1 if queue.paused else 0)
        paused_kinds = GaugeMetricFamily(
            "queue_engine_kind_paused",
            "1 for each job kind an operator paused (its jobs stay queued).",
            labels=["kind"],
        )
        for kind in ops.paused_kinds():
            paused_kinds.add_metric([kind], 1)
        yield from (jobs, dead, oldest, paused, paused_kinds)

    def recent(self) -> Iterator[Metric]:
        labels = ["queue", "kind"]
        finished = GaugeMetricFamily(
            "queue_engine_finished_jobs_5m",
            "Jobs that ended in the rollup's last 5 complete minutes, by outcome.",
            labels=[*labels, "outcome"],
        )
        retried = GaugeMetricFamily(
            "queue_engine_retried_attempts_5m",
            "Failed attempts that ran again, in the rollup's last 5 complete minutes.",
            labels=labels,
        )
        rescued = GaugeMetricFamily(
            "queue_engine_rescued_jobs_5m",
            "Jobs that ended after a rescue (a worker lost its lease), last 5 complete minutes.",
            labels=labels,
        )
        wait = GaugeMetricFamily(
            "queue_engine_wait_seconds",
            "From run_at to start, over the rollup's last 5 complete minutes.",
            labels=["queue", "quantile"],
        )
        run = GaugeMetricFamily(
            "queue_engine_run_seconds",
            "From start to finish, over the rollup's last 5 complete minutes.",
            labels=["queue", "quantile"],
        )
        rolled = GaugeMetricFamily(
            "queue_engine_rollup_timestamp_seconds",
            "Where the metrics rollup has got (the *_5m figures end there); stale: no leader.",
        )
        with connection.cursor() as cursor:
            cursor.execute(sql.ROLLED_UP_TO)
            row = cursor.fetchone()
            end = row[0] if row else None
            if end is not None:
                rolled.add_metric([], end.timestamp())
                window = {"start": end - WINDOW, "end": end}
                cursor.execute(sql.RECENT_OUTCOMES, window)
                for queue, kind, ok, failed, cancelled, again, lost in cursor.fetchall():
                    for outcome, n in (
                        ("succeeded", ok),
                        ("dead", failed),
                        ("cancelled", cancelled),
                    ):
                        finished.add_metric([queue, kind, outcome], n)
                    retried.add_metric([queue, kind], again)
                    rescued.add_metric([queue, kind], lost)
                cursor.execute(sql.RECENT_TIMES, window)
                for queue, *figures in cursor.fetchall():
                    for family, quantile, value in zip(
                        (wait, wait, run, run), ("0.5", "0.95", "0.5", "0.95"), figures, strict=True
                    ):
                        if value is not None:
                            family.add_metric([queue, quantile], value)
        yield from (finished, retried, rescued, wait, run, rolled)

    def workers(self) -> Iterator[Metric]:
        alive = reads.alive_workers()
        yield gauge("queue_engine_workers_alive", "Workers with a recent heartbeat.", len(alive))
        in_flight = GaugeMetricFamily(
            "queue_engine_worker_jobs_in_flight", "Jobs a worker runs now.", labels=["worker"]
        )
        capacity = GaugeMetricFamily(
            "queue_engine_worker_concurrency", "Jobs a worker may run at once.", labels=["worker"]
        )
        for worker in alive:
            in_flight.add_metric([worker.id], worker.in_flight)
            capacity.add_metric([worker.id], worker.concurrency)
        yield from (in_flight, capacity)
        key = sql.LEADER_LOCK_KEY
        with connection.cursor() as cursor:
            cursor.execute(sql.LEADER_LOCK_HELD, {"high": key >> 32, "low": key & 0xFFFFFFFF})
            held = bool(cursor.fetchone()[0])
        yield gauge(
            "queue_engine_leader",
            "1 while a worker holds the leader's lock (schedules, rescues, rollups, pruning).",
            1 if held else 0,
        )

    def health(self) -> Iterator[Metric]:
        health = reads.vacuum_health()
        yield gauge(
            "queue_engine_oldest_xmin_holder_seconds",
            "Age of the oldest transaction (or prepared one) holding back vacuum, past "
            "HEALTH_XMIN_AGE; 0 when none.",
            health.oldest.total_seconds(),
        )
        yield gauge(
            "queue_engine_live_table_dead_rows",
            "Dead rows in the live job table, which every claim steps over until a vacuum.",
            health.dead_rows,
        )


def gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def authorised(request: HttpRequest, token: str) -> bool:
    """Whether the request sends the token. Digests of both are compared, in constant
    time, so neither the token's characters nor its length show in the answer's timing."""
    sent = request.headers.get("Authorization", "")
    scheme, _, value = sent.partition(" ")
    return hmac.compare_digest(digest(value.strip()), digest(token)) and scheme.lower() == "bearer"


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def refused_for(address: str) -> int | None:
    """Seconds `address` must wait before its next scrape, or None if it may scrape."""
    with connection.cursor() as cursor:
        cursor.execute(sql.SCRAPE_REFUSED_FOR, throttle(address))
        row = cursor.fetchone()
    return None if row is None else max(1, int(row[0]))


def count_failure(address: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql.SCRAPE_FAILED, throttle(address))


def throttle(address: str) -> dict[str, Any]:
    return {
        "address": address,
        "limit": conf.option("METRICS_FAILURE_LIMIT"),
        "window": conf.option("METRICS_FAILURE_WINDOW"),
    }


def text(body: str, status: int) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/plain; charset=utf-8")


@login_not_required  # a scraper has no session: the bearer token is its credential
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token: Any = conf.option("METRICS_TOKEN")
    if not token:
        return text(
            "Metrics are off. Set QUEUE_ENGINE['METRICS_TOKEN'] to turn them on, and send it "
            "as 'Authorization: Bearer <token>'.\n",
            404,
        )
    address = client_address(request)
    wait = refused_for(address)
    if wait is not None:
        response = text(
            f"Too many wrong metrics tokens from this address: try again in {wait} s, "
            "with the token QUEUE_ENGINE['METRICS_TOKEN'] sets.\n",
            429,
        )
        response["Retry-After"] = str(wait)
        return response
    if not authorised(request, str(token)):
        count_failure(address)
        response = text("Send the metrics token as 'Authorization: Bearer <token>'.\n", 401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector())  # type: ignore[arg-type]
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
