"""Rerun a flow from a node, in the console: the page says what runs and what is reused,
refuses a payload that does not fit, and the audit log shows the change as a diff."""

from __future__ import annotations

import json
from html import unescape

import pytest
from django.test import Client

from queue_engine.flows import Flow
from queue_engine.models import AuditEvent, FlowRun, Job, JobRecord
from tests.support import jobs
from tests.support.flow_helpers import succeed_by_hand

pytestmark = pytest.mark.django_db(transaction=True)


def chain() -> int:
    flow = Flow("import")
    flow.add("fetch", jobs.node, label="fetch")
    flow.add("parse", jobs.node, label="parse", depends_on=["fetch"])
    flow.add("load", jobs.sum_outputs, depends_on=["parse"])
    flow_id = flow.submit()
    succeed_by_hand(Job.objects.get(flow_id=flow_id, node_key="fetch").pk, '{"rows": 3}')
    return flow_id


def test_the_rerun_page_says_what_runs_and_what_is_reused(operator: Client) -> None:
    flow_id = chain()

    page = operator.get(f"/flows/{flow_id}/rerun/?node=parse").content.decode()

    assert f'Rerun flow #{flow_id} from <span class="mono">parse</span>' in page
    assert "Rerun: 2 nodes run, 1 reused" in page
    assert "&quot;label&quot;: &quot;parse&quot;" in page  # the node's input, to edit
    assert '"name": "label"' in page  # the parameters the editor checks against
    flow_page = operator.get(f"/flows/{flow_id}/").content.decode()
    assert f"/flows/{flow_id}/rerun/?node=parse" in flow_page


def test_a_payload_that_does_not_fit_is_refused_and_nothing_is_written(
    operator: Client,
) -> None:
    flow_id = chain()
    url = f"/flows/{flow_id}/rerun/"

    not_json = operator.post(url, {"node": "parse", "payload": "{label: 1"})
    assert not_json.status_code == 422
    assert "The payload is not JSON" in not_json.content.decode()
    unknown = operator.post(url, {"node": "parse", "payload": '{"colour": "red"}'})
    assert unknown.status_code == 422
    assert "does not fit its kind" in unknown.content.decode()
    assert "{&quot;colour&quot;: &quot;red&quot;}" in unknown.content.decode()  # kept to fix
    assert FlowRun.objects.count() == 1 and not AuditEvent.objects.exists()


def test_rerunning_makes_a_new_flow_and_audits_the_change(operator: Client) -> None:
    flow_id = chain()

    response = operator.post(
        f"/flows/{flow_id}/rerun/",
        {"node": "parse", "payload": '{"label": "parse v2", "fail": false}'},
    )

    new_id = FlowRun.objects.exclude(pk=flow_id).get().pk
    assert response.status_code == 302 and response["Location"] == f"/flows/{new_id}/"
    reused = JobRecord.objects.get(flow_id=new_id, node_key="fetch")
    assert reused.result == {"rows": 3} and reused.meta["reused_from"]["flow"] == flow_id
    assert Job.objects.get(flow_id=new_id, node_key="parse").state == "available"
    audit = operator.get("/audit/").content.decode()
    assert "Input changed" in audit
    assert '<span class="add">+  &quot;label&quot;: &quot;parse v2&quot;</span>' in audit
    assert '<span class="add">+  &quot;fail&quot;: false,</span>' in audit  # added key
    flow_page = operator.get(f"/flows/{new_id}/").content.decode()
    assert f"reused from flow #{flow_id}" in flow_page


def test_viewers_cannot_rerun(viewer: Client) -> None:
    flow_id = chain()
    assert viewer.get(f"/flows/{flow_id}/rerun/?node=parse").status_code == 403
    assert "Rerun from here" not in viewer.get(f"/flows/{flow_id}/").content.decode()


def test_the_payload_diff_masks_secret_looking_keys() -> None:
    from queue_engine.ops.rerun import payload_diff

    diff = payload_diff(
        {"to": "a@example.com", "api_key": "old"}, {"to": "b@example.com", "api_key": "hunter2"}
    )
    assert '-  "to": "a@example.com"' in diff and '+  "to": "b@example.com"' in diff
    assert not any("hunter2" in line or "old" in line for line in diff)
    assert payload_diff({"a": 1}, {"a": 1}) == []


SECRET_PAYLOAD = {
    "api_token": "sk-live-ORIGINAL",
    "db_url": "postgres://u:pg-SECRET@h/db",
    "hosts": [{"name": "a", "pwd": "host-PWD"}],
}


def with_secrets() -> int:
    flow = Flow("sync")
    flow.add("fetch", jobs.node, label="fetch")
    flow.add("sync", jobs.connect, depends_on=["fetch"], **SECRET_PAYLOAD)
    flow_id = flow.submit()
    succeed_by_hand(Job.objects.get(flow_id=flow_id, node_key="fetch").pk, '{"rows": 3}')
    return flow_id


def rerun_with(operator: Client, flow_id: int, edit: dict[str, object]) -> tuple[int, str]:
    """Rerun `sync` with the editor's text (as shown) changed by `edit`; the new flow's id
    and the audit page."""
    page = operator.get(f"/flows/{flow_id}/rerun/?node=sync").content.decode()
    assert "sk-live" not in page and "pg-SECRET" not in page
    shown = json.loads(unescape(page.split("data-payload-editor>")[1].split("</textarea>")[0]))
    response = operator.post(
        f"/flows/{flow_id}/rerun/", {"node": "sync", "payload": json.dumps({**shown, **edit})}
    )
    assert response.status_code == 302, response.content.decode()
    return FlowRun.objects.latest("pk").pk, operator.get("/audit/").content.decode()


def test_the_rerun_editor_shows_secrets_masked(operator: Client) -> None:
    flow_id = with_secrets()

    page = operator.get(f"/flows/{flow_id}/rerun/?node=sync").content.decode()

    assert not [s for s in ("sk-live", "pg-SECRET", "host-PWD") if s in page]
    assert "&quot;api_token&quot;: &quot;********&quot;" in page
    assert "postgres://u:********@h/db" in page
    assert "&quot;pwd&quot;: &quot;********&quot;" in page
    assert "kept as they were" in page


def test_secrets_left_masked_rerun_with_their_original_values(operator: Client) -> None:
    flow_id = with_secrets()

    new_id, audit = rerun_with(operator, flow_id, {"marker": ""})

    assert Job.objects.get(flow_id=new_id, node_key="sync").payload == {
        **SECRET_PAYLOAD,
        "marker": "",
    }
    assert ": changed" not in audit
    assert not [s for s in ("sk-live", "pg-SECRET", "host-PWD") if s in audit]


def test_a_secret_typed_anew_is_sent_and_audited_without_either_value(operator: Client) -> None:
    flow_id = with_secrets()

    new_id, audit = rerun_with(
        operator, flow_id, {"api_token": "sk-live-NEW", "db_url": "postgres://u:pg-NEW@h/db"}
    )

    payload = Job.objects.get(flow_id=new_id, node_key="sync").payload
    assert payload["api_token"] == "sk-live-NEW"
    assert payload["db_url"] == "postgres://u:pg-NEW@h/db"
    assert payload["hosts"] == SECRET_PAYLOAD["hosts"]
    assert '<span class="">api_token: changed</span>' in audit
    assert '<span class="">db_url: changed</span>' in audit
    assert not [s for s in ("sk-live", "pg-SECRET", "pg-NEW", "host-PWD") if s in audit]


def test_a_mask_with_no_original_value_is_refused(operator: Client) -> None:
    flow_id = with_secrets()

    response = operator.post(
        f"/flows/{flow_id}/rerun/",
        {
            "node": "sync",
            "payload": json.dumps({**SECRET_PAYLOAD, "hosts": [{"secret": "********"}]}),
        },
    )

    assert response.status_code == 422
    assert "The payload still reads ******** at hosts[0].secret" in response.content.decode()
    assert FlowRun.objects.count() == 1
