"""Flow nodes that can no longer run (an ancestor dead or cancelled) get a state of their
own, `upstream_failed`: a new choice of the live table's state, nothing in the database
(the column has no check constraint, and no index or SQL function names the state)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0005_dead_error_index")]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="state",
            field=models.CharField(
                choices=[
                    ("available", "Available"),
                    ("scheduled", "Scheduled"),
                    ("running", "Running"),
                    ("blocked", "Blocked"),
                    ("upstream_failed", "Upstream Failed"),
                ],
                db_default="available",
                max_length=16,
            ),
        ),
    ]
