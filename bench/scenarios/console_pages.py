"""Every console page, server side, with 5,000,000 jobs in history.

The data is seeded in bulk by bench/console_data.py (history over 30 days, a live
table of a few thousand jobs, flows, logs, schedules, workers, audit events, the
metrics rollup caught up, tables vacuumed and analyzed). A user in the "operator"
group requests each page with Django's test Client, in this process: the time is the
server's (middleware, session, views, queries, templates), without a network or a
browser; the Client keeps one database connection across requests, as the pool does
under daphne. Every response must be a 200 holding the page's data and no error
notice, or the scenario fails.

Per page: warm-up requests, then REQUESTS timed ones per repeat, the pages taking
turns so that other work on the machine spreads over all of them. `value` is the
median over repeats of the slowest page's p95; each page has a field with its p50
and p95 (medians over repeats) and its query count. The baseline is the same pages
on the same data with a history of BASELINE_HISTORY jobs: the ratio is what the
history's size costs the slowest page.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import NoReverseMatch, reverse

from bench import console_data
from bench.harness import BenchEnv, log
from bench.workers import percentile
from queue_engine import conf
from queue_engine.console.roles import ensure_roles

NAME = "console_pages"
HISTORY = 5_000_000
BASELINE_HISTORY = 10_000
WARMUP = 3
REQUESTS = 20
TARGET_MS = 150.0
USERNAME = "bench-operator"
METRICS_TOKEN = "bench-metrics"
ERROR_NOTICE = 'class="notice error"'
JOB_LINK = re.compile(r'href="[^"]*/jobs/\d+/"')


@dataclass(frozen=True)
class Page:
    name: str
    url: str
    expect: str | re.Pattern[str] | None  # what proves the page rendered its data


@dataclass
class Timings:
    ms: dict[str, list[list[float]]]  # page -> one list of request times per repeat
    queries: dict[str, int]


def run(env: BenchEnv) -> list[dict[str, Any]]:
    base = measure(env, BASELINE_HISTORY)
    ours = measure(env, HISTORY)
    with env.connect() as conn:
        console_data.truncate(conn)
    ours_slowest = slowest_p95_per_repeat(ours)
    base_slowest = slowest_p95_per_repeat(base)
    pages: dict[str, Any] = {name: page_field(ours, base, name) for name in ours.ms}
    slowest = max(pages, key=lambda name: pages[name]["p95"])
    return [
        env.result(
            NAME,
            unit="ms",
            samples=ours_slowest,
            baseline_samples=base_slowest,
            target=f"<= {TARGET_MS:.0f} ms p95 on every page",
            target_value=TARGET_MS,
            n=HISTORY,
            requests_per_page=REQUESTS * env.repeats,
            slowest_page=slowest,
            **pages,
            method=f"Django test Client in-process, logged in as an operator; {WARMUP} warm-up "
            f"requests per page, then {REQUESTS} per page per repeat, the pages taking turns; "
            f"value = median over repeats of the slowest page's p95 (ms, linear "
            f"interpolation). Data: {HISTORY:,} history rows over 30 days in 8 queues, "
            f"{console_data.LIVE:,} live jobs, {console_data.DONE_FLOWS + console_data.RUNNING_FLOWS} "
            "flows, schedules, workers, audit events; metrics rollup caught up; tables "
            "vacuumed and analyzed (bench/console_data.py)",
            baseline_method=f"ours, the same pages and requests on the same data with "
            f"{BASELINE_HISTORY:,} history rows",
        )
    ]


def measure(env: BenchEnv, history: int) -> Timings:
    seeded = console_data.seed(env, history)
    with override_settings(QUEUE_ENGINE={**conf.configured(), "METRICS_TOKEN": METRICS_TOKEN}):
        return measure_pages(env, history, seeded)


def measure_pages(env: BenchEnv, history: int, seeded: console_data.Seeded) -> Timings:
    client = operator_client()
    pages = console_pages(seeded)
    log(f"console_pages: {history:,} history rows, pages: {', '.join(p.name for p in pages)}")
    timings = Timings({p.name: [] for p in pages}, {})
    for page in pages:
        with CaptureQueriesContext(connection) as queries:
            fetch(client, page)
        timings.queries[page.name] = len(queries)
        for _ in range(WARMUP - 1):
            fetch(client, page)
    for _ in range(env.repeats):
        for page in pages:
            timings.ms[page.name].append([])
        for _ in range(REQUESTS):
            for page in pages:
                timings.ms[page.name][-1].append(fetch(client, page))
    client.logout()
    return timings


def operator_client() -> Client:
    ensure_roles()
    user, _ = User.objects.get_or_create(username=USERNAME)
    user.groups.add(Group.objects.get(name="operator"))
    # The scraper's token on every request: the console ignores it, /metrics needs it.
    client = Client(headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    client.force_login(user)
    return client


def console_pages(seeded: console_data.Seeded) -> list[Page]:
    jobs = reverse("queue_engine:jobs")
    pages = [
        Page("overview", reverse("queue_engine:overview"), "webhooks"),
        Page("jobs", jobs, f'href="{reverse("queue_engine:job", args=[seeded.newest_id])}"'),
        Page("jobs_filtered", f"{jobs}?queue=billing&state=failed", JOB_LINK),
        # An operator looking for one customer's e-mails: few matches, a full scan window.
        Page("jobs_search", f"{jobs}?q=user4242%40example.com", None),
        Page("jobs_older", f"{jobs}?before={seeded.middle_id}", JOB_LINK),
        Page("job", reverse("queue_engine:job", args=[seeded.dead_job]), "Traceback"),
        Page("dead", reverse("queue_engine:dead"), "billing"),
        Page("schedules", reverse("queue_engine:schedules"), "schedule-001"),
        Page("workers", reverse("queue_engine:workers"), "worker-1"),
        Page("audit", reverse("queue_engine:audit"), "alice"),
        Page("queue", reverse("queue_engine:queue", args=["emails"]), "emails"),
        Page("queue_30d", reverse("queue_engine:queue", args=["emails"]) + "?window=30d", "emails"),
        Page("queues", reverse("queue_engine:queues"), "webhooks"),
        Page("jobs_sorted", f"{jobs}?sort=-runtime", JOB_LINK),
        # A Prometheus scrape (issue: under 50 ms whatever the history holds).
        Page("metrics", reverse("queue_engine:metrics"), 'queue_engine_jobs{queue="emails"'),
    ]
    # The flow pages are measured once the console has them.
    flows = url_or_none(lambda name: reverse(f"queue_engine:{name}"), "flows", "flow_list")
    flow = url_or_none(
        lambda name: reverse(f"queue_engine:{name}", args=[seeded.flow]), "flow", "flow_detail"
    )
    if flows:
        pages.append(Page("flows", flows, "catalogue sync"))
    if flow:
        pages.append(Page("flow", flow, "catalogue sync"))
    return pages


def url_or_none(build: Callable[[str], str], *names: str) -> str | None:
    for name in names:
        try:
            return build(name)
        except NoReverseMatch:
            continue
    return None


def fetch(client: Client, page: Page) -> float:
    """Request the page once; the milliseconds it took. Fails on anything but its data."""
    started = time.perf_counter()
    response = client.get(page.url)
    ms = (time.perf_counter() - started) * 1000
    body = response.content.decode()
    if response.status_code != 200:
        raise RuntimeError(f"{page.name} ({page.url}) answered {response.status_code}")
    if ERROR_NOTICE in body:
        notice = body[body.index(ERROR_NOTICE) :][:300]
        raise RuntimeError(f"{page.name} ({page.url}) showed an error: {notice}")
    expect = page.expect
    found = expect is None or (
        expect.search(body) if isinstance(expect, re.Pattern) else expect in body
    )
    if not found:
        raise RuntimeError(f"{page.name} ({page.url}) lacks {expect!r}: it rendered no data")
    return ms


def p95s(timings: Timings, page: str) -> list[float]:
    return [percentile(run, 95) for run in timings.ms[page]]


def slowest_p95_per_repeat(timings: Timings) -> list[float]:
    repeats = len(next(iter(timings.ms.values())))
    return [max(p95s(timings, page)[r] for page in timings.ms) for r in range(repeats)]


def page_field(ours: Timings, base: Timings, page: str) -> dict[str, Any]:
    def summary(timings: Timings) -> dict[str, float]:
        runs = timings.ms[page]
        return {
            "p50": round(statistics.median([statistics.median(r) for r in runs]), 1),
            "p95": round(statistics.median(p95s(timings, page)), 1),
        }

    field = {**summary(ours), "queries": ours.queries[page]}
    if page in base.ms:
        at_base = summary(base)
        field |= {"baseline_p50": at_base["p50"], "baseline_p95": at_base["p95"]}
    return field
