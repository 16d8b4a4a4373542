"""drain_orm's table, as a Django model: the rows its handlers update through the ORM.

Unmanaged (the scenario creates and fills the table, `CREATE_ROWS`), so that the project
keeps no migration for a benchmark; it belongs to the project's own app label.
"""

from __future__ import annotations

from django.db import models

CREATE_ROWS = """
DROP TABLE IF EXISTS bench_row;
CREATE TABLE bench_row (id int PRIMARY KEY, hits bigint NOT NULL DEFAULT 0);
INSERT INTO bench_row (id) SELECT generate_series(1, %s);
"""


class BenchRow(models.Model):
    id = models.IntegerField(primary_key=True)
    hits = models.BigIntegerField(default=0)

    objects: models.Manager[BenchRow] = models.Manager()

    class Meta:
        app_label = "jobsite"
        db_table = "bench_row"
        managed = False

    def __str__(self) -> str:
        return f"row {self.id}: {self.hits} hits"
