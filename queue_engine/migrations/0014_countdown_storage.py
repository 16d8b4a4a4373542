"""The countdown rows' storage back to Postgres' default.

A draft of 0013, before its release, set toast_tuple_target on
queue_engine_flowcountdown to keep the rows' outputs out of line. Postgres toasts
nothing in a row under about 2 kB whatever that target says (the target only applies
once a row passes the fixed threshold), so the setting changed nothing but the table's
options, and 0013 as released sets nothing. This resets the option on a database that
ran the draft; on any other it changes nothing."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0013_parent_outputs")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE queue_engine_flowcountdown RESET (toast_tuple_target)",
            migrations.RunSQL.noop,
        ),
    ]
