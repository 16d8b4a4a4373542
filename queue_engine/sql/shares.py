"""The claim's shares (sql/claim.py composes them): turns between a fair queue's group
keys, and between the queues of a worker started with weights (--queues a:3,b:1)."""

# How many keys of a fair queue one claim looks at, at most. Each costs two descents of
# qe_job_fair (the skip to the key, the read of its next jobs) and a look-up of its
# weight, so a claim of a queue with thousands of keys costs the same as one with
# FAIR_KEYS. The look starts at a random point in the keys' order (by hash) and wraps
# around: every key is looked at by a share of the claims, and a key that has waited
# then goes first, as it runs fewer jobs than the keys claims have served meanwhile.
FAIR_KEYS = 64

# A fair queue's candidates (QueueSettings.fair_share), beside those of its walk from
# the head of the queue (which brings its jobs without a key): the next jobs of each of
# its keys with runnable jobs, found by skipping from key to key through qe_job_fair
# (a loose index scan: one descent a key, however many jobs a key holds), so that a
# key with a backlog of any size fills no more than its share of the candidates. Each
# key gives its share of the room by weight, plus one: enough for every key's turn
# when the ranking below passes over a key at its cap. `walk` starts at `pivot` and
# wraps around to the keys before it.
FAIR_CANDIDATES = """
     UNION
    SELECT j.*, q.lock_duration, q.group_concurrency, q.grouped, q.capped, q.room, q.fair,
           q.rate_limit_per_key, q.rate_limit
      FROM q CROSS JOIN paused p
     CROSS JOIN LATERAL (SELECT (floor(random() * 4294967296) - 2147483648)::int AS pivot) r
     CROSS JOIN LATERAL (
            WITH RECURSIVE walk(h, key, wrapped, n) AS (
                SELECT s.h, s.key, s.wrapped, 1 FROM (
                    (SELECT hashtext(group_key) AS h, group_key AS key, false AS wrapped
                       FROM queue_engine_job
                      WHERE state = 'available' AND group_key IS NOT NULL AND queue = q.name
                        AND hashtext(group_key) >= r.pivot
                      ORDER BY hashtext(group_key), group_key LIMIT 1)
                     UNION ALL
                    (SELECT hashtext(group_key), group_key, true
                       FROM queue_engine_job
                      WHERE state = 'available' AND group_key IS NOT NULL AND queue = q.name
                      ORDER BY hashtext(group_key), group_key LIMIT 1)
                    LIMIT 1) s
                 UNION ALL
                SELECT s.h, s.key, s.wrapped, w.n + 1 FROM walk w CROSS JOIN LATERAL (
                    (SELECT hashtext(group_key) AS h, group_key AS key, false AS wrapped
                       FROM queue_engine_job
                      WHERE NOT w.wrapped AND state = 'available' AND group_key IS NOT NULL
                        AND queue = q.name AND (hashtext(group_key), group_key) > (w.h, w.key)
                      ORDER BY hashtext(group_key), group_key LIMIT 1)
                     UNION ALL
                    -- Past the wrap, up to the pivot: a bound in the index, not a filter
                    -- (which would walk the entries of every job past the pivot).
                    (SELECT hashtext(group_key), group_key, true
                       FROM queue_engine_job
                      WHERE w.wrapped AND state = 'available' AND group_key IS NOT NULL
                        AND queue = q.name AND (hashtext(group_key), group_key) > (w.h, w.key)
                        AND hashtext(group_key) < r.pivot
                      ORDER BY hashtext(group_key), group_key LIMIT 1)
                     UNION ALL
                    (SELECT hashtext(group_key), group_key, true
                       FROM queue_engine_job
                      WHERE NOT w.wrapped AND state = 'available' AND group_key IS NOT NULL
                        AND queue = q.name AND hashtext(group_key) < r.pivot
                      ORDER BY hashtext(group_key), group_key LIMIT 1)
                    LIMIT 1) s
                 WHERE w.n < {keys}
            ), weighed AS (
                SELECT w.h, w.key, COALESCE(g.weight, 1) AS weight
                  FROM walk w
                  LEFT JOIN queue_engine_groupweight g ON g.queue = q.name AND g.group_key = w.key
            )
            SELECT n.* FROM weighed s CROSS JOIN LATERAL (
                SELECT id, queue, group_key, priority, run_at
                  FROM queue_engine_job
                 WHERE state = 'available' AND group_key IS NOT NULL AND queue = q.name
                   AND hashtext(group_key) = s.h AND group_key = s.key AND run_at <= now()
                   AND {filters}
                 ORDER BY priority DESC, run_at, id
                 LIMIT ceil(q.room * s.weight::float8
                            / (SELECT sum(weight) FROM weighed))::int + 1
                   FOR UPDATE SKIP LOCKED
            ) n
           ) j
     WHERE q.fair AND q.room > 0"""

# A fair queue's job's turn: the jobs its key runs now plus its place among the key's
# candidates (priority orders them), over the key's weight. A key that runs many jobs,
# or whose jobs this claim already ranked ahead, waits behind the quiet keys; the jobs
# without a key share one turn, at weight 1. NULL in other queues. The running jobs are
# counted without the queue's lock: a turn orders, the rooms decide. Between keys at the
# same turn and priority, `spot` decides: the key's place after a point drawn at random
# for each claim, so that a key whose jobs are older (a backlog) does not win every tie,
# as it would when a worker runs one job at a time and no key ever runs one at its claim.
TURNS = """
), spin AS (
    SELECT floor(random() * 4294967296)::bigint AS pivot
), running_keys AS (
    SELECT x.queue, x.group_key, count(*) AS n FROM queue_engine_job x
     WHERE x.state = 'running' AND x.queue = ANY(ARRAY(SELECT name FROM q WHERE q.fair))
     GROUP BY x.queue, x.group_key
), turns AS (
    SELECT r.*,
           CASE WHEN r.fair THEN (COALESCE(k.n, 0) + r.nth_in_group)::float8
                / COALESCE((SELECT g.weight FROM queue_engine_groupweight g
                             WHERE g.queue = r.queue AND g.group_key = r.group_key), 1)
           END AS turn,
           CASE WHEN r.fair
                THEN mod(hashtext(r.group_key)::bigint + 2147483648 + s.pivot, 4294967296)
           END AS spot
      FROM ranked r CROSS JOIN spin s
      LEFT JOIN running_keys k
        ON k.queue = r.queue AND k.group_key IS NOT DISTINCT FROM r.group_key
"""

# The ranking of the claim without shares: no fair queue among its candidates, so no
# turns, and each queue's jobs in the order of priority alone.
NO_TURNS = """
), turns AS (
    SELECT r.* FROM ranked r
"""
UNFAIR_ORDER = (
    (
        "ORDER BY r.turn, r.priority DESC, r.spot, r.run_at, r.id",
        "ORDER BY r.priority DESC, r.run_at, r.id",
    ),
    (
        """,
           -- A fair queue's jobs go in the order of their turns among the other
           -- queues' jobs, all at the priority of the queue's best.
           max(r.priority) OVER (PARTITION BY r.queue) AS top""",
        "",
    ),
    (
        """CASE WHEN e.fair THEN e.top ELSE e.priority END DESC,
              CASE WHEN e.fair THEN e.nth_in_queue END, e.priority DESC""",
        "e.priority DESC",
    ),
)

# A worker's weighted queues (--queues a:3,b:1; worker/weights.py): the n-th job a claim
# takes of a queue comes at lag + n / weight, before priority, so that while every
# queue has work, claims take their jobs in the ratio of the weights. `lag` carries the
# turns over from the worker's earlier claims: a claim of one job still takes turns.
WEIGHTS = """
), weights AS (
    SELECT * FROM unnest(%(queues)s::varchar[], %(weights)s::float8[], %(lags)s::float8[])
           AS w(queue, weight, lag)
"""

JOIN_WEIGHTS = """
      LEFT JOIN weights w ON w.queue = e.queue"""

BY_WEIGHT = "COALESCE(w.lag, 0) + e.nth_in_queue::float8 / COALESCE(w.weight, 1), "

# The plain claim's pick between weighted queues (the plain one without weights
# ranks by priority alone).
PICK_PLAIN_WEIGHTED = (
    WEIGHTS
    + """), picked AS (
    SELECT e.id FROM (
        SELECT c.*, row_number() OVER (PARTITION BY c.queue
                                       ORDER BY c.priority DESC, c.run_at, c.id) AS nth_in_queue
          FROM candidates c) e"""
    + JOIN_WEIGHTS
    + """
     ORDER BY """
    + BY_WEIGHT
    + """e.priority DESC, e.run_at, e.id
     LIMIT %(limit)s
"""
)
