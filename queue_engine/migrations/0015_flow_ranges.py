"""FlowRange: a wide fan-out's children left to count, in ranges that the workers'
claims count down and take side by side (sql.COUNT_DOWN_CLAIM). A new, empty table;
nothing else changes."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queue_engine", "0014_countdown_storage"),
    ]

    operations = [
        migrations.CreateModel(
            name="FlowRange",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("flow_id", models.BigIntegerField()),
                ("parent_id", models.BigIntegerField()),
                ("after_child", models.BigIntegerField()),
                ("upto_child", models.BigIntegerField()),
                (
                    "touched_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "queue_engine_flowrange",
                "indexes": [
                    models.Index(fields=["flow_id"], name="qe_range_flow"),
                    models.Index(fields=["parent_id"], name="qe_range_parent"),
                ],
            },
        ),
    ]
