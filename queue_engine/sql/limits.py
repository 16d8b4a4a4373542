"""The claim's limits (sql/claim.py composes them): the keys at their cap or out of budget,
the room guessed without a lock and whether claims go side by side, and the rate limit's
log of starts with what a claim left behind."""

FULL_KEYS = """
           -- Keys already at their cap, by a count without a lock: their waiting jobs
           -- are passed over when candidates are read, so that a busy key with a
           -- backlog never fills the candidates and starves the other keys. (The
           -- count under the lock, in rooms, still decides; a key that frees room
           -- meanwhile is read again by the next claim.)
           CASE WHEN k.grouped THEN (
               SELECT array_agg(f.group_key) FROM (
                   SELECT r.group_key
                     FROM (SELECT r.group_key, count(*) AS running
                             FROM queue_engine_job r
                            WHERE r.state = 'running' AND r.queue = c.name
                              AND r.group_key IS NOT NULL
                            GROUP BY r.group_key) r
                     LEFT JOIN queue_engine_grouplimit g
                       ON g.queue = c.name AND g.group_key = r.group_key
                    WHERE r.running >= COALESCE(g.max_concurrency, c.group_concurrency)
                   UNION  -- keys held at 0, which run nothing
                   SELECT g.group_key FROM queue_engine_grouplimit g
                    WHERE g.queue = c.name AND g.max_concurrency = 0
                   UNION  -- keys ('' for jobs without one) that spent their own budget
                   SELECT l.group_key
                     FROM queue_engine_claimlog l
                     LEFT JOIN queue_engine_grouplimit g
                       ON g.queue = c.name AND g.group_key = l.group_key
                    WHERE c.rate_limit_per_key AND l.queue = c.name
                      AND l.at > now() - make_interval(secs => c.rate_window)
                    GROUP BY l.group_key, g.rate_limit
                   HAVING sum(l.count) >= COALESCE(g.rate_limit, c.rate_limit)) f)
           END"""

HEADROOM = """
           -- Without the queue's lock: its room under its cap and its queue-wide rate
           -- limit (NULL: it has neither).
           LEAST(
               CASE WHEN c.max_concurrency IS NOT NULL THEN c.max_concurrency - (
                   SELECT count(*) FROM queue_engine_job r
                    WHERE r.state = 'running' AND r.queue = c.name) END,
               CASE WHEN c.rate_limit IS NOT NULL AND NOT c.rate_limit_per_key
                    THEN c.rate_limit - (
                   SELECT COALESCE(sum(l.count), 0) FROM queue_engine_claimlog l
                    WHERE l.queue = c.name
                      AND l.at > now() - make_interval(secs => c.rate_window)) END
           )"""

# A capped queue is claimed side by side while its room (guessed without a lock) leaves
# SIDE_BY_SIDE_MOST jobs to each of SIDE_BY_SIDE_SLOTS claimers: each takes at most that
# many, and leaves what the others on their way may take (queue_engine_claim_rooms). A
# worker's claims of it go side by side too (its two lanes; worker/lanes.py), so four
# slots let two workers' lanes claim at once; a claimer more waits for a slot. Workers
# of a fleet must agree on both: they are part of the bound that keeps a cap.
SIDE_BY_SIDE_SLOTS = 4
SIDE_BY_SIDE_MOST = 64

# A capped queue with room for every claimer that may be on its way is claimed side by
# side (queue_engine_claim_rooms, schema/claim.sql), else alone. (The plain claim, which
# takes nothing of a capped queue, reports it as claimed alone: `limited`.)
SIDE_BY_SIDE = """
           (c.max_concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR k.grouped)
           AND (h.headroom IS NULL OR h.headroom >= {room})"""


LOGGED_HELD = """
), logged AS (
    -- Starts are counted per span of a 600th of the rate window (at least 0.1 s), each
    -- row stamped with its span's end: a window's sum reads at most about 600 rows
    -- however many claims fell in it (with a row per claim, each sum would read every
    -- claim of the window, twice a claim, at any rate). A span reaching
    -- into the window counts whole: the limit errs by at most one span, towards fewer
    -- starts. The span is the one holding the latest clock read as the claimed rows
    -- arrive, each after its UPDATE, so the stamp is later than every start it counts;
    -- not now(): the claim's transaction may have begun well before, waiting for the
    -- queue's lock, and a stamp earlier than a start lets that start out of the window
    -- too soon (the proof is at queue_engine_limited_rooms, schema/claim.sql).
    -- Under the key's own budget where the rate limit applies per key, else the
    -- queue's ('').
    INSERT INTO queue_engine_claimlog AS l (queue, group_key, at, count)
    SELECT claimed.queue, b.budget,
           to_timestamp(
               ((floor(extract(epoch FROM max(clock_timestamp())) / s.span) + 1) * s.span)::float8
           ),
           count(*)
      FROM claimed JOIN q ON q.name = claimed.queue
      JOIN candidates c ON c.id = claimed.id
     -- Per key, spans of a 60th: each claim of the queue sums every key's window to
     -- find the keys out of budget (q.full_keys), and that read grows with the keys.
     CROSS JOIN LATERAL (
           SELECT GREATEST(q.rate_window / CASE WHEN q.rate_limit_per_key THEN 60.0
                                                ELSE 600.0 END, 0.1) AS span) s
     CROSS JOIN LATERAL (SELECT CASE WHEN q.rate_limit_per_key THEN COALESCE(c.group_key, '')
                                     ELSE '' END AS budget) b
     WHERE q.rate_limit IS NOT NULL OR q.rate_limit_per_key
     GROUP BY claimed.queue, b.budget, s.span
        ON CONFLICT (queue, group_key, at) DO UPDATE SET count = l.count + EXCLUDED.count
), held AS (
    -- Queues this claim read candidates of and left some (a cap, a busy key's room, the
    -- rate limit) while it took fewer jobs than it wanted. The worker claims again soon
    -- (worker/lanes.py, HELD_BACK_FIRST) instead of at its next poll: the next claim
    -- passes over the keys this one filled. Counted from what the claim already holds:
    -- a look into the queue for more work, under the queue's lock, would lengthen
    -- every claim of a limited queue, and the lock's turns with it.
    SELECT c.queue FROM candidates c
     WHERE (SELECT count(*) FROM picked) < %(limit)s
       AND c.id <> ALL(ARRAY(SELECT id FROM picked))
     GROUP BY c.queue
), rate_waits AS (
    -- Rate-limited queues whose limits this claim met while it took fewer jobs than it
    -- wanted (candidates left, keys passed over, no room guessed): how long until the
    -- oldest span of their window leaves it, when room may come back. The worker claims
    -- again then (worker/lanes.py), or at its next poll if that comes first.
    SELECT q.name,
           ceil(1000 * extract(epoch FROM min(l.at) + make_interval(secs => q.rate_window)
                                          - clock_timestamp()))::int AS wait_ms
      FROM q JOIN queue_engine_claimlog l ON l.queue = q.name
     WHERE (q.rate_limit IS NOT NULL OR q.rate_limit_per_key)
       AND (SELECT count(*) FROM picked) < %(limit)s
       AND (q.room_guess = 0 OR q.full_keys IS NOT NULL OR q.name IN (SELECT queue FROM held))
       AND l.at > clock_timestamp() - make_interval(secs => q.rate_window)
     GROUP BY q.name, q.rate_window
"""
