from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


# Concurrently: the live table stays writable while the index is built.
class Migration(migrations.Migration):
    atomic = False
    dependencies = [("queue_engine", "0017_flow_release")]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["queue"], name="qe_job_blocked", condition=models.Q(state="blocked")
            ),
        ),
    ]
