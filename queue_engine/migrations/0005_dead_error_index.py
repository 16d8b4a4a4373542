"""The dead letter by queue and last error class, newest first: the jobs list's filter on a
dead-letter group (queue, dead, error class) reads only the group's rows.

On the dead jobs' part of the history only (queue_engine_jobrecord_failed, and so each of
its leaves): only a job that dies writes to it, never a success."""

from django.db import migrations

INDEX = "qe_rec_dead_error"


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0004_scrape_failures")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX {INDEX} ON queue_engine_jobrecord_failed "
            "(queue, (COALESCE(errors->-1->>'class', '')), id DESC)",
            f"DROP INDEX IF EXISTS {INDEX}",
        )
    ]
