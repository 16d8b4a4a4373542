"""What the flows pages show: the list (filters in the URL, keyset pages) and one flow as a
graph with its timeline, waiting gates and the actions its state allows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest
from django.utils import timezone

from queue_engine import reads, states
from queue_engine.console.job_filters import RANGES
from queue_engine.console.params import int_param
from queue_engine.exceptions import NarrowFilter
from queue_engine.gates import GATE_KIND
from queue_engine.models import Job
from queue_engine.ops import flows as ops_flows

RANGE_CHOICES = [
    ("", "Any time"),
    ("15m", "Last 15 min"),
    ("1h", "Last hour"),
    ("24h", "Last 24 h"),
    ("7d", "Last 7 days"),
]


@dataclass(frozen=True)
class FlowAction:
    run: Callable[..., int]
    title: str  # "Cancel flow"
    explain: str  # what it will do, shown before it is done
    done: str  # "{n} node(s) cancelled"
    danger: bool = False


ACTIONS: dict[str, FlowAction] = {
    "cancel": FlowAction(
        ops_flows.cancel_flow,
        "Cancel flow",
        "Every node that has not ended is cancelled: waiting ones at once, running ones "
        "when their handler next checks (async handlers are interrupted). Nodes that "
        "already succeeded stay done. The flow ends as cancelled.",
        "{n} node{s} cancelled",
        danger=True,
    ),
    "requeue": FlowAction(
        ops_flows.requeue_flow,
        "Requeue flow",
        "Only its dead and cancelled nodes run again, with fresh attempts; their "
        "dependants wait for them again. What already succeeded is kept, outputs included.",
        "{n} node{s} requeued",
    ),
    "rerun": FlowAction(
        ops_flows.rerun_flow,
        "Rerun flow",
        "A new flow is created with the same nodes, inputs and edges, and runs from the "
        "start. This flow is left as it is.",
        "rerun as flow #{n}",
    ),
}


def allowed_actions(state: str) -> list[str]:
    """What an operator may do to a flow in this state (the ops enforce it too)."""
    if state == "running":
        return ["cancel", "rerun"]
    if state in ("failed", "cancelled"):
        return ["requeue", "rerun"]
    return ["rerun"]


@dataclass
class FlowFilters:
    state: str = ""
    q: str = ""
    range: str = ""

    @classmethod
    def from_query(cls, params: Any) -> FlowFilters:
        state = params.get("state", "").strip()
        span = params.get("range", "").strip()
        return cls(
            state=state if state in states.FLOW_STATES else "",
            q=params.get("q", "").strip()[:200],
            range=span if span in RANGES else "",
        )

    @property
    def active(self) -> bool:
        return bool(self.state or self.q or self.range)

    def read_filter(self) -> reads.FlowFilter:
        return reads.FlowFilter(
            state=self.state or None,
            text=self.q or None,
            since=timezone.now() - RANGES[self.range] if self.range else None,
        )


def flows_context(request: HttpRequest) -> dict[str, Any]:
    filters = FlowFilters.from_query(request.GET)
    before, after = int_param(request.GET, "before"), int_param(request.GET, "after")
    if before is not None and after is not None:
        after = None
    error = ""
    try:
        page = reads.list_flows(filters.read_filter(), before=before, after=after)
        counts = reads.flow_state_counts(filters.read_filter(), cap=reads.COUNT_CAP)
        tabs = state_tabs(counts)
    except NarrowFilter as exc:
        page, error = reads.FlowPage([], None, None), str(exc)
        tabs = [FlowTab(state, None) for state in ("", *states.FLOW_STATES)]
    return {
        "page": "flows",
        "filters": filters,
        "flows": page,
        "tabs": tabs,
        "count_cap": reads.COUNT_CAP,
        "error": error,
        "ranges": RANGE_CHOICES,
    }


@dataclass(frozen=True)
class FlowTab:
    state: str  # "" for every state
    count: int | None  # None: not counted (the filter took too long); above the cap: cap + 1

    @property
    def more(self) -> bool:
        """Whether there are more than the count says (it stopped at the cap)."""
        return self.count is not None and self.count > reads.COUNT_CAP


def state_tabs(counts: dict[str, int]) -> list[FlowTab]:
    """The flows list's tabs, "All" first, each with its count of the flows the search and
    time range match, as the jobs list's tabs."""
    tabs = [FlowTab(state, counts.get(state, 0)) for state in states.FLOW_STATES]
    return [FlowTab("", sum(t.count or 0 for t in tabs)), *tabs]


TIMELINE_NODES = 1_000  # a drawn graph stops at MAX_FLOW_NODES; a list of bars reads further


def flow_context(flow_id: int, *, timeline: bool = False) -> dict[str, Any]:
    """What the flow page shows; with `timeline`, up to TIMELINE_NODES nodes are read once,
    the timeline lists them and the graph draws the first MAX_FLOW_NODES."""
    read = reads.flow_graph(flow_id, max_nodes=TIMELINE_NODES if timeline else reads.MAX_FLOW_NODES)
    if read is None:
        raise Http404(f"Flow {flow_id} does not exist (it may have been pruned).")
    graph = read.first(reads.MAX_FLOW_NODES)
    context = {
        "flow": graph.flow,
        "graph": graph,
        "graph_data": graph_data(graph),
        "flow_actions": allowed_actions(graph.flow.state),
        "actions": ACTIONS,
        "gates": waiting_gates(flow_id),
    }
    if timeline:
        context["timeline"] = reads.flow_timeline(read)
    return context


def waiting_gates(flow_id: int) -> list[tuple[str, list[str]]]:
    """The signals the flow's unopened gates wait for, each with its gates' keys."""
    found: dict[str, list[str]] = {}
    for key, payload in (
        Job.objects.filter(flow_id=flow_id, kind=GATE_KIND)
        .order_by("id")
        .values_list("node_key", "payload")
    ):
        found.setdefault(payload["signal"], []).append(key or "")
    return sorted(found.items())


def graph_data(graph: reads.FlowGraph) -> dict[str, Any]:
    """What the page's script draws (through `json_script`): nodes and edges, no
    payloads or outputs (nothing to mask)."""
    return {
        "nodes": [
            {
                "id": node.id,
                "key": node.key,
                "label": node.display_name,
                "state": node.state,
                "attempt": node.attempt,
                "progress": node.progress,
                # upstream_failed: the key of the ancestor that ended it
                "cause": (node.upstream or {}).get("key"),
                "gate": node.kind == GATE_KIND,
            }
            for node in graph.nodes
        ],
        "edges": [[parent, child, dynamic] for parent, child, dynamic in graph.edges],
        "spawns": [[spawner, child] for spawner, child in graph.spawns],
    }
