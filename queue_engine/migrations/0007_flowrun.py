"""The flow model is FlowRun: `Flow` is the builder (queue_engine.Flow). Its table keeps
its name (queue_engine_flow), so nothing changes in the database."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0006_upstream_failed")]

    operations = [migrations.RenameModel("Flow", "FlowRun")]
