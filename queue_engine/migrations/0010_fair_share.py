"""Fair share between group keys (issue 45): QueueSettings.fair_share, per-key weights
(queue_engine_groupweight), the index a fair queue's claims skip from key to key
through (qe_job_fair), and the enqueue trigger that copies fair_share to a new queue.

Frozen: installs its own copy of the trigger (sql/0010_jobs.sql); the reverse installs
0009's."""

from pathlib import Path

from django.db import migrations, models

SQL = Path(__file__).resolve().parent / "sql"
# The trigger's file creates the trigger too.
DROP_TRIGGER = "DROP TRIGGER IF EXISTS queue_engine_job_inserted ON queue_engine_job;"


class Migration(migrations.Migration):

    dependencies = [
        ('queue_engine', '0009_rate_limits'),
    ]

    operations = [
        migrations.CreateModel(
            name='GroupWeight',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('queue', models.CharField(max_length=128)),
                ('group_key', models.CharField(max_length=255)),
                ('weight', models.PositiveIntegerField()),
            ],
            options={
                'db_table': 'queue_engine_groupweight',
            },
        ),
        migrations.AddField(
            model_name='queueconfig',
            name='fair_share',
            field=models.BooleanField(db_default=False),
        ),
        migrations.AddField(
            model_name='queuedefaults',
            name='fair_share',
            field=models.BooleanField(db_default=False),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(models.F('queue'), models.Func(models.F('group_key'), function='hashtext', output_field=models.IntegerField()), models.F('group_key'), models.OrderBy(models.F('priority'), descending=True), models.F('run_at'), models.F('id'), condition=models.Q(('group_key__isnull', False), ('state', 'available')), name='qe_job_fair'),
        ),
        migrations.AddConstraint(
            model_name='groupweight',
            constraint=models.UniqueConstraint(fields=('queue', 'group_key'), name='qe_groupweight_key'),
        ),
        migrations.AddConstraint(
            model_name='groupweight',
            constraint=models.CheckConstraint(condition=models.Q(('weight__gte', 1)), name='qe_groupweight_min'),
        ),
        migrations.RunSQL(
            DROP_TRIGGER + (SQL / "0010_jobs.sql").read_text(encoding="utf-8"),
            DROP_TRIGGER + (SQL / "0009_jobs.sql").read_text(encoding="utf-8"),
        ),
    ]
