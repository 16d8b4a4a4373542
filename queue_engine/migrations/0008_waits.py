"""Waits (issue 43): the 'parked' job state with its index for the promoter (parked jobs
with a deadline), and the mailbox of signals sent to jobs (queue_engine_jobsignal)."""


import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('queue_engine', '0007_flowrun'),
    ]

    operations = [
        migrations.CreateModel(
            name='JobSignal',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('job_id', models.BigIntegerField()),
                ('name', models.CharField(max_length=255)),
                ('payload', models.JSONField(null=True)),
                ('sent_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                'db_table': 'queue_engine_jobsignal',
            },
        ),
        migrations.AlterField(
            model_name='job',
            name='state',
            field=models.CharField(choices=[('available', 'Available'), ('scheduled', 'Scheduled'), ('running', 'Running'), ('parked', 'Parked'), ('blocked', 'Blocked'), ('upstream_failed', 'Upstream Failed')], db_default='available', max_length=16),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'parked')), fields=['run_at'], name='qe_job_parked'),
        ),
        migrations.AddIndex(
            model_name='jobsignal',
            index=models.Index(fields=['job_id', 'name', 'id'], name='qe_signal_mailbox'),
        ),
    ]
