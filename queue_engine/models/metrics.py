from __future__ import annotations

from django.db import models


class MetricBucket(models.Model):
    """What ended in one minute (size 60) or one hour (size 3600), per queue and kind.

    Written by the leader's rollup from the history table; kept longer than the
    rows it was computed from. Times are seconds: wait is run_at to start of the
    last attempt, run is start to finish. `timed` counts the rows that started
    (the weight of the time columns); percentiles of hour buckets are the
    timed-weighted means of their minutes' percentiles.
    """

    id = models.BigAutoField(primary_key=True)
    size = models.IntegerField(help_text="bucket length in seconds: 60 or 3600")
    bucket = models.DateTimeField(help_text="start of the bucket")
    queue = models.CharField(max_length=128)
    kind = models.CharField(max_length=255)
    succeeded = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    cancelled = models.IntegerField(default=0)
    retried = models.IntegerField(default=0, help_text="attempts that failed and ran again")
    rescued = models.IntegerField(
        db_default=0, help_text="jobs that ended after at least one rescue (a lost lease)"
    )
    timed = models.IntegerField(default=0)
    wait_sum = models.FloatField(default=0.0)
    run_sum = models.FloatField(default=0.0)
    wait_p50 = models.FloatField(null=True, blank=True)
    wait_p95 = models.FloatField(null=True, blank=True)
    run_p50 = models.FloatField(null=True, blank=True)
    run_p95 = models.FloatField(null=True, blank=True)

    class Meta:
        db_table = "queue_engine_metricbucket"
        constraints = [
            models.UniqueConstraint(
                fields=["size", "bucket", "queue", "kind"], name="qe_metric_bucket_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queue}/{self.kind} @ {self.bucket} ({self.size}s)"


class RollupState(models.Model):
    """How far the metrics rollup has got: buckets before `rolled_up_to` are final."""

    name = models.CharField(max_length=32, primary_key=True)
    rolled_up_to = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "queue_engine_rollupstate"

    def __str__(self) -> str:
        return f"{self.name}: {self.rolled_up_to}"


class ScrapeFailure(models.Model):
    """Wrong /metrics tokens from one client address, counted over a window that starts
    at the first one (METRICS_FAILURE_WINDOW): past METRICS_FAILURE_LIMIT the address is
    refused until the window ends. In the database, so every web process counts alike."""

    address = models.CharField(max_length=64, primary_key=True)
    failures = models.IntegerField()
    since = models.DateTimeField(help_text="the window's first wrong token")

    class Meta:
        db_table = "queue_engine_scrapefailure"

    def __str__(self) -> str:
        return f"{self.address}: {self.failures} wrong tokens since {self.since:%Y-%m-%d %H:%M:%S}"
