"""A queue's rate limit per group key: the setting, a key's own rate, and the rooms the
claim counts from them."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from queue_engine.exceptions import OpsError
from queue_engine.models import AuditEvent, ClaimLog, GroupLimit, QueueConfig
from queue_engine.ops import queues as ops_queues
from tests.support import jobs

pytestmark = pytest.mark.django_db


def rooms(keys: list[str], want: int = 50) -> dict[str | None, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT group_key, room FROM queue_engine_limited_rooms(%s, %s, %s, %s, %s)",
            [["emails"], want, ["emails"] * len(keys), keys, [None] * len(keys)],
        )
        return dict(cursor.fetchall())


def test_the_rate_limit_is_set_per_key_and_handed_back_with_audit() -> None:
    ops_queues.update_queue_config("emails", actor="alice", rate_limit=10, rate_limit_per_key=True)
    edited = QueueConfig.objects.get(name="emails")

    ops_queues.reset_queue_config("emails", actor="bob")

    assert (edited.rate_limit_per_key, edited.edited_fields) == (
        True,
        ["rate_limit", "rate_limit_per_key"],
    )
    assert QueueConfig.objects.get(name="emails").rate_limit_per_key is False
    assert AuditEvent.objects.order_by("id").first().details == {  # type: ignore[union-attr]
        "changes": {"rate_limit": [None, 10], "rate_limit_per_key": [False, True]}
    }


def test_rate_limit_per_key_is_true_or_false() -> None:
    with pytest.raises(OpsError, match="rate_limit_per_key must be True or False"):
        ops_queues.update_queue_config("emails", rate_limit_per_key="yes")

    assert not QueueConfig.objects.filter(rate_limit_per_key=True).exists()


def test_settings_give_queues_a_rate_limit_per_key(settings: Any) -> None:
    settings.QUEUE_ENGINE = {
        **settings.QUEUE_ENGINE,
        "QUEUES": {"emails": {"rate_limit": 10, "rate_limit_per_key": True}},
        "QUEUE_DEFAULTS": {"rate_limit_per_key": True},
    }

    ops_queues.declare_configured()
    jobs.noop.using(queue="fresh").enqueue()  # the enqueue trigger copies QueueDefaults

    per_key = dict(QueueConfig.objects.values_list("name", "rate_limit_per_key"))
    assert per_key["emails"] is True and per_key["fresh"] is True


def test_a_keys_own_rate_is_set_kept_beside_its_cap_and_removed_with_audit() -> None:
    ops_queues.set_group_limit("emails", "acme", None, rate_limit=5, actor="alice")
    rate_only = GroupLimit.objects.values_list("max_concurrency", "rate_limit").get()
    ops_queues.set_group_limit("emails", "acme", 2, rate_limit=5, actor="alice")
    both = GroupLimit.objects.values_list("max_concurrency", "rate_limit").get()

    ops_queues.set_group_limit("emails", "acme", None, actor="bob")

    assert (rate_only, both) == ((None, 5), (2, 5))
    assert not GroupLimit.objects.exists()
    assert [e.details["changes"] for e in AuditEvent.objects.order_by("id")] == [
        {"rate_limit": [None, 5]},
        {"max_concurrency": [None, 2]},
        {"max_concurrency": [2, None], "rate_limit": [5, None]},
    ]


@pytest.mark.parametrize("rate", [0, -1, "3", True, 10**12])
def test_bad_key_rates_are_refused_and_nothing_is_written(rate: object) -> None:
    with pytest.raises(OpsError, match="rate limit of group 'acme' on queue 'emails'"):
        ops_queues.set_group_limit("emails", "acme", None, rate_limit=rate)  # type: ignore[arg-type]

    assert not GroupLimit.objects.exists() and not AuditEvent.objects.exists()


def test_each_key_counts_its_own_budget_and_the_keyless_share_one() -> None:
    QueueConfig.objects.create(name="emails", rate_limit=3, rate_window=60, rate_limit_per_key=True)
    GroupLimit.objects.create(queue="emails", group_key="wide", rate_limit=5)
    ClaimLog.objects.create(queue="emails", group_key="acme", count=2)
    ClaimLog.objects.create(queue="emails", group_key="wide", count=1)
    ClaimLog.objects.create(queue="emails", group_key="", count=3)

    per_key = rooms(["acme", "wide", "other", ""])
    QueueConfig.objects.filter(name="emails").update(rate_limit_per_key=False)
    queue_wide = rooms(["acme", "wide", "other", ""])

    # Per key: no queue-wide budget (the queue's row is the claim's want), each key its own.
    assert per_key == {None: 50, "acme": 1, "wide": 4, "other": 3, "": 0}
    # Queue-wide: every start counts against the one budget, keys have no rate of their own.
    assert queue_wide == {
        None: 0,
        "acme": 2147483647,
        "wide": 2147483647,
        "other": 2147483647,
        "": 2147483647,
    }
