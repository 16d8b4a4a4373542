import importlib

from django.db import migrations

BEFORE = importlib.import_module("queue_engine.migrations.0012_group_rooms_one_count")

# The claim now reads and ranks its candidates before it takes a capped queue's lock
# (sql.CLAIM), so queue_engine_group_rooms() is where that lock is taken: p_locked
# names the limited queues among the candidates, locked in name order (as the claim's
# own queue_engine_queue_room() calls take them: the lock is re-entrant), before the
# keys are counted. Claimers of such a queue take turns, so its keys need no try-lock:
# with try-locks, two claimers ranking the same head of the queue at once left the
# second with no room on any key, and it claimed nothing.
GROUP_ROOMS_FUNCTION = """
CREATE OR REPLACE FUNCTION queue_engine_group_rooms(
    p_queues text[], p_keys text[], p_defaults int[], p_locked text[]
) RETURNS TABLE (queue text, group_key text, room int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    l_queues text[];
    l_keys text[];
    l_caps int[];
    l_held boolean[];
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('queue_engine:queue:' || l.name, 0))
       FROM (SELECT DISTINCT name FROM unnest(p_locked) AS l(name) ORDER BY name) l;
    -- No ORDER BY: try-locks never wait, so their order cannot deadlock, and the four
    -- aggregates see the rows in the same order.
    SELECT array_agg(k.queue), array_agg(k.group_key), array_agg(k.cap),
           array_agg(CASE WHEN k.cap IS NULL OR k.queue = ANY(p_locked) THEN true
                          ELSE pg_try_advisory_xact_lock(hashtextextended(
                              'queue_engine:group:' || k.queue || ':' || k.group_key, 0))
                     END)
      INTO l_queues, l_keys, l_caps, l_held
      FROM (SELECT DISTINCT k.queue, k.group_key, COALESCE(g.max_concurrency, k.dflt) AS cap
              FROM unnest(p_queues, p_keys, p_defaults) AS k(queue, group_key, dflt)
              LEFT JOIN queue_engine_grouplimit g
                ON g.queue = k.queue AND g.group_key = k.group_key) k;
    -- A statement of its own, after the locks: its fresh snapshot sees every claim
    -- committed before this claimer held the queue or the keys.
    RETURN QUERY
    SELECT k.queue, k.group_key,
           CASE WHEN k.cap IS NULL THEN 2147483647
                WHEN NOT k.held THEN 0
                ELSE GREATEST(k.cap - COALESCE(r.running, 0), 0)
           END
      FROM unnest(l_queues, l_keys, l_caps, l_held) AS k(queue, group_key, cap, held)
      LEFT JOIN (SELECT j.queue, j.group_key, count(*)::int AS running
                   FROM queue_engine_job j
                  WHERE j.state = 'running' AND j.queue = ANY(l_queues)
                    AND j.group_key = ANY(l_keys)
                  GROUP BY j.queue, j.group_key) r
        ON r.queue = k.queue AND r.group_key = k.group_key;
END
$$;
DROP FUNCTION IF EXISTS queue_engine_group_rooms(text[], text[], int[]);
"""

RESTORE = (
    "DROP FUNCTION IF EXISTS queue_engine_group_rooms(text[], text[], int[], text[]);\n"
    + BEFORE.GROUP_ROOMS_FUNCTION
)


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0014_flow_countdown")]

    operations = [migrations.RunSQL(GROUP_ROOMS_FUNCTION, RESTORE)]
