"""Outputs handed down (issue 45): a flow node carries its parents' outputs once the
last of them counted it down (Job.parent_outputs), and a fan-in's countdown rows carry
theirs (FlowCountdown.outputs), so that the claim need not look each parent up in the
history; Job.parents says how many a node's outputs must name to be whole.

Adding the columns rewrites no row (nullable, or a constant default). A row of an
earlier version has 0 parents: nothing is ever handed down to it, and workers of
earlier versions, which neither write nor read the columns, go on as before."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0012_limited_counts")]

    operations = [
        migrations.AddField(
            model_name="flowcountdown",
            name="outputs",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="parent_outputs",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="parents",
            field=models.IntegerField(db_default=0),
        ),
    ]
