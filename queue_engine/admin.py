"""Read-only admin for now: operator actions come through `ops`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from queue_engine.models import AuditEvent, Job, JobLog, JobRecord, QueueConfig, WorkerProcess


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "name", "queue", "state", "priority", "attempt", "run_at")
    list_filter = ("state", "queue")
    search_fields = ("kind", "name", "dedup_key")
    show_full_result_count = False


@admin.register(JobRecord)
class JobRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "name", "queue", "state", "attempt", "finished_at")
    list_filter = ("state", "queue")
    search_fields = ("kind", "name")
    show_full_result_count = False


@admin.register(QueueConfig)
class QueueConfigAdmin(ReadOnlyAdmin):
    list_display = ("name", "paused", "max_concurrency", "rate_limit", "lock_duration")


@admin.register(JobLog)
class JobLogAdmin(ReadOnlyAdmin):
    list_display = ("job_id", "attempt", "seq", "stream", "at", "text")
    show_full_result_count = False


@admin.register(WorkerProcess)
class WorkerProcessAdmin(ReadOnlyAdmin):
    list_display = ("id", "host", "pid", "concurrency", "in_flight", "heartbeat_at")


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "action", "target_type", "target", "count")
