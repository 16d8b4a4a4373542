"""The old home of the partitioned history's layout and DDL, now
`queue_engine.schema.partitions`. Released migrations (0002_sql) import from here, and a
released migration is never edited: this name stays for them."""

from queue_engine.schema.partitions import ensure_leaves as ensure_leaves

__all__ = ["ensure_leaves"]
