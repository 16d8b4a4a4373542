"""What an operator sees of a failed flow (nodes that can no longer run, spawned nodes hung
off their spawner) and the flows list's state tabs, in Chromium, light and dark."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Server, screenshot, wait_until
from tests.support.workers import Workers

SHOTS = Path("/work/wt/shots")


def shot(page: Any, name: str) -> None:
    """The screenshot in tests/artifacts, and a copy where reviewers look at them."""
    path = screenshot(page, name)
    if SHOTS.is_dir():
        shutil.copy(path, SHOTS / f"flows-{name}.png")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_failed_flow_shows_what_can_no_longer_run_and_a_requeue_runs_it(
    new_page: Any, server: Server, workers: Workers, executions: None, tmp_path: Path, scheme: str
) -> None:
    from queue_engine.flows import Flow
    from tests.support import jobs

    fix = tmp_path / "fixed"
    flow = Flow("stock count")
    flow.add("stock", jobs.spawn_one_failing, path=str(fix))
    flow.add("join", jobs.collect, depends_on=["stock"])
    flow.add("report", jobs.node, label="report", depends_on=["join"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")
    page = new_page("operator", color_scheme=scheme)

    page.goto(f"{server.url}/flows/{flow_id}/")
    page.wait_for_selector("#flow-state-badge.s-failed", timeout=20000)
    page.wait_for_selector("#flow-graph .node.s-upstream_failed >> nth=1", timeout=10000)
    graph = page.locator("#flow-graph")
    join = graph.locator(".node.s-upstream_failed", has_text="join")
    join_text = join.first.text_content()
    spawn_edges = graph.locator("path.edge.spawn").count()
    keys = sorted(t.strip() for t in graph.locator(".node text:not(.state)").all_text_contents())
    row = page.inner_text("#flow-nodes tr:has-text('report')")
    head = page.inner_text("#flow-head")
    band = page.evaluate(
        "getComputedStyle(document.querySelector('#flow-graph .node.s-upstream_failed rect.band'))"
        ".fill"
    )
    waiting = page.evaluate(
        "(() => { const d = document.createElement('span'); d.className = 'dot s-blocked';"
        " document.body.append(d); const c = getComputedStyle(d).backgroundColor; d.remove();"
        " return c; })()"
    )
    # Every state's share of the bar shows, side by side inside it (none pushed out).
    bar = page.evaluate(
        "(() => { const s = document.querySelector('#flow-head .stack.wide').getBoundingClientRect();"
        " return [...document.querySelectorAll('#flow-head .stack.wide .seg')].map(g => {"
        " const r = g.getBoundingClientRect(); return [g.className, r.top === s.top, r.width > 0]; }); })()"
    )
    shot(page, f"failed-flow-{scheme}")

    assert keys == ["join", "report", "stock", "stock[0]", "stock[flaky]"]  # no job id inside
    assert spawn_edges == 2  # stock -> each child it spawned: no longer drawn as roots
    assert "upstream failed: stock[flaky]" in (join_text or "")
    assert "Can no longer run: its ancestor join is" not in row  # the cause is the dead node
    assert "Can no longer run: its ancestor stock[flaky] is dead" in row
    assert "2 upstream failed" in head and "waiting" not in head
    assert band != waiting  # not painted as a node that waits
    assert bar == [
        ["seg s-succeeded", True, True],
        ["seg s-upstream_failed", True, True],
        ["seg s-failed", True, True],
    ]
    assert page.errors == []

    fix.touch()
    page.click("#flow-head button:has-text('Requeue flow')")
    page.click("button[type=submit]:has-text('Requeue flow')")
    page.wait_for_selector("#flow-state-badge.s-succeeded", timeout=20000)
    wait_until(page, "!document.querySelector('#flow-graph .node.s-upstream_failed')")
    assert page.locator("#flow-graph .node.s-succeeded").count() == 5


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_flows_list_has_state_tabs_with_counts(
    new_page: Any, server: Server, scheme: str
) -> None:
    from queue_engine.flows import Flow
    from queue_engine.ops import flows as ops_flows
    from tests.support import jobs
    from tests.support.flow_nodes import end_node

    ids = []
    for name in ("nightly etl", "nightly billing", "hourly sync", "nightly import"):
        flow = Flow(name)
        flow.add("extract", jobs.node, label="extract")
        flow.add("load", jobs.node, label="load", depends_on=["extract"])
        ids.append(flow.submit())
    end_node(ids[3], "extract", "failed")
    ops_flows.cancel_flow(ids[2], actor="ops")
    page = new_page("viewer", color_scheme=scheme)

    page.goto(f"{server.url}/flows/")
    tabs = page.locator("nav[aria-label='Flow states'] a").all_inner_texts()
    shot(page, f"flows-list-{scheme}")
    page.click("nav[aria-label='Flow states'] a:has-text('Failed')")
    page.wait_for_url("**/flows/?state=failed")
    failed_list = page.inner_text("#flow-results tbody")
    page.locator("#f-q").press_sequentially("billing")
    # The counts follow the search (the live socket follows it too, once told the query).
    after_search = wait_until(
        page,
        "(() => { const t = [...document.querySelectorAll(\"nav[aria-label='Flow states'] a\")]"
        ".map(a => a.textContent.split(/\\s+/).join(' ').trim());"
        " return t[0] === 'All 1' && t[1] === 'Running 1' && t; })()",
    )

    assert [" ".join(t.split()) for t in tabs] == [
        "All 4",
        "Running 2",
        "Succeeded 0",
        "Failed 1",
        "Cancelled 1",
    ]
    assert "nightly import" in failed_list and "nightly etl" not in failed_list
    # The state stays chosen while the search narrows the counts.
    assert after_search[:2] == ["All 1", "Running 1"]
    assert page.url.endswith("state=failed") or "state=failed" in page.url
    assert page.errors == []
