"""The console's queue page: a rate limit per group key, and a key's own rate."""

from __future__ import annotations

import pytest
from django.test import Client

from queue_engine.models import AuditEvent, GroupLimit, QueueConfig
from queue_engine.templatetags.queue_engine import queue_url_name

pytestmark = pytest.mark.django_db


@pytest.fixture
def emails(db: None) -> QueueConfig:
    return QueueConfig.objects.create(name="emails", rate_limit=10, rate_window=60)


def url(name: str, action: str = "") -> str:
    return f"/queues/{queue_url_name(name)}/{action}"


def test_an_operator_makes_the_rate_limit_apply_per_key(operator: Client, emails) -> None:
    review = operator.post(url("emails", "config/"), {"rate_limit_per_key": "yes"})
    operator.post(url("emails", "config/"), {"rate_limit_per_key": "yes", "confirm": "yes"})
    page = operator.get(url("emails")).content.decode()
    listed = operator.get("/queues/").content.decode()

    assert "the whole queue" in review.content.decode()
    assert "each group key" in review.content.decode()
    assert QueueConfig.objects.get(name="emails").rate_limit_per_key is True
    assert "each group key (jobs without one share a budget)" in page
    assert "10 per 1 min per key" in listed


def test_a_bad_switch_value_is_refused_beside_its_field(operator: Client, emails) -> None:
    page = operator.post(url("emails", "config/"), {"rate_limit_per_key": "maybe"})

    assert "Choose one of the options." in page.content.decode()
    assert QueueConfig.objects.get(name="emails").rate_limit_per_key is False


def test_an_operator_gives_a_key_its_own_rate(operator: Client, emails) -> None:
    QueueConfig.objects.filter(name="emails").update(rate_limit_per_key=True)

    review = operator.post(
        url("emails", "group-limit/"),
        {"group_key": "acme", "max_concurrency": "", "rate_limit": "4"},
    ).content.decode()
    operator.post(
        url("emails", "group-limit/"),
        {"group_key": "acme", "max_concurrency": "", "rate_limit": "4", "confirm": "yes"},
    )
    page = operator.get(url("emails")).content.decode()
    refused = operator.post(
        url("emails", "group-limit/"), {"group_key": "acme", "rate_limit": "0", "confirm": "yes"}
    ).content.decode()

    assert "the queue&#x27;s (10)" in review and "4 per 1 min" in review
    assert GroupLimit.objects.values_list("max_concurrency", "rate_limit").get() == (None, 4)
    assert "4 per 1 min" in page
    assert "from 1 to" in refused
    assert [e.details["changes"] for e in AuditEvent.objects.all()] == [{"rate_limit": [None, 4]}]
