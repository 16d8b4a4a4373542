"""The scenarios, by name. Add one: write bench/scenarios/<name>.py with `NAME` and
`run(env) -> list[dict]`, and list it here (modules load after Django is set up)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from bench.harness import BenchEnv

SCENARIOS: dict[str, str] = {
    "enqueue_single": "bench.scenarios.enqueue_single",
    "enqueue_bulk": "bench.scenarios.enqueue_bulk",
    "drain": "bench.scenarios.drain",
    "drain_otel": "bench.scenarios.drain_otel",
    "steps": "bench.scenarios.steps",
    "drain_orm": "bench.scenarios.drain_orm",
    "latency": "bench.scenarios.latency",
    "retry_storm": "bench.scenarios.retry_storm",
    "flow_fanout": "bench.scenarios.flow_fanout",
    "flow_chain": "bench.scenarios.flow_chain",
    "drain_with_limits": "bench.scenarios.drain_with_limits",
    "console_pages": "bench.scenarios.console_pages",
    "reads_large": "bench.scenarios.reads_large",
    "cron_checks": "bench.scenarios.cron_checks",
    "steady": "bench.scenarios.steady",
    "backlog": "bench.scenarios.backlog",
    "drain_rtt": "bench.scenarios.drain_rtt",
    "pinned_snapshot": "bench.scenarios.pinned_snapshot",
    "many_workers": "bench.scenarios.many_workers",
    "gc": "bench.scenarios.gc",
    "soak": "bench.scenarios.soak",
    "parked": "bench.scenarios.parked",
    "signal_resume": "bench.scenarios.signal_resume",
    "rate_limit": "bench.scenarios.rate_limit",
    "fairness": "bench.scenarios.fairness",
}


class Scenario(Protocol):
    NAME: str

    def run(self, env: BenchEnv) -> list[dict[str, Any]]: ...


def load(name: str) -> Scenario:
    """Import a scenario module by its name (after django.setup())."""
    module = cast(Scenario, import_module(SCENARIOS[name]))
    declared = module.NAME
    if declared != name:
        raise RuntimeError(f"{SCENARIOS[name]} says NAME = {declared!r}, listed as {name!r}")
    return module
