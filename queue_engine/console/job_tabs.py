"""The jobs list's state tabs and their counts, under every filter an index can count;
where none can, the tab shows no count and one sentence says why."""

from __future__ import annotations

from dataclasses import dataclass

from queue_engine import reads
from queue_engine.console.job_filters import JobFilters
from queue_engine.reads.queues import COUNT_CAP, LIVE_SCAN
from queue_engine.states import ENDED_STATES, LIVE_STATES, STATE_WORDS, STATES


@dataclass(frozen=True)
class StateTab:
    state: str  # "" for every state
    count: int | None  # None: not counted, `why` says why
    exact: bool = True  # False: an estimate (a large live table, or a history above the cap)
    more: bool = False  # at least `count`: counted up to a cap
    why: str = ""


LIVE_TOO_BIG = (
    f"more than {LIVE_SCAN:,} jobs can still run, too many to count under this filter "
    "on each page load"
)
TOO_SLOW = "counting them took longer than the console allows"


def state_tabs(filters: JobFilters) -> list[StateTab]:
    """The jobs list's tabs, "All" first, each with its state's count under the filters:
    the queue counts (exact below the caps, estimated above) when only a queue is chosen,
    else counted boundedly, or left out with the reason."""
    if not filters.kind and not filters.unindexed:
        tabs = queue_tabs(filters.queue or None)
    else:
        tabs = live_tabs(filters) + [ended_tab(filters, state) for state in ENDED_STATES]
    counted = [t for t in tabs if t.count is not None]
    if len(counted) < len(tabs):
        return [StateTab("", None), *tabs]
    every = StateTab(
        "",
        sum(t.count or 0 for t in tabs),
        all(t.exact for t in tabs),
        any(t.more for t in tabs),
    )
    return [every, *tabs]


def queue_tabs(queue: str | None) -> list[StateTab]:
    queues = reads.queue_counts(queue)
    tabs = []
    for state in STATES:
        counts = [q.states[state] for q in queues]
        tabs.append(StateTab(state, sum(c.count for c in counts), all(c.exact for c in counts)))
    return tabs


def live_tabs(filters: JobFilters) -> list[StateTab]:
    try:
        counts = reads.filtered_live_counts(filters.read_filter())
    except reads.NarrowFilter:
        return [StateTab(state, None, why=TOO_SLOW) for state in LIVE_STATES]
    if counts is None:
        return [StateTab(state, None, why=LIVE_TOO_BIG) for state in LIVE_STATES]
    return [StateTab(state, counts.get(state, 0)) for state in LIVE_STATES]


def ended_tab(filters: JobFilters, state: str) -> StateTab:
    """One ended state's tab: counted up to COUNT_CAP when an index serves every filter
    (a queue, a kind, and for dead jobs in one queue an error class)."""
    names = [
        name
        for name in filters.unindexed
        if not (name == "error class" and state == "failed" and filters.queue)
    ]
    if names:
        return StateTab(state, None, why=f"no index counts ended jobs by {' or '.join(names)}")
    try:
        n = reads.capped_history_count(filters.read_filter(), state)  # type: ignore[arg-type]
    except reads.NarrowFilter:
        return StateTab(state, None, why=TOO_SLOW)
    return StateTab(state, min(n, COUNT_CAP), more=n > COUNT_CAP)


def left_out(tabs: list[StateTab]) -> list[str]:
    """One sentence per reason some tabs show no count, naming those tabs."""
    reasons: dict[str, list[str]] = {}
    for tab in tabs:
        if tab.state and tab.count is None:
            reasons.setdefault(tab.why, []).append(STATE_WORDS.get(tab.state, tab.state))
    return [f"No count for {words_list(states)}: {why}." for why, states in reasons.items()]


def words_list(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
