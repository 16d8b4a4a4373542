"""The write side: every way application code puts a job into the queue.

Everything runs on Django's connection, so it joins the caller's transaction:
a rolled-back enqueue never runs, and workers see a job only at commit.
Bad input raises before anything is committed, so it writes nothing: a single
enqueue checks before its INSERT, a bulk COPY aborts on the first bad row.
"""
