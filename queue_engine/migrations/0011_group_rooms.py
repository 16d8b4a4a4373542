from django.db import migrations

# How many more jobs of each (queue, group key) may start now, for all the keys of one
# claim in one call (queue_engine_group_room, which it replaces, ran once a candidate
# row: 600 calls for a claim of 150 jobs). A key another claimer holds gets no room, so
# busy claimers take other keys' work instead of waiting. The running jobs are counted
# by a statement of their own, after the locks: its fresh snapshot (the function is
# VOLATILE) sees every claim committed before this claimer held the keys.
GROUP_ROOMS_FUNCTION = """
CREATE OR REPLACE FUNCTION queue_engine_group_rooms(
    p_queues text[], p_keys text[], p_defaults int[]
) RETURNS TABLE (queue text, group_key text, room int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    l_queues text[];
    l_keys text[];
    l_caps int[];
    l_held boolean[];
BEGIN
    SELECT array_agg(k.queue ORDER BY k.queue, k.group_key),
           array_agg(k.group_key ORDER BY k.queue, k.group_key),
           array_agg(k.cap ORDER BY k.queue, k.group_key),
           array_agg(CASE WHEN k.cap IS NULL THEN true ELSE pg_try_advisory_xact_lock(
                         hashtextextended('queue_engine:group:' || k.queue || ':' || k.group_key,
                                          0)) END
                     ORDER BY k.queue, k.group_key)
      INTO l_queues, l_keys, l_caps, l_held
      FROM (SELECT DISTINCT k.queue, k.group_key, COALESCE(g.max_concurrency, k.dflt) AS cap
              FROM unnest(p_queues, p_keys, p_defaults) AS k(queue, group_key, dflt)
              LEFT JOIN queue_engine_grouplimit g
                ON g.queue = k.queue AND g.group_key = k.group_key) k;
    RETURN QUERY
    SELECT k.queue, k.group_key,
           CASE WHEN k.cap IS NULL THEN 2147483647
                WHEN NOT k.held THEN 0
                ELSE GREATEST(k.cap - (SELECT count(*)::int FROM queue_engine_job j
                                        WHERE j.state = 'running' AND j.queue = k.queue
                                          AND j.group_key = k.group_key), 0)
           END
      FROM unnest(l_queues, l_keys, l_caps, l_held) AS k(queue, group_key, cap, held);
END
$$;
"""

DROP_GROUP_ROOMS = "DROP FUNCTION IF EXISTS queue_engine_group_rooms(text[], text[], int[])"

# How many jobs of a queue with a fleet-wide cap or a rate limit may start now, for a
# claim that wants up to p_want. Claimers of such a queue take its advisory lock (held
# to the end of the claim's transaction), then count its running jobs and its starts in
# the rate window in statements of their own: fresh snapshots (the function is VOLATILE)
# that see every claim committed before the lock was granted. Taken inside the claim
# statement, the lock is held from the claim's start to its commit, not from a
# statement before it (one round trip, and one turn of the worker's event loop, less).
QUEUE_ROOM_FUNCTION = """
CREATE OR REPLACE FUNCTION queue_engine_queue_room(
    p_queue text, p_want int, p_max_concurrency int, p_rate_limit int, p_rate_window int
) RETURNS int
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    room int := p_want;
    used int;
BEGIN
    IF p_max_concurrency IS NULL AND p_rate_limit IS NULL THEN
        RETURN room;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('queue_engine:queue:' || p_queue, 0));
    IF p_max_concurrency IS NOT NULL THEN
        SELECT count(*) INTO used FROM queue_engine_job
         WHERE state = 'running' AND queue = p_queue;
        room := LEAST(room, p_max_concurrency - used);
    END IF;
    IF p_rate_limit IS NOT NULL THEN
        SELECT COALESCE(sum(count), 0) INTO used FROM queue_engine_claimlog
         WHERE queue = p_queue AND at > now() - make_interval(secs => p_rate_window);
        room := LEAST(room, p_rate_limit - used);
    END IF;
    RETURN GREATEST(room, 0);
END
$$;
"""

DROP_QUEUE_ROOM = "DROP FUNCTION IF EXISTS queue_engine_queue_room(text, int, int, int, int)"


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0010_flow_ended_badly_index")]

    operations = [
        migrations.RunSQL(GROUP_ROOMS_FUNCTION, DROP_GROUP_ROOMS),
        migrations.RunSQL(QUEUE_ROOM_FUNCTION, DROP_QUEUE_ROOM),
    ]
