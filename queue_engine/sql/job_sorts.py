"""The jobs list sorted by something other than its id: the newest jobs a filter finds (the
same keyset statements as the id order, so the same bounded reads), then ordered by the
chosen column within them, one page at an offset.

A sort over the whole history would read every row of it (none of these columns has an
index that also serves the filters), so the console sorts the newest SORT_WINDOW matches
and says so when there are more.
"""

from __future__ import annotations

# What each sort orders by, over the jobs list's columns (see reads.ROW_FIELDS). Live jobs
# have no finished_at, and so no run time: they come last in either direction.
JOB_SORT_KEYS = {
    "created": "created_at",
    "finished": "finished_at",
    "runtime": "finished_at - started_at",
    "attempts": "attempt",
}


def sorted_jobs_window(union: str, key: str, descending: bool) -> str:
    """`union` (the id-ordered statements, each reading at most %(limit)s rows) cut to the
    newest %(window)s jobs, ordered by `key` then id, %(page_size)s rows from %(offset)s.
    A last column says whether more jobs matched than the window holds. `key` is one of
    JOB_SORT_KEYS (never user text)."""
    order = "DESC" if descending else "ASC"
    return f"""
WITH found AS ({union}),
     newest AS (SELECT * FROM found ORDER BY id DESC LIMIT %(window)s)
SELECT newest.*, (SELECT count(*) FROM found) > %(window)s AS window_full FROM newest
 ORDER BY {JOB_SORT_KEYS[key]} {order} NULLS LAST, id {order}
 LIMIT %(page_size)s OFFSET %(offset)s
"""
