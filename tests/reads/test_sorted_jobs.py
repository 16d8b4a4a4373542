"""The jobs list in another order than its id: the newest matches, sorted, paged."""

from __future__ import annotations

from datetime import timedelta

import pytest

from queue_engine import reads
from queue_engine.models import Job, JobRecord
from queue_engine.reads import FilterError, JobFilter
from tests.support.history import database_now, history_row

pytestmark = pytest.mark.django_db(transaction=True)


def seed() -> dict[str, int]:
    """Three ended jobs with different run times, attempts and finishes, and a live one."""
    now = database_now()
    quick = history_row(now - timedelta(minutes=1), run=0.5, attempt=3, queue="s")
    slow = history_row(now - timedelta(minutes=30), run=40.0, attempt=1, queue="s")
    middle = history_row(now - timedelta(minutes=10), run=5.0, attempt=2, queue="s", state="failed")
    JobRecord.objects.bulk_create([quick, slow, middle])
    live = Job.objects.create(kind="tests.noop", queue="s")
    return {"quick": quick.id, "slow": slow.id, "middle": middle.id, "live": live.id}


def ids(page: reads.SortedPage) -> list[int]:
    return [job.id for job in page.jobs]


def test_sorting_by_run_time_finish_and_attempts_puts_live_jobs_last() -> None:
    j = seed()
    where = JobFilter(queue="s")

    longest = ids(reads.sorted_jobs(where, sort="runtime"))
    shortest = ids(reads.sorted_jobs(where, sort="runtime", descending=False))
    latest = ids(reads.sorted_jobs(where, sort="finished"))
    most_tried = ids(reads.sorted_jobs(where, sort="attempts"))

    assert longest == [j["slow"], j["middle"], j["quick"], j["live"]]
    assert shortest == [j["quick"], j["middle"], j["slow"], j["live"]]
    assert latest == [j["quick"], j["middle"], j["slow"], j["live"]]
    assert most_tried[:3] == [j["quick"], j["middle"], j["slow"]]


def test_a_sorted_list_keeps_the_other_filters_and_pages_through() -> None:
    j = seed()

    dead = ids(reads.sorted_jobs(JobFilter(queue="s", state="failed"), sort="runtime"))
    first = reads.sorted_jobs(JobFilter(queue="s"), sort="runtime", limit=2)
    second = reads.sorted_jobs(JobFilter(queue="s"), sort="runtime", limit=2, page=2)

    assert dead == [j["middle"]]
    assert (ids(first), first.more) == ([j["slow"], j["middle"]], True)
    assert (ids(second), second.more) == ([j["quick"], j["live"]], False)


def test_only_the_newest_window_is_sorted_and_the_page_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    j = seed()
    monkeypatch.setattr("queue_engine.reads.jobs.SORT_WINDOW", 2)

    page = reads.sorted_jobs(JobFilter(queue="s"), sort="runtime")

    newest_two = sorted(j.values(), reverse=True)[:2]
    assert sorted(ids(page)) == sorted(newest_two)
    assert page.window_full


def test_an_unknown_sort_or_page_is_refused_with_the_choices() -> None:
    with pytest.raises(FilterError, match="Sort by one of created, finished, runtime, attempts"):
        reads.sorted_jobs(sort="payload")
    with pytest.raises(FilterError, match="page must be a whole number from 1 to 200"):
        reads.sorted_jobs(sort="created", page=0)
