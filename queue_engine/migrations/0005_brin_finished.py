import django.contrib.postgres.indexes
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0004_claim_limits")]

    operations = [
        migrations.RemoveIndex(model_name="jobrecord", name="qe_rec_finished"),
        migrations.AddIndex(
            model_name="jobrecord",
            index=django.contrib.postgres.indexes.BrinIndex(
                fields=["finished_at"], name="qe_rec_finished_brin"
            ),
        ),
    ]
