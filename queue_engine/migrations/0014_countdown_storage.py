"""The countdown rows' storage back to Postgres' default.

0013 as first written set toast_tuple_target on queue_engine_flowcountdown to keep the
rows' outputs out of line. Postgres toasts nothing in a row under about 2 kB whatever
that target says (the target only applies once a row passes the fixed threshold), so
the setting changed nothing but the table's options; a later edit of 0013 dropped it.
Migrations are never edited once written: 0013 is as first written, and this resets
the option on every database, whichever version of 0013 it ran."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0013_parent_outputs")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE queue_engine_flowcountdown RESET (toast_tuple_target)",
            migrations.RunSQL.noop,
        ),
    ]
