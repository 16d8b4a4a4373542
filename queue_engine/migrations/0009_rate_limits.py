"""Rate limits that never overshoot (issue 45): queue_engine_limited_rooms counts a
queue's rate window back from the clock read under the queue's lock, not from the start
of the claim's transaction.

Frozen: installs its own copy of the SQL (sql/0009_claim.sql); the reverse installs
0002's.
"""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent / "sql"


def load(name):
    return (SQL / name).read_text(encoding="utf-8")


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0008_waits")]

    operations = [
        migrations.RunSQL(load("0009_claim.sql"), load("0002_claim.sql")),
    ]
