"""NOTIFY channels: qe_wake (work in a queue), qe_events (console hints), qe_control."""

# A wake-up (sent at commit): a queue name for every worker of the queue, or a hint
# for some of them (worker/roster.py).
NOTIFY_WAKE = "SELECT pg_notify('qe_wake', %s)"


def microseconds(timestamp: str) -> str:
    """A timestamptz expression as whole microseconds since the epoch (exact)."""
    return f"(extract(epoch FROM {timestamp}) * 1000000)::bigint"


def wake_per_queue(rows: str, where: str = "true") -> str:
    """One wake-up per queue of `rows` (a relation with id, queue, labels, priority and
    run_at columns), in the payload the workers read (worker/roster.py): "<ticket>
    <count> <hops> <priority> <run_at> <queue>", the ticket being the lowest job id.
    Jobs that need labels wake every worker (count 0): only some may take them."""
    return f"""
    SELECT pg_notify('qe_wake', min(w.id) || ' '
           || CASE WHEN bool_or(w.labels <> '{{}}') THEN 0 ELSE count(*) END
           || ' 0 ' || max(w.priority) || ' ' || {microseconds("min(w.run_at)")}
           || ' ' || w.queue)
      FROM {rows} w WHERE {where} GROUP BY w.queue"""


# A wake-up about one job (if it is runnable), sent at commit.
NOTIFY_WAKE_JOB = wake_per_queue("queue_engine_job", "w.id = %s AND w.state = 'available'")


# One wake-up per queue, for every worker (a bare queue name: see worker/roster.py),
# sent at commit.
NOTIFY_QUEUES = """
SELECT pg_notify('qe_wake', q) FROM unnest(%s::varchar[]) AS q
"""


# Hints for the console: which jobs changed or logged (ids only, never rows).
NOTIFY_EVENT = "SELECT pg_notify('qe_events', %s)"


# Several console hints in one statement.
NOTIFY_EVENTS = "SELECT pg_notify('qe_events', e) FROM unnest(%s::text[]) AS e"


# A control message to every worker (an operator's cancel, a resumed queue).
NOTIFY_CONTROL = "SELECT pg_notify('qe_control', %s)"


# What a worker listens to: work in a queue, and control messages (an operator's
# cancel, a resumed queue).
LISTEN_WORKER = ("LISTEN qe_wake", "LISTEN qe_control")

# What the console's bridge listens to and relays to the browsers' websockets.
LISTEN_CONSOLE = ("LISTEN qe_events", "LISTEN qe_wake")
