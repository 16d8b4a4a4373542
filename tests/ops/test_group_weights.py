"""Fair share's settings: the queue's switch (ops, settings, console) and weights per key."""

from __future__ import annotations

import pytest
from django.test import Client

from queue_engine.exceptions import OpsError
from queue_engine.models import AuditEvent, GroupWeight, QueueConfig
from queue_engine.ops import queues as ops_queues
from tests.support import jobs

pytestmark = pytest.mark.django_db


def test_set_group_weight_adds_changes_and_removes_a_weight_with_audit() -> None:
    ops_queues.set_group_weight("tenants", "acme", 3, actor="alice")
    ops_queues.set_group_weight("tenants", "acme", 3, actor="alice")  # unchanged: no audit
    assert GroupWeight.objects.get(queue="tenants", group_key="acme").weight == 3

    ops_queues.set_group_weight("tenants", "acme", None, actor="bob")

    assert not GroupWeight.objects.exists()
    changes = list(
        AuditEvent.objects.filter(action="group_weight").order_by("id").values_list("details")
    )
    assert [d["changes"]["weight"] for (d,) in changes] == [[None, 3], [3, None]]


@pytest.mark.parametrize("weight", [0, -1, 1001, "2", True])
def test_a_bad_group_weight_is_refused_and_writes_nothing(weight: object) -> None:
    with pytest.raises(OpsError, match="whole number from 1 to 1000"):
        ops_queues.set_group_weight("tenants", "acme", weight, actor="alice")  # type: ignore[arg-type]

    assert not GroupWeight.objects.exists()


def test_fair_share_is_a_queue_setting_that_operators_switch_and_settings_declare(
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "QUEUE_DEFAULTS": {"fair_share": True}}
    ops_queues.declare_configured()

    jobs.noop.using(queue="fresh").enqueue()  # a queue first seen by an enqueue
    assert QueueConfig.objects.get(name="fresh").fair_share is True

    ops_queues.update_queue_config("fresh", fair_share=False, actor="alice")
    assert QueueConfig.objects.get(name="fresh").fair_share is False
    with pytest.raises(OpsError, match="fair_share must be True or False"):
        ops_queues.update_queue_config("fresh", fair_share="yes", actor="alice")


def test_an_operator_switches_fair_share_on_from_the_console(operator: Client) -> None:
    QueueConfig.objects.create(name="tenants")

    review = operator.post("/queues/tenants/config/", {"fair_share": "yes"})
    assert "Fair share between keys" in review.content.decode()
    operator.post("/queues/tenants/config/", {"fair_share": "yes", "confirm": "yes"})

    assert QueueConfig.objects.get(name="tenants").fair_share is True
    page = operator.get("/queues/tenants/").content.decode()
    assert "claims take turns between the group keys" in page


def test_the_queue_page_shows_a_fair_queues_weights(operator: Client) -> None:
    QueueConfig.objects.create(name="tenants", fair_share=True)
    ops_queues.set_group_weight("tenants", "acme", 3, actor="alice")

    page = operator.get("/queues/tenants/").content.decode()

    assert "Group weights" in page
    assert "acme" in page and "3 turns for every other key's one" in page
