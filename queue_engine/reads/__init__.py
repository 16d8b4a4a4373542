"""The read side: what the console and your code read, bounded on a large history.

Every function answers fast however big the tables grow: the live table is counted
exactly while it holds at most LIVE_SCAN jobs (above that, counts stop at COUNT_CAP
where an index allows and the rest are estimated from a sample), history counts stop
at COUNT_CAP and above it come from the metrics rollup, series read the rollup plus
the few rows it has not seen yet, and lists page by id under CONSOLE_STATEMENT_TIMEOUT
(`NarrowFilter` past it). All times come from the database clock.

    queues     counts by state, per-queue stats     series    metric series
    jobs       job pages, one job, its log lines     flows     flow pages, graphs, links
    failures   recent failures, dead-letter groups   activity  workers, the audit log
    timeline   a flow's nodes over time, its critical path
    kinds      every job kind: its jobs by state, its last hour, paused or not
    keys       a queue's group keys: waiting, running, share of starts, cap
    job_counts the jobs list's counts by state under its other filters
    schedules  the last fires of schedules, the jobs they enqueued
    timeout    the statement timeout they run under
    health     what holds vacuum back from the live table, and its dead rows
"""

from queue_engine.exceptions import FilterError, NarrowFilter
from queue_engine.reads.activity import (
    BUSY_LIMIT,
    WORKER_ALIVE_AFTER,
    alive_workers,
    audit_actions,
    audit_page,
    running_by_worker,
    workers,
)
from queue_engine.reads.failures import (
    DEAD_SCAN,
    DIGITS,
    DeadGroup,
    FailureGroup,
    dead_group_batches,
    dead_group_queryset,
    dead_groups,
    recent_failures,
)
from queue_engine.reads.flows import (
    MAX_FLOW_NODES,
    FlowFilter,
    FlowGraph,
    FlowLink,
    FlowLinks,
    FlowNode,
    FlowPage,
    FlowRow,
    flow_graph,
    flow_links,
    flow_state_counts,
    list_flows,
)
from queue_engine.reads.health import (
    HorizonHolder,
    VacuumHealth,
    vacuum_health,
)
from queue_engine.reads.job_counts import (
    capped_history_count,
    filtered_live_counts,
)
from queue_engine.reads.jobs import (
    LOG_TAIL,
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    ROW_FIELDS,
    SCAN_IDS,
    SORT_WINDOW,
    STEPS_SHOWN,
    JobFilter,
    JobPage,
    JobRow,
    SortedPage,
    check_filter,
    find_job,
    job_rows,
    job_states,
    job_steps,
    jobs_with_steps,
    like_pattern,
    list_jobs,
    log_around,
    log_lines_after,
    log_tail,
    sorted_jobs,
    stopping_jobs,
    succeeded_flow_nodes,
)
from queue_engine.reads.keys import (
    KEYS_SHOWN,
    SHARE_WINDOW,
    KeyStats,
    QueueKeys,
    queue_keys,
)
from queue_engine.reads.kinds import (
    KIND_SCAN,
    KindPage,
    KindRow,
    kinds,
)
from queue_engine.reads.queues import (
    COUNT_CAP,
    LIVE_SCAN,
    SAMPLE_PER_SCAN,
    QueueCounts,
    QueueStats,
    StateCount,
    exact_dead_count,
    queue_counts,
    queue_stats,
)
from queue_engine.reads.schedules import (
    FIRES_SHOWN,
    Fire,
    last_fires,
)
from queue_engine.reads.series import (
    MAX_POINTS,
    MAX_WINDOW,
    MIN_WINDOW,
    STEPS,
    KindFailures,
    Series,
    SeriesPoint,
    kind_failures,
    metric_series,
    queue_series,
    rolled_up_to,
    step_for,
)
from queue_engine.reads.timeline import (
    Failure,
    Span,
    Timeline,
    TimelineRow,
    flow_timeline,
)
from queue_engine.reads.timeout import (
    time_limited,
)

__all__ = [
    "BUSY_LIMIT",
    "COUNT_CAP",
    "DEAD_SCAN",
    "DIGITS",
    "FIRES_SHOWN",
    "KEYS_SHOWN",
    "KIND_SCAN",
    "LIVE_SCAN",
    "LOG_TAIL",
    "MAX_FLOW_NODES",
    "MAX_PAGE_SIZE",
    "MAX_POINTS",
    "MAX_WINDOW",
    "MIN_WINDOW",
    "PAGE_SIZE",
    "ROW_FIELDS",
    "SAMPLE_PER_SCAN",
    "SCAN_IDS",
    "SHARE_WINDOW",
    "SORT_WINDOW",
    "STEPS",
    "STEPS_SHOWN",
    "WORKER_ALIVE_AFTER",
    "DeadGroup",
    "Failure",
    "FailureGroup",
    "FilterError",
    "Fire",
    "FlowFilter",
    "FlowGraph",
    "FlowLink",
    "FlowLinks",
    "FlowNode",
    "FlowPage",
    "FlowRow",
    "HorizonHolder",
    "JobFilter",
    "JobPage",
    "JobRow",
    "KeyStats",
    "KindFailures",
    "KindPage",
    "KindRow",
    "NarrowFilter",
    "QueueCounts",
    "QueueKeys",
    "QueueStats",
    "Series",
    "SeriesPoint",
    "SortedPage",
    "Span",
    "StateCount",
    "Timeline",
    "TimelineRow",
    "VacuumHealth",
    "alive_workers",
    "audit_actions",
    "audit_page",
    "capped_history_count",
    "check_filter",
    "dead_group_batches",
    "dead_group_queryset",
    "dead_groups",
    "exact_dead_count",
    "filtered_live_counts",
    "find_job",
    "flow_graph",
    "flow_links",
    "flow_state_counts",
    "flow_timeline",
    "job_rows",
    "job_states",
    "job_steps",
    "jobs_with_steps",
    "kind_failures",
    "kinds",
    "last_fires",
    "like_pattern",
    "list_flows",
    "list_jobs",
    "log_around",
    "log_lines_after",
    "log_tail",
    "metric_series",
    "queue_counts",
    "queue_keys",
    "queue_series",
    "queue_stats",
    "recent_failures",
    "rolled_up_to",
    "running_by_worker",
    "sorted_jobs",
    "step_for",
    "stopping_jobs",
    "succeeded_flow_nodes",
    "time_limited",
    "vacuum_health",
    "workers",
]
