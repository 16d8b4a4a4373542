import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0005_brin_finished")]

    operations = [
        migrations.CreateModel(
            name="Flow",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=255)),
                ("state", models.CharField(
                    choices=[("running", "Running"), ("succeeded", "Succeeded"),
                             ("failed", "Failed"), ("cancelled", "Cancelled")],
                    db_default="running", max_length=16)),
                ("default_priority", models.SmallIntegerField(db_default=0)),
                ("meta", models.JSONField(db_default=models.Value({}, models.JSONField()))),
                ("rerun_of", models.BigIntegerField(blank=True, null=True)),
                ("created_at", models.DateTimeField(
                    db_default=django.db.models.functions.datetime.Now())),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "db_table": "queue_engine_flow",
                "indexes": [
                    models.Index(models.F("state"), models.F("id").desc(), name="qe_flow_state"),
                    models.Index(models.F("name"), models.F("id").desc(), name="qe_flow_name"),
                ],
            },
        ),
        migrations.CreateModel(
            name="FlowEdge",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("flow_id", models.BigIntegerField()),
                ("parent_id", models.BigIntegerField()),
                ("child_id", models.BigIntegerField()),
                ("dynamic", models.BooleanField(db_default=False)),
            ],
            options={
                "db_table": "queue_engine_flowedge",
                "indexes": [
                    models.Index(fields=["parent_id"], name="qe_edge_parent"),
                    models.Index(fields=["child_id"], name="qe_edge_child"),
                    models.Index(fields=["flow_id"], name="qe_edge_flow"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("parent_id", "child_id"),
                                            name="qe_edge_unique"),
                ],
            },
        ),
    ]
