"""NOTIFY channels: qe_wake (work in a queue), qe_events (console hints), qe_control."""

# A wake-up for workers of one queue (sent at commit).
NOTIFY_WAKE = "SELECT pg_notify('qe_wake', %s)"


# One wake-up per queue that got runnable jobs, sent at commit.
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
