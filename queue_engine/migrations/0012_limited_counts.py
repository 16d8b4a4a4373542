"""Limits at full speed (issue 45): queue_engine_limited_counts, which the claim calls
once, under the locks of its limited queues, for every count it needs (each queue's
room, its keys at their cap or out of their budget, each candidate key's room).
queue_engine_limited_rooms stays, for the workers of earlier versions during an upgrade.

Frozen: installs its own copy of the SQL (sql/0012_claim.sql); the reverse drops the
new function and installs 0009's.
"""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent / "sql"


def load(name):
    return (SQL / name).read_text(encoding="utf-8")


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0011_edge_child_covering")]

    operations = [
        migrations.RunSQL(
            load("0012_claim.sql"),
            "DROP FUNCTION IF EXISTS queue_engine_limited_counts(text[]);\n"
            + load("0009_claim.sql"),
        ),
    ]
