-- The rooms of the limited queues among a claim's candidates (those with a cap, a rate
-- limit or group caps) and of their group keys, from one count under their locks
-- (sql.CLAIM calls it once per claim that meets a limited queue).
--
-- The queues are locked in name order (so two claimers never deadlock), then one
-- statement with a fresh snapshot (it sees every claim committed before this claimer
-- held the locks) counts their running jobs by key and returns:
--   * a row per key among p_keys: its room under its cap (the GroupLimit override,
--     else the queue's default in p_defaults) and, in a queue whose rate limit applies
--     per key, under the key's own budget (the GroupLimit's rate_limit, else the
--     queue's). Key '' stands for the jobs without a key: no cap, one shared budget;
--   * a row per queue with a NULL key: its room under its cap and its rate limit (the
--     queue-wide one; none when the limit applies per key), at most p_want.
-- A room is never negative; no limit reads as 2147483647. A budget is counted in the
-- claim log under its own group_key ('' for the queue's), read by its index.
--
-- The rate limit holds in every window as long as the rate window, whatever the claims
-- race with. The window ends at the clock read once the locks are held (v_now), not at
-- now(), the start of a transaction that may have waited for them: so every job this
-- claim starts starts at v_now or later. Every claim of the queue that committed before
-- holds the stamp of its span in the claim log, and sql.CLAIM stamps a span with its end
-- after the clock that follows the claim's UPDATE: a stamp is later than every start it
-- counts. So a start s in the window ending at one of this claim's starts s'
-- (s > s' - window >= v_now - window) has its stamp past v_now - window, and is counted.
-- Claims of the queue take turns on its lock, so no uncounted claim starts jobs
-- between the count and this claim's commit.
CREATE OR REPLACE FUNCTION queue_engine_limited_rooms(
    p_locked text[], p_want int, p_queues text[], p_keys text[], p_defaults int[]
) RETURNS TABLE (queue text, group_key text, room int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('queue_engine:queue:' || l.name, 0))
       FROM (SELECT DISTINCT name FROM unnest(p_locked) AS l(name) ORDER BY name) l;
    v_now := clock_timestamp();
    RETURN QUERY
    WITH counts AS (
        SELECT j.queue::text AS queue, j.group_key::text AS group_key, count(*)::int AS n
          FROM queue_engine_job j
         WHERE j.state = 'running' AND j.queue = ANY(p_locked)
         GROUP BY j.queue, j.group_key
    )
    SELECT k.queue, k.group_key, GREATEST(LEAST(
               2147483647,
               k.cap - COALESCE(c.n, 0),
               CASE WHEN k.rate IS NOT NULL THEN k.rate - (
                   SELECT COALESCE(sum(l.count), 0) FROM queue_engine_claimlog l
                    WHERE l.queue = k.queue AND l.group_key = k.group_key
                      AND l.at > v_now - make_interval(secs => k.rate_window)) END
           ), 0)::int
      FROM (SELECT DISTINCT u.queue, u.group_key,
                   COALESCE(g.max_concurrency, u.dflt) AS cap,
                   CASE WHEN q.rate_limit_per_key THEN COALESCE(g.rate_limit, q.rate_limit)
                   END AS rate,
                   q.rate_window
              FROM unnest(p_queues, p_keys, p_defaults) AS u(queue, group_key, dflt)
              JOIN queue_engine_queueconfig q ON q.name = u.queue
              LEFT JOIN queue_engine_grouplimit g
                ON g.queue = u.queue AND g.group_key = u.group_key) k
      LEFT JOIN counts c ON c.queue = k.queue AND c.group_key = k.group_key
    UNION ALL
    SELECT q.name::text, NULL::text, GREATEST(LEAST(
               p_want,
               q.max_concurrency - (SELECT COALESCE(sum(c.n), 0) FROM counts c
                                     WHERE c.queue = q.name),
               CASE WHEN NOT q.rate_limit_per_key THEN q.rate_limit - (
                   SELECT COALESCE(sum(l.count), 0) FROM queue_engine_claimlog l
                    WHERE l.queue = q.name
                      AND l.at > v_now - make_interval(secs => q.rate_window)) END
           ), 0)::int
      FROM queue_engine_queueconfig q
     WHERE q.name = ANY(p_locked);
END
$$;


-- What the claim (sql.CLAIM) needs to know of its limited queues, counted once under
-- their locks: for each queue in p_queues (those with a cap, a rate limit or group caps
-- that have a runnable job), a row per group key ('' for the jobs without one) with
--   * running: the jobs of that key running now, and
--   * started: the starts in the claim log of that budget within its queue's rate
--     window ('' is the queue's own budget, or the budget the jobs without a key share
--     where the rate limit applies per key).
-- The claim derives every room from these rows: the queue's room under its cap and its
-- rate limit, the keys already at their cap or out of their budget (whose jobs it
-- passes over as it reads candidates), and each candidate key's room. One count serves
-- all three, and it is exact: the claim reads its candidates and ranks them after it.
--
-- The queues are locked in name order (so two claimers never deadlock), then one
-- statement with a fresh snapshot (it sees every claim committed before this claimer
-- held the locks) counts. The locks are held until the claim's transaction ends:
-- claimers of a limited queue take turns, so no uncounted claim starts jobs between
-- the count and this claim's commit.
--
-- The rate limit holds in every window as long as the rate window, whatever the claims
-- race with. The window ends at the clock read once the locks are held (v_now), not at
-- now(), the start of a transaction that may have waited for them: so every job this
-- claim starts starts at v_now or later. Every claim of the queue that committed before
-- holds the stamp of its span in the claim log, and sql.CLAIM stamps a span with its end
-- after the clock that follows the claim's UPDATE: a stamp is later than every start it
-- counts. So a start s in the window ending at one of this claim's starts s'
-- (s > s' - window >= v_now - window) has its stamp past v_now - window, and is counted.
--
-- (queue_engine_limited_rooms above is what the claim of earlier versions calls: it
-- stays while their workers may still run beside these, during an upgrade.)
CREATE OR REPLACE FUNCTION queue_engine_limited_counts(p_queues text[])
RETURNS TABLE (queue text, group_key text, running int, started int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('queue_engine:queue:' || l.name, 0))
       FROM (SELECT DISTINCT name FROM unnest(p_queues) AS l(name) ORDER BY name) l;
    v_now := clock_timestamp();
    RETURN QUERY
    WITH running AS (
        SELECT j.queue::text AS queue, COALESCE(j.group_key, '')::text AS group_key,
               count(*)::int AS n
          FROM queue_engine_job j
         WHERE j.state = 'running' AND j.queue = ANY(p_queues)
         GROUP BY j.queue, COALESCE(j.group_key, '')
    ), started AS (
        SELECT l.queue::text AS queue, l.group_key::text AS group_key, sum(l.count)::int AS n
          FROM queue_engine_queueconfig q
          JOIN queue_engine_claimlog l
            ON l.queue = q.name AND l.at > v_now - make_interval(secs => q.rate_window)
         WHERE q.name = ANY(p_queues) AND (q.rate_limit IS NOT NULL OR q.rate_limit_per_key)
         GROUP BY l.queue, l.group_key
    )
    SELECT COALESCE(r.queue, s.queue), COALESCE(r.group_key, s.group_key),
           COALESCE(r.n, 0), COALESCE(s.n, 0)
      FROM running r FULL JOIN started s ON s.queue = r.queue AND s.group_key = r.group_key;
END
$$;
