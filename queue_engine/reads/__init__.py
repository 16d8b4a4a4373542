"""The read side: what the console and the JSON API read, bounded on a large history.

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
    schedules  the last fires of schedules, the jobs they enqueued
    timeout    the statement timeout they run under
    health     what holds vacuum back from the live table, and its dead rows
"""

from queue_engine.exceptions import FilterError as FilterError
from queue_engine.exceptions import NarrowFilter as NarrowFilter
from queue_engine.reads.activity import *  # noqa: F403
from queue_engine.reads.failures import *  # noqa: F403
from queue_engine.reads.flows import *  # noqa: F403
from queue_engine.reads.health import *  # noqa: F403
from queue_engine.reads.jobs import *  # noqa: F403
from queue_engine.reads.kinds import *  # noqa: F403
from queue_engine.reads.queues import *  # noqa: F403
from queue_engine.reads.schedules import *  # noqa: F403
from queue_engine.reads.series import *  # noqa: F403
from queue_engine.reads.timeline import *  # noqa: F403
from queue_engine.reads.timeout import *  # noqa: F403
