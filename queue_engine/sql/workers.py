"""The workers' own registrations, which the console lists."""

# A worker's registration, written at start and again if a sweep removed it.
REGISTER_WORKER = """
INSERT INTO queue_engine_workerprocess
       (id, host, pid, queues, labels, concurrency, in_flight, is_leader, started_at, heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s::varchar[], %(labels)s::varchar[],
        %(concurrency)s, 0, false, now(), now())
ON CONFLICT (id) DO UPDATE
   SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
       labels = EXCLUDED.labels, concurrency = EXCLUDED.concurrency,
       started_at = now(), heartbeat_at = now(), in_flight = 0
"""


# A worker is alive: its heartbeat, its jobs in flight, whether it leads.
WORKER_HEARTBEAT = """
UPDATE queue_engine_workerprocess
   SET heartbeat_at = now(), in_flight = %(in_flight)s, is_leader = %(is_leader)s
 WHERE id = %(id)s
"""


# The workers alive now (a heartbeat within %(fresh)s seconds), for the ring the
# wake-up hints go round (worker/roster.py). Read at every heartbeat.
LIVE_WORKERS = """
SELECT id, queues, concurrency, in_flight FROM queue_engine_workerprocess
 WHERE heartbeat_at > now() - make_interval(secs => %(fresh)s)
"""


# A worker that stops removes its registration.
UNREGISTER_WORKER = "DELETE FROM queue_engine_workerprocess WHERE id = %s"


# Every worker connection's session. JIT compiles any plan its estimate calls
# expensive: the claim's generic plan (a guessed LIMIT) crosses jit_above_cost, and
# compiling it costs far more than the statement's run. Nothing a worker sends wants it.
WORKER_SESSION = ("SET jit = off",)
