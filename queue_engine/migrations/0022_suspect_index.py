from django.db import migrations, models

# Every claim asks whether a suspect (a job rescued at least twice) waits in its
# queues (sql.CLAIM's `suspects`); this index holds only those, so the answer costs
# a look into an index that is almost always empty.


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0021_claimlog_spans")]

    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("rescues__gte", 2)), fields=["queue"], name="qe_job_suspect"
            ),
        ),
    ]
