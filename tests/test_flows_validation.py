"""Flow validation: what a user gets wrong is refused with a FlowError, nothing written."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from queue_engine.flows import Flow, FlowError
from queue_engine.models import Flow as FlowRow
from queue_engine.models import FlowEdge, Job
from tests import jobs

pytestmark = pytest.mark.slow


def nothing_written() -> bool:
    return (
        not FlowRow.objects.exists() and not Job.objects.exists() and not FlowEdge.objects.exists()
    )


def test_two_nodes_sharing_a_dedup_key_are_refused(transactional_db: None) -> None:
    flow = Flow("dedup")
    flow.add("a", jobs.number.using(dedup_key="k"), value=1)
    flow.add("b", jobs.number.using(dedup_key="k"), value=2)

    with pytest.raises(FlowError, match="nodes 'a', 'b' share"):
        flow.submit()
    assert nothing_written()


def test_a_dedup_key_held_by_a_live_job_is_a_flow_error_and_the_caller_goes_on(
    transactional_db: None,
) -> None:
    first = Flow("first")
    first.add("a", jobs.number.using(dedup_key="k"), value=1)
    first.submit()
    second = Flow("second")
    second.add("b", jobs.number.using(dedup_key="k"), value=2)

    with transaction.atomic():
        with pytest.raises(FlowError, match="held by a live job"):
            second.submit()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    assert FlowRow.objects.count() == 1 and Job.objects.count() == 1


def test_a_repeated_parent_is_counted_once(transactional_db: None) -> None:
    flow = Flow("twice")
    flow.add("a", jobs.number, value=1)
    flow.add("b", jobs.number, value=2, depends_on=["a", "a"])
    flow.submit()

    assert FlowEdge.objects.count() == 1
    assert Job.objects.get(node_key="b").state == "blocked"


def test_a_string_depends_on_is_refused_with_a_hint(transactional_db: None) -> None:
    flow = Flow("str")
    flow.add("fetch", jobs.number, value=1)
    with pytest.raises(FlowError, match=r"pass a list.*\['fetch'\]"):
        flow.add("b", jobs.number, value=2, depends_on="fetch")


@pytest.mark.parametrize("name", [None, "", "x" * 256])
def test_a_bad_flow_name_is_refused(name: object) -> None:
    with pytest.raises(FlowError, match="flow name must be a string of 1 to 255"):
        Flow(name)  # type: ignore[arg-type]
