"""The flows list, the flow page (graph data, node table, actions) and a node's
parents and children on the job page, through Django's test client."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from queue_engine import ops, reads
from queue_engine.console.roles import ensure_roles
from queue_engine.flows import Flow
from queue_engine.models import AuditEvent, FlowRun, Job, JobRecord
from tests.support import jobs
from tests.support.console_data import XSS
from tests.support.flow_nodes import end_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_role(db: None) -> Callable[[str], Client]:
    ensure_roles()

    def login(role: str) -> Client:
        user = User.objects.create_user(f"user-{role}")
        user.groups.add(Group.objects.get(name=role))
        client = Client()
        client.force_login(user)
        return client

    return login


def finish(flow_id: int, key: str, state: str, *, result: Any = None, error: str = "") -> int:
    """End one node the way a settle does: its history row, its children released."""
    errors = [{"attempt": 1, "class": "ValueError", "message": error}] if error else None
    return end_node(flow_id, key, state, result=result, errors=errors)


def etl(name: str = "nightly etl") -> int:
    flow = Flow(name)
    flow.add("extract", jobs.node, label="extract")
    parts = flow.fan_out(
        "part", jobs.node, [{"label": f"p{i}"} for i in range(3)], depends_on=["extract"]
    )
    flow.add("load", jobs.node, label="load", depends_on=parts)
    return flow.submit()


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def graph_data(html: str) -> dict[str, Any]:
    found = re.search(r'<script id="flow-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "the flow page carries its graph as JSON"
    return json.loads(found.group(1))


# --- the list ------------------------------------------------------------------------


def test_flows_list_shows_state_and_progress(as_role: Callable[[str], Client]) -> None:
    running = etl()
    finish(running, "extract", "succeeded", result={"rows": 3})
    failed = etl("broken import")
    finish(failed, "extract", "failed", error="no such file")

    html = page(as_role("viewer"), "/flows/")

    assert f'href="/flows/{running}/"' in html and f'href="/flows/{failed}/"' in html
    assert "nightly etl" in html and "broken import" in html
    assert "1 / 5 done" in html
    assert "1 dead" in html
    assert html.index(f"#{failed}") < html.index(f"#{running}"), "newest first"


def test_flows_list_filters_by_state_and_name(as_role: Callable[[str], Client]) -> None:
    etl()
    failed = etl("broken import")
    finish(failed, "extract", "failed", error="no such file")
    viewer = as_role("viewer")

    by_state = page(viewer, "/flows/?state=failed")
    by_name = page(viewer, "/flows/?q=nightly")

    assert "broken import" in by_state and "nightly etl" not in by_state
    assert "nightly etl" in by_name and "broken import" not in by_name
    assert "No flow matches these filters." in page(viewer, "/flows/?q=nothing-like-this")


def test_flows_list_pages_by_id(as_role: Callable[[str], Client]) -> None:
    ids = [etl(f"flow {i}") for i in range(5)]
    for flow_id in ids:
        assert FlowRun.objects.filter(pk=flow_id).exists()

    first = reads.list_flows(limit=2)
    second = reads.list_flows(before=first.older, limit=2)
    back = reads.list_flows(after=second.newer, limit=2)

    assert [f.id for f in first.flows] == ids[:-3:-1]
    assert [f.id for f in second.flows] == [ids[2], ids[1]]
    assert [f.id for f in back.flows] == [f.id for f in first.flows]
    html = page(as_role("viewer"), f"/flows/?before={first.older}")
    assert f"#{ids[2]}" in html and f"#{ids[4]}<" not in html


def test_searching_a_flow_id_opens_it(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()

    response = as_role("viewer").get(f"/flows/?q=%23{flow_id}")

    assert response.status_code == 302 and response["Location"] == f"/flows/{flow_id}/"


def test_htmx_filter_requests_get_only_the_results(as_role: Callable[[str], Client]) -> None:
    etl()

    response = as_role("viewer").get(
        "/flows/?state=running", headers={"HX-Request": "true", "HX-Target": "flow-results"}
    )

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="flow-results">') and "<html" not in html


# --- one flow --------------------------------------------------------------------------


def test_flow_page_draws_nodes_and_edges_by_state(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()
    extract = finish(flow_id, "extract", "succeeded", result={"rows": 3, "api_token": "t0ps3cret"})

    html = page(as_role("viewer"), f"/flows/{flow_id}/")
    data = graph_data(html)

    states = {n["key"]: n["state"] for n in data["nodes"]}
    assert states == {
        "extract": "succeeded",
        "part[0]": "available",
        "part[1]": "available",
        "part[2]": "available",
        "load": "blocked",
    }
    ids = {n["key"]: n["id"] for n in data["nodes"]}
    edges = {(p, c) for p, c, _dynamic in data["edges"]}
    assert edges == {(extract, ids[f"part[{i}]"]) for i in range(3)} | {
        (ids[f"part[{i}]"], ids["load"]) for i in range(3)
    }
    assert "vendor/dagre/dagre-3.1.3.min.js" in html
    # The node table: outputs shown, secrets masked.
    assert "&quot;rows&quot;: 3" in html
    assert "t0ps3cret" not in html and "api_token" in html


def test_a_dead_node_shows_its_error_and_the_flow_failed(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()
    finish(flow_id, "extract", "failed", error="disk full on /var/data")

    html = page(as_role("viewer"), f"/flows/{flow_id}/")

    assert 'class="badge s-failed" id="flow-state-badge">failed' in html
    assert "disk full on /var/data" in html
    assert {n["state"] for n in graph_data(html)["nodes"]} == {"failed", "upstream_failed"}


def test_a_flow_with_removed_nodes_says_so(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()
    ops.remove_job(Job.objects.get(flow_id=flow_id, node_key="extract").pk, actor="ops")

    html = page(as_role("viewer"), f"/flows/{flow_id}/")

    assert 'class="badge s-cancelled" id="flow-state-badge">cancelled' in html
    removed = FlowRun.objects.get(pk=flow_id).removed_nodes
    assert removed > 1 and f"<b>{removed}</b> removed" in html


def test_big_flows_draw_the_first_nodes_and_count_them_all(
    as_role: Callable[[str], Client],
) -> None:
    flow = Flow("wide")
    flow.add("root", jobs.node)
    flow.fan_out(
        "leaf",
        jobs.node,
        [{"label": str(i)} for i in range(reads.MAX_FLOW_NODES + 20)],
        depends_on=["root"],
    )
    flow_id = flow.submit()

    html = page(as_role("viewer"), f"/flows/{flow_id}/")

    assert len(graph_data(html)["nodes"]) == reads.MAX_FLOW_NODES
    assert f"This flow has {reads.MAX_FLOW_NODES + 21} nodes" in html


def test_names_and_keys_come_out_escaped(as_role: Callable[[str], Client]) -> None:
    flow = Flow(XSS)
    flow.add(XSS, jobs.node, label=XSS)
    flow_id = flow.submit()
    finish(flow_id, XSS, "failed", error=XSS)

    viewer = as_role("viewer")
    for url in ("/flows/", f"/flows/{flow_id}/"):
        html = page(viewer, url)
        assert XSS not in html and "<script>alert" not in html
    # The graph's JSON carries the key as it is, with < > & escaped by json_script.
    assert "\\u003Cscript\\u003E" in html
    assert graph_data(html)["nodes"][0]["key"] == XSS


def test_missing_flow_is_a_404(as_role: Callable[[str], Client]) -> None:
    assert as_role("viewer").get("/flows/987654321/").status_code == 404


# --- actions ---------------------------------------------------------------------------


def test_viewers_cannot_act_on_flows(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()

    response = as_role("viewer").post(
        f"/flows/{flow_id}/action/", {"action": "cancel", "confirm": "yes"}
    )

    assert response.status_code == 403
    assert Job.objects.filter(flow_id=flow_id).count() == 5


def test_cancel_flow_confirms_then_cancels_and_audits(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()
    operator = as_role("operator")

    confirm = page_post(operator, f"/flows/{flow_id}/action/", {"action": "cancel"})
    assert "Cancel flow" in confirm and "5 nodes have not ended" in confirm
    assert Job.objects.filter(flow_id=flow_id).count() == 5, "nothing done before the confirmation"

    done = operator.post(
        f"/flows/{flow_id}/action/", {"action": "cancel", "confirm": "yes"}, follow=True
    )

    assert "5 nodes cancelled" in done.content.decode()
    assert FlowRun.objects.get(pk=flow_id).state == "cancelled"
    assert AuditEvent.objects.filter(action="cancel_flow", target=str(flow_id)).exists()


def test_requeue_applies_only_to_failed_flows(as_role: Callable[[str], Client]) -> None:
    running = etl()
    failed = etl("broken")
    finish(failed, "extract", "failed", error="boom")
    operator = as_role("operator")

    refused = operator.post(f"/flows/{running}/action/", {"action": "requeue"}, follow=True)
    assert "requeue flow does not apply" in refused.content.decode()

    operator.post(f"/flows/{failed}/action/", {"action": "requeue", "confirm": "yes"})
    assert Job.objects.get(flow_id=failed, node_key="extract").state == "available"
    assert FlowRun.objects.get(pk=failed).state == "running"


def test_rerun_opens_the_new_flow(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()

    response = as_role("operator").post(
        f"/flows/{flow_id}/action/", {"action": "rerun", "confirm": "yes"}
    )

    new = FlowRun.objects.get(rerun_of=flow_id)
    assert response.status_code == 302 and response["Location"] == f"/flows/{new.id}/"
    assert Job.objects.filter(flow_id=new.id).count() == 5


def test_unknown_flow_action_says_what_to_do(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()

    response = as_role("operator").post(
        f"/flows/{flow_id}/action/", {"action": "explode"}, follow=True
    )

    assert "Unknown flow action" in response.content.decode()


# --- the job page ----------------------------------------------------------------------


def test_job_page_lists_parents_and_children(as_role: Callable[[str], Client]) -> None:
    flow_id = etl()
    finish(flow_id, "extract", "succeeded", result={"rows": 3})
    part = Job.objects.get(flow_id=flow_id, node_key="part[1]")

    html = page(as_role("viewer"), f"/jobs/{part.id}/")

    section = html[html.index('id="job-flow"') :]
    assert f'href="/flows/{flow_id}/"' in section
    parents, children = section.split("Children", 1)
    assert "extract" in parents and "succeeded" in parents
    assert "load" in children and "blocked" in children and "waiting" not in children


def page_post(client: Client, url: str, form: dict[str, str]) -> str:
    response = client.post(url, form)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_a_requeued_node_shows_what_it_does_now_not_its_old_error(
    as_role: Callable[[str], Client],
) -> None:
    flow_id = etl("broken")
    finish(flow_id, "extract", "cancelled", error="cancelled by admin")
    viewer = as_role("viewer")
    before = viewer.get(f"/flows/{flow_id}/").content.decode()

    ops.requeue_flow(flow_id)
    waiting = viewer.get(f"/flows/{flow_id}/").content.decode()
    Job.objects.filter(flow_id=flow_id, node_key="extract").update(
        state="running", started_at=timezone.now(), progress=0.4
    )
    running = viewer.get(f"/flows/{flow_id}/").content.decode()

    def extract_row(page: str) -> str:
        node = Job.objects.filter(flow_id=flow_id, node_key="extract").values_list("id", flat=True)
        node_id = node.first() or JobRecord.objects.get(flow_id=flow_id, node_key="extract").id
        return page.split(f'id="node-{node_id}"')[1].split("</tr>")[0]

    assert 'class="error-text"' in extract_row(before)
    assert "runs again after: cancelled by admin" in extract_row(waiting)
    assert "cancelled by admin" not in extract_row(running)
    assert "40%" in extract_row(running)


# --- state tabs, nodes that can no longer run, spawned nodes ---------------------------


def flow_tabs(html: str) -> dict[str, str]:
    """The flows list's tabs: label -> count, as a person reads them."""
    nav = html.split('aria-label="Flow states"')[1].split("</nav>")[0]
    return {
        label.strip(): count
        for label, count in re.findall(r'>\s*([A-Z][a-z]+)\s*<span class="tab-count">([^<]+)<', nav)
    }


def test_flows_list_has_state_tabs_with_counts_that_follow_the_search(
    as_role: Callable[[str], Client],
) -> None:
    etl("nightly etl")
    etl("nightly billing")
    failed = etl("nightly import")
    finish(failed, "extract", "failed", error="no such file")
    other = etl("hourly sync")
    ops.cancel_flow(other, actor="ops")
    viewer = as_role("viewer")

    every = flow_tabs(page(viewer, "/flows/"))
    nightly = flow_tabs(page(viewer, "/flows/?q=nightly&state=failed"))

    assert every == {"All": "4", "Running": "2", "Succeeded": "0", "Failed": "1", "Cancelled": "1"}
    assert nightly == {
        "All": "3",
        "Running": "2",
        "Succeeded": "0",
        "Failed": "1",
        "Cancelled": "0",
    }
    html = page(viewer, "/flows/?q=nightly&state=failed")
    current = re.search(r'class="tab s-(\w+)" aria-current="page"', html)
    assert current and current.group(1) == "failed"
    assert "nightly import" in html and "nightly etl" not in html


def test_flows_list_tab_counts_stop_at_the_cap(
    as_role: Callable[[str], Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        etl(f"flow {i}")
    monkeypatch.setattr(reads, "COUNT_CAP", 2)

    tabs = flow_tabs(page(as_role("viewer"), "/flows/"))

    assert tabs["Running"] == "2+" and tabs["All"] == "2+"


def test_a_node_that_can_no_longer_run_says_which_ancestor_stopped_it(
    as_role: Callable[[str], Client],
) -> None:
    flow_id = etl()
    extract = finish(flow_id, "extract", "failed", error="disk full on /var/data")

    html = page(as_role("viewer"), f"/flows/{flow_id}/")

    nodes = {n["key"]: n for n in graph_data(html)["nodes"]}
    assert nodes["load"]["state"] == "upstream_failed"
    assert nodes["load"]["cause"] == "extract"
    assert 'class="badge s-upstream_failed">upstream failed</span>' in html
    assert (
        f'Can no longer run: its ancestor <a href="/jobs/{extract}/" class="mono">extract</a> is dead'
        in html
    )
    assert (
        "0 blocked" not in html
        and "waiting" not in html.split('id="flow-head"')[1].split("</section>")[0]
    )


def test_a_spawned_node_hangs_off_its_spawner_in_the_graph(
    as_role: Callable[[str], Client],
) -> None:
    flow = Flow("stock")
    flow.add("stock", jobs.node, label="stock")
    flow.add("join", jobs.collect, depends_on=["stock"])
    flow_id = flow.submit()
    spawner = Job.objects.get(flow_id=flow_id, node_key="stock")
    join = Job.objects.get(flow_id=flow_id, node_key="join")
    child = Job.objects.create(
        kind="tests.number",
        queue="flows",
        payload={"value": 1},
        flow_id=flow_id,
        node_key="stock[0]",
        meta={"spawned_by": spawner.id},
    )
    from queue_engine.models import FlowEdge

    FlowEdge.objects.create(flow_id=flow_id, parent_id=child.id, child_id=join.id, dynamic=True)

    data = graph_data(page(as_role("viewer"), f"/flows/{flow_id}/"))

    assert data["spawns"] == [[spawner.id, child.id]]
    assert [child.id, join.id, True] in data["edges"]
    assert [n["key"] for n in data["nodes"]] == ["stock", "stock[0]", "join"]
