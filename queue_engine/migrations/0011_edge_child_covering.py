"""A claimed node's parents come from an index that holds them: (child_id) INCLUDE
(parent_id), read index-only with one descent.

The claim looks a node's parents up by `child_id`. With only (child_id), a plan made while
the edge table's statistics were stale (an empty table keeps the last statistics ANALYZE
found) could prefer an index-only skip scan of the unique (parent_id, child_id) index on
Postgres 18, which reads every parent's part of that index once the table has grown. The
covering index is as cheap as that skip scan at its best and never dearer.

Built concurrently, then the old index is dropped: the table stays writable, and the claim
has an index on child_id at every moment."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("queue_engine", "0010_fair_share")]

    operations = [
        AddIndexConcurrently(
            model_name="flowedge",
            index=models.Index(
                fields=["child_id"], include=["parent_id"], name="qe_edge_child_parents"
            ),
        ),
        RemoveIndexConcurrently(model_name="flowedge", name="qe_edge_child"),
    ]
