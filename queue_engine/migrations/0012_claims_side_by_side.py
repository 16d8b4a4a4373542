"""Limits at full speed (issue 45): claims of a capped queue with room for them all go side
by side (queue_engine_claim_rooms: the queue's lock shared, one of a few slots, the
buckets of the claim's keys), not one at a time; queue_engine_limited_rooms stays, for a
worker of the release before while a fleet is upgraded.

Frozen: installs its own copy of the SQL (sql/0012_claim.sql); the reverse installs
0009's and drops the new function."""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent / "sql"
DROP_ROOMS = "DROP FUNCTION IF EXISTS queue_engine_claim_rooms(text[], int, text[], text[], int[], text[], int, int);\n"


def load(name):
    return (SQL / name).read_text(encoding="utf-8")


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0011_edge_child_covering")]

    operations = [
        migrations.RunSQL(load("0012_claim.sql"), load("0009_claim.sql") + DROP_ROOMS),
    ]
