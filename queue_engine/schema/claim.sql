-- The rooms of the limited queues among a claim's candidates (those with a cap, a rate
-- limit or group caps) and of their group keys, from one count under their locks
-- (sql.CLAIM calls it once per claim that meets a limited queue).
--
-- Each queue is locked in its turn, in name order, one of two ways (every lock is
-- taken in the order queue, its lock, its slot, its keys' buckets, the next queue:
-- two claimers never deadlock):
--   * alone (a queue not in p_fast): the queue's lock, exclusive. No other claim of the
--     queue is on its way while this one counts, picks and commits;
--   * side by side (p_fast: the claim guessed, without a lock, that the queue has room
--     for every claimer that may be on its way): the queue's lock shared, then one of
--     p_slots slots (the first free from a random one, else a wait for one), then the
--     buckets of the candidates' keys (64 per queue), exclusive. At most p_slots - 1
--     other claims of the queue are on their way uncounted, each taking at most p_most
--     jobs, so this one takes at most p_most and leaves (p_slots - 1) x p_most of the
--     room it counts under the cap and the queue-wide rate limit to them. A key's room
--     needs no such margin: a claim on its way with jobs of the key holds its bucket.
-- Then one statement with a fresh snapshot (it sees every claim committed before this
-- claimer held the locks) counts their running jobs by key and returns:
--   * a row per key among p_keys: its room under its cap (the GroupLimit override,
--     else the queue's default in p_defaults) and, in a queue whose rate limit applies
--     per key, under the key's own budget (the GroupLimit's rate_limit, else the
--     queue's). Key '' stands for the jobs without a key: no cap, one shared budget;
--   * a row per queue with a NULL key: its room under its cap and its rate limit (the
--     queue-wide one; none when the limit applies per key), at most p_want (and
--     p_most side by side, less the margin).
-- A room is never negative; no limit reads as 2147483647. A budget is counted in the
-- claim log under its own group_key ('' for the queue's), read by its index.
--
-- The rate limit holds in every window as long as the rate window, whatever the claims
-- race with. The window ends at the clock read once the locks are held (v_now), not at
-- now(), the start of a transaction that may have waited for them: so every job this
-- claim starts starts at v_now or later. Every claim of the queue that committed before
-- holds the stamp of its span in the claim log, and sql.CLAIM stamps a span with its end
-- after the clock that follows the claim's UPDATE: a stamp is later than every start it
-- counts. Take any window W, and among the claims with starts in W the one, Z, that
-- counted last. Every start s in W is at least end(W) - window >= v_now(Z) - window
-- (Z's starts, in W, follow v_now(Z)). A claim with starts in W either committed before
-- Z counted (its stamp follows s: Z counted it), or was on its way when Z counted (it
-- could not take its locks after Z's count, which is the last): none if Z held the
-- queue alone; if side by side, at most p_slots - 1 of them, within Z's margin under the
-- queue's limits, and none with jobs of a key Z took jobs of (it would hold the key's
-- bucket). So W holds no more starts than the limit.
CREATE OR REPLACE FUNCTION queue_engine_claim_rooms(
    p_locked text[], p_want int, p_queues text[], p_keys text[], p_defaults int[],
    p_fast text[], p_slots int, p_most int
) RETURNS TABLE (queue text, group_key text, room int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now timestamptz;
    v_queue text;
    v_start int;
    v_got boolean;
BEGIN
    FOR v_queue IN SELECT DISTINCT l.name FROM unnest(p_locked) AS l(name) ORDER BY l.name LOOP
        IF v_queue = ANY(p_fast) THEN
            PERFORM pg_advisory_xact_lock_shared(hashtextextended('queue_engine:queue:' || v_queue, 0));
            v_start := floor(random() * p_slots)::int;
            v_got := false;
            FOR i IN 0 .. p_slots - 1 LOOP
                IF pg_try_advisory_xact_lock(hashtext('queue_engine:slots:' || v_queue),
                                             (v_start + i) % p_slots) THEN
                    v_got := true;
                    EXIT;
                END IF;
            END LOOP;
            IF NOT v_got THEN
                PERFORM pg_advisory_xact_lock(hashtext('queue_engine:slots:' || v_queue), v_start);
            END IF;
            PERFORM pg_advisory_xact_lock(hashtext('queue_engine:keys:' || v_queue), b.bucket)
               FROM (SELECT DISTINCT hashtext(u.group_key) & 63 AS bucket
                       FROM unnest(p_queues, p_keys) AS u(queue, group_key)
                      WHERE u.queue = v_queue
                      ORDER BY 1) b;
        ELSE
            PERFORM pg_advisory_xact_lock(hashtextextended('queue_engine:queue:' || v_queue, 0));
        END IF;
    END LOOP;
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
    SELECT r.name, NULL::text,
           GREATEST(CASE WHEN r.fast THEN LEAST(p_want, p_most, r.room - (p_slots - 1) * p_most)
                         ELSE LEAST(p_want, r.room) END, 0)::int
      FROM (SELECT q.name::text AS name, q.name = ANY(p_fast) AS fast,
                   LEAST(
                       2147483647,
                       q.max_concurrency - (SELECT COALESCE(sum(c.n), 0) FROM counts c
                                             WHERE c.queue = q.name),
                       CASE WHEN NOT q.rate_limit_per_key THEN q.rate_limit - (
                           SELECT COALESCE(sum(l.count), 0) FROM queue_engine_claimlog l
                            WHERE l.queue = q.name
                              AND l.at > v_now - make_interval(secs => q.rate_window)) END
                   )::bigint AS room
              FROM queue_engine_queueconfig q
             WHERE q.name = ANY(p_locked)) r;
END
$$;

-- The rooms as claimers before queue_engine_claim_rooms asked for them: every queue
-- alone. A worker of the release before still calls it while a fleet is upgraded; its
-- claims and the new ones exclude each other on the queue's lock as before.
CREATE OR REPLACE FUNCTION queue_engine_limited_rooms(
    p_locked text[], p_want int, p_queues text[], p_keys text[], p_defaults int[]
) RETURNS TABLE (queue text, group_key text, room int)
LANGUAGE sql VOLATILE AS $$
    SELECT * FROM queue_engine_claim_rooms(p_locked, p_want, p_queues, p_keys, p_defaults,
                                           '{}', 1, p_want)
$$;
