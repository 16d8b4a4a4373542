"""GET /metrics: off by default, a bearer token, the Prometheus text format."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from queue_engine import sql
from queue_engine.models import Job, JobRecord, QueueConfig, WorkerProcess
from queue_engine.worker.services import roll_up
from tests.support.history import database_now, history_row
from tests.support.metrics import TOKEN, samples, scrape
from tests.support.services import run_service

pytestmark = pytest.mark.django_db(transaction=True)


def test_metrics_are_off_unless_a_token_is_set() -> None:
    response = scrape()

    assert response.status_code == 404
    assert "METRICS_TOKEN" in response.content.decode()


def test_a_scrape_without_the_right_token_is_refused(metrics_on: None) -> None:
    missing, wrong = scrape(None), scrape("guess")

    assert missing.status_code == wrong.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert b"queue_engine" not in wrong.content


def test_guessing_tokens_from_one_address_is_throttled(metrics_on: None) -> None:
    guesses = [scrape(f"guess-{n}", "203.0.113.40") for n in range(50)]
    right_from_there = scrape(TOKEN, "203.0.113.40")
    right_from_elsewhere = scrape(TOKEN, "198.51.100.40")

    assert [r.status_code for r in guesses] == [401] * 10 + [429] * 40
    refused = guesses[-1]
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "Too many wrong metrics tokens from this address" in refused.content.decode()
    assert right_from_there.status_code == 429
    assert right_from_elsewhere.status_code == 200


def test_the_right_token_does_not_clear_another_address_s_count(metrics_on: None) -> None:
    for n in range(9):
        scrape(f"guess-{n}", "203.0.113.41")
    scrape(TOKEN, "198.51.100.41")
    tenth = scrape("guess-9", "203.0.113.41")

    after = scrape(TOKEN, "203.0.113.41")

    assert tenth.status_code == 401
    assert after.status_code == 429


def test_an_address_may_scrape_again_once_its_window_ends(metrics_on: None, settings: Any) -> None:
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "METRICS_FAILURE_WINDOW": 1}
    for n in range(10):
        scrape(f"guess-{n}", "203.0.113.42")
    refused = scrape(TOKEN, "203.0.113.42")
    # The one-second window passes: the condition is the clock itself.
    time.sleep(1.1)

    again = scrape(TOKEN, "203.0.113.42")

    assert refused.status_code == 429 and refused["Retry-After"] == "1"
    assert again.status_code == 200


def test_behind_a_trusted_proxy_each_forwarded_client_is_counted(
    metrics_on: None, settings: Any
) -> None:
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "TRUSTED_PROXIES": ["10.0.0.5"]}
    for n in range(10):
        scrape(f"guess-{n}", "10.0.0.5", forwarded="203.0.113.43")

    guesser = scrape(TOKEN, "10.0.0.5", forwarded="203.0.113.43")
    prometheus = scrape(TOKEN, "10.0.0.5", forwarded="198.51.100.43")

    assert guesser.status_code == 429
    assert prometheus.status_code == 200


@pytest.mark.parametrize("sent", ["scrape-me-7f3", "scrape-me-7f3a-and-more", "scrape-mé-7f3a"])
def test_a_token_of_another_length_or_alphabet_is_refused_not_an_error(
    metrics_on: None, sent: str
) -> None:
    assert scrape(sent).status_code == 401


def test_a_scrape_reports_queues_workers_and_the_last_minutes(
    metrics_on: None, conninfo: str
) -> None:
    for _ in range(3):
        Job.objects.create(kind="tests.noop", queue="emails")
    QueueConfig.objects.update_or_create(name="reports", defaults={"paused": True})
    now = database_now()
    minute_ago = now - timedelta(minutes=2)
    JobRecord.objects.bulk_create(
        [history_row(minute_ago, queue="emails", attempt=2) for _ in range(4)]
        + [history_row(minute_ago, queue="emails", state="failed")]
    )
    JobRecord.objects.filter(state="failed").update(rescues=1)
    run_service(conninfo, roll_up)
    WorkerProcess.objects.create(id="w-1", host="h", pid=1, concurrency=8, in_flight=3)

    got = samples(scrape())
    kind = "tests.noop"

    assert got[("queue_engine_jobs", (("queue", "emails"), ("state", "available")))] == 3
    assert got[("queue_engine_dead_letter_jobs", (("queue", "emails"),))] == 1
    assert got[("queue_engine_queue_paused", (("queue", "reports"),))] == 1
    assert got[("queue_engine_oldest_waiting_seconds", (("queue", "emails"),))] >= 0
    key = (("kind", kind), ("outcome", "succeeded"), ("queue", "emails"))
    assert got[("queue_engine_finished_jobs_5m", key)] == 4
    assert got[("queue_engine_retried_attempts_5m", (("kind", kind), ("queue", "emails")))] == 4
    assert got[("queue_engine_rescued_jobs_5m", (("kind", kind), ("queue", "emails")))] == 1
    assert got[("queue_engine_run_seconds", (("quantile", "0.5"), ("queue", "emails")))] == 1.0
    assert got[("queue_engine_workers_alive", ())] == 1
    assert got[("queue_engine_worker_jobs_in_flight", (("worker", "w-1"),))] == 3
    assert got[("queue_engine_leader", ())] == 0


def test_the_leader_gauge_follows_the_lock(metrics_on: None, conninfo: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as leader:
        leader.execute(sql.TRY_LEADER_LOCK, [sql.LEADER_LOCK_KEY])
        held = samples(scrape())[("queue_engine_leader", ())]
    released = samples(scrape())[("queue_engine_leader", ())]

    assert (held, released) == (1, 0)


def test_a_transaction_that_holds_back_vacuum_is_named_on_the_overview_and_scraped(
    metrics_on: None, settings: Any, conninfo: str, viewer: Any
) -> None:
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "HEALTH_XMIN_AGE": 1}
    before = viewer.get("/").content.decode()
    with psycopg.connect(conninfo, application_name="nightly report") as report:
        report.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        report.execute("SELECT count(*) FROM queue_engine_job").fetchone()
        pid = report.info.backend_pid
        report.execute("SELECT pg_sleep(1.2)")  # past HEALTH_XMIN_AGE, snapshot held
        during = viewer.get("/").content.decode()
        held = samples(scrape())[("queue_engine_oldest_xmin_holder_seconds", ())]
        report.rollback()
        released = samples(scrape())[("queue_engine_oldest_xmin_holder_seconds", ())]

    assert "Vacuum is held back" not in before
    assert "Vacuum is held back" in during
    assert f'pid <span class="mono">{pid}</span> <span class="mono">nightly report</span>' in during
    assert "idle in transaction, open for" in during
    assert held >= 1.0 and released == 0.0
    assert ("queue_engine_live_table_dead_rows", ()) in samples(scrape())
