from django.db import migrations, models

# The claim now adds its starts to the row of their span (sql.CLAIM's `logged`, ON
# CONFLICT on queue and time) instead of writing a row per claim. Rows written before
# this were per claim: two of one queue at one instant become one.
MERGE_SAME_INSTANT = """
WITH gone AS (
    DELETE FROM queue_engine_claimlog l
     WHERE EXISTS (SELECT 1 FROM queue_engine_claimlog o
                    WHERE o.queue = l.queue AND o.at = l.at AND o.id <> l.id)
    RETURNING queue, at, count
)
INSERT INTO queue_engine_claimlog (queue, at, count)
SELECT queue, at, sum(count) FROM gone GROUP BY queue, at
"""


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0020_limited_rooms")]

    operations = [
        migrations.RunSQL(MERGE_SAME_INSTANT, migrations.RunSQL.noop),
        migrations.RemoveIndex(model_name="claimlog", name="qe_claimlog_queue_at"),
        migrations.AddConstraint(
            model_name="claimlog",
            constraint=models.UniqueConstraint(fields=("queue", "at"), name="qe_claimlog_span"),
        ),
    ]
