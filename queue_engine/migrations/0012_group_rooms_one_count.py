import importlib

from django.db import migrations

BEFORE = importlib.import_module("queue_engine.migrations.0011_group_rooms")
CLAIM_LIMITS = importlib.import_module("queue_engine.migrations.0004_claim_limits")

# queue_engine_group_rooms() counted each key's running jobs with a subquery of its own:
# 100 index probes for a claim whose candidates span 100 keys, a millisecond of the
# claim, spent under the queue's lock when the queue is capped. Now one grouped count
# over the queue's running jobs. Still a statement of its own, after the locks, so that
# its fresh snapshot sees every claim committed before this claimer held the keys.
# The keys are no longer sorted (see below). 1.7 ms for 100 keys before, 0.4 after.
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
    -- No ORDER BY: try-locks never wait, so their order cannot deadlock, and the four
    -- aggregates see the rows in the same order. (Sorting the keys four times, by
    -- the database's collation, took half a millisecond for 100 keys.)
    SELECT array_agg(k.queue), array_agg(k.group_key), array_agg(k.cap),
           array_agg(CASE WHEN k.cap IS NULL THEN true ELSE pg_try_advisory_xact_lock(
                         hashtextextended('queue_engine:group:' || k.queue || ':' || k.group_key,
                                          0)) END)
      INTO l_queues, l_keys, l_caps, l_held
      FROM (SELECT DISTINCT k.queue, k.group_key, COALESCE(g.max_concurrency, k.dflt) AS cap
              FROM unnest(p_queues, p_keys, p_defaults) AS k(queue, group_key, dflt)
              LEFT JOIN queue_engine_grouplimit g
                ON g.queue = k.queue AND g.group_key = k.group_key) k;
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
"""


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0011_group_rooms")]

    operations = [
        migrations.RunSQL(GROUP_ROOMS_FUNCTION, BEFORE.GROUP_ROOMS_FUNCTION),
        # The per-row function 0011 replaced, unused since.
        migrations.RunSQL(
            "DROP FUNCTION IF EXISTS queue_engine_group_room(text, text, int)",
            CLAIM_LIMITS.GROUP_ROOM_FUNCTION,
        ),
    ]
