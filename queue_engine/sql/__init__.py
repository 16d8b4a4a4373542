"""Every statement the engine sends, named, with what it guarantees, one module per concern:

    enqueue    putting jobs in              claim      the claim
    settle     finished jobs' outcomes      running    heartbeats, progress, log lines
    flows      flow submit, release, state  leader     election, promotion, rescue, sweeps
    flow_ops   requeue, rerun, rerun from a node
    fan_out    a wide fan-out's children in ranges, counted down by the claims
    ops        operator actions             schedules  declarations and firing
    queues     queue configuration          maintenance  retention and the metrics rollup
    workers    worker registrations         notify     NOTIFY channels
    reads      what the console reads       console    the websockets' session check
    keys       a queue's group keys, for its page
    job_sorts  the jobs list in another order  fragments  pieces shared by several statements
    metrics    what GET /metrics reads beside the queue counts
    timeline   a flow's failed attempts, for its timeline
    history    the history's partitions and the windows that expire them
    steps      durable steps: what ctx.step() reads and records
    kinds      the kill switch per job kind, and the Kinds page
    upstream   flow nodes that can no longer run (an ancestor dead or cancelled)
    waits      signals, and jobs parked until a signal or a time
    results    what job_result and flow_result read
    shares     the claim's turns: fair share between keys, a worker's weighted queues

Parameters are always bound; table names are fixed by the models' db_table. The package
exports every statement, so that code reads `sql.CLAIM` whatever module holds it.
"""

from queue_engine.sql.claim import *  # noqa: F403
from queue_engine.sql.console import *  # noqa: F403
from queue_engine.sql.enqueue import *  # noqa: F403
from queue_engine.sql.fan_out import *  # noqa: F403
from queue_engine.sql.flow_ops import *  # noqa: F403
from queue_engine.sql.flows import *  # noqa: F403
from queue_engine.sql.fragments import *  # noqa: F403
from queue_engine.sql.history import *  # noqa: F403
from queue_engine.sql.job_sorts import *  # noqa: F403
from queue_engine.sql.keys import *  # noqa: F403
from queue_engine.sql.kinds import *  # noqa: F403
from queue_engine.sql.leader import *  # noqa: F403
from queue_engine.sql.maintenance import *  # noqa: F403
from queue_engine.sql.metrics import *  # noqa: F403
from queue_engine.sql.notify import *  # noqa: F403
from queue_engine.sql.ops import *  # noqa: F403
from queue_engine.sql.queues import *  # noqa: F403
from queue_engine.sql.reads import *  # noqa: F403
from queue_engine.sql.results import *  # noqa: F403
from queue_engine.sql.running import *  # noqa: F403
from queue_engine.sql.schedules import *  # noqa: F403
from queue_engine.sql.settle import *  # noqa: F403
from queue_engine.sql.steps import *  # noqa: F403
from queue_engine.sql.timeline import *  # noqa: F403
from queue_engine.sql.upstream import *  # noqa: F403
from queue_engine.sql.waits import *  # noqa: F403
from queue_engine.sql.workers import *  # noqa: F403
