"""Rate limits (issue 45): per group key, and never over the limit in any window.

- A queue's rate limit may apply to each group key on its own (rate_limit_per_key),
  with a key's own rate in its GroupLimit row (whose cap may now be left to the queue);
  the claim log counts starts per budget (group_key, '' for the queue's).
- queue_engine_limited_rooms counts a rate window back from the clock read under the
  queue's lock, not from the start of the claim's transaction, and counts per-key
  budgets; the enqueue trigger copies rate_limit_per_key into a new queue's row.

Frozen: installs its own copies of the SQL (sql/0009_*.sql); the reverse installs 0002's.
"""

from pathlib import Path

from django.db import migrations, models

SQL = Path(__file__).resolve().parent / "sql"
DROP_TRIGGER = "DROP TRIGGER IF EXISTS queue_engine_job_inserted ON queue_engine_job;\n"
PER_KEY_HELP = "the rate limit is each group key's own budget (jobs without a key share one)"


def load(name):
    return (SQL / name).read_text(encoding="utf-8")


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0008_waits")]

    operations = [
        migrations.RemoveConstraint(model_name="claimlog", name="qe_claimlog_span"),
        migrations.AddField(
            model_name="claimlog",
            name="group_key",
            field=models.CharField(db_default="", max_length=255),
        ),
        migrations.AddConstraint(
            model_name="claimlog",
            constraint=models.UniqueConstraint(
                fields=("queue", "group_key", "at"), name="qe_claimlog_span"
            ),
        ),
        migrations.AddField(
            model_name="grouplimit",
            name="rate_limit",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="grouplimit",
            name="max_concurrency",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="queueconfig",
            name="rate_limit_per_key",
            field=models.BooleanField(db_default=False, help_text=PER_KEY_HELP),
        ),
        migrations.AddField(
            model_name="queuedefaults",
            name="rate_limit_per_key",
            field=models.BooleanField(db_default=False, help_text=PER_KEY_HELP),
        ),
        migrations.RunSQL(load("0009_claim.sql"), load("0002_claim.sql")),
        # jobs.sql creates its trigger afresh, the function with it.
        migrations.RunSQL(DROP_TRIGGER + load("0009_jobs.sql"), DROP_TRIGGER + load("0002_jobs.sql")),
    ]
