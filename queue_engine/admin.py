"""The Django admin: every change goes through `queue_engine.ops` or `queue_engine.schedules`.

Queue settings and schedules are edited with their model's change permission;
actions on jobs, queues and schedules (cancel, retry, redrive, pause, resume,
enable, disable, run now) need the console's operator permission
(`queue_engine.operate_console`), as in the console. A job's payload, result and
meta are masked as the console masks them (`CONSOLE_MASKED_KEYS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.db.models import QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from queue_engine import ops, queue_defaults, schedules
from queue_engine.exceptions import OpsError, ScheduleError
from queue_engine.masking import mask, take_back
from queue_engine.models import (
    AuditEvent,
    GroupWeight,
    Job,
    JobLog,
    JobRecord,
    QueueConfig,
    Schedule,
    WorkerProcess,
)
from queue_engine.ops import queues as ops_queues
from queue_engine.templatetags.queue_engine import masked_json, masked_json_line

OPERATE = "queue_engine.operate_console"


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class OperatorActions:
    """Admin actions declared with permissions=["operate"] need the operator permission."""

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(OPERATE)


def _each(
    request: HttpRequest,
    modeladmin: admin.ModelAdmin,  # type: ignore[type-arg]
    items: list[Any],
    action: Callable[[Any], object],
    done: str,
) -> None:
    """Apply an action to each item; report how many it did and why others were refused."""
    count = 0
    for item in items:
        try:
            action(item)
            count += 1
        except (OpsError, ScheduleError) as exc:
            modeladmin.message_user(request, str(exc), messages.WARNING)
    if count:
        modeladmin.message_user(request, f"{done}: {count}.", messages.SUCCESS)


type AdminAction = Callable[[Any, HttpRequest, QuerySet[Any]], None]


def each_action(
    operation: Callable[..., object],
    done: str,
    *,
    key: str,
    description: str,
    permission: str = "operate",
) -> AdminAction:
    """An admin action that applies `operation(item, actor=user)` to the `key` (id or
    name) of each selected row, as `_each` reports."""

    @admin.action(permissions=[permission], description=description)
    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        _each(
            request,
            modeladmin,
            list(queryset.values_list(key, flat=True)),
            lambda item: operation(item, actor=request.user),
            done,
        )

    return action


# --- jobs ------------------------------------------------------------------------------

MASKED = ("payload", "result", "meta")


class MaskedJobAdmin(OperatorActions, ReadOnlyAdmin):
    """Payload, result and meta shown masked, and no lookups into them in the list's URL
    (`?payload__password=hunter2`): a list found or empty by a guessed value tells it."""

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [
            f"masked_{name}" if name in MASKED else name
            for name in super().get_fields(request, obj)
        ]

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        if lookup.split(LOOKUP_SEP)[0] in MASKED:
            return False
        return bool(super().lookup_allowed(lookup, value, request))

    @admin.display(description="payload")
    def payload_line(self, obj: Job | JobRecord) -> str:
        return masked_json_line(obj.payload)

    @admin.display(description="payload")
    def masked_payload(self, obj: Job | JobRecord) -> SafeString:
        return format_html("<pre>{}</pre>", masked_json(obj.payload))

    @admin.display(description="meta")
    def masked_meta(self, obj: Job | JobRecord) -> SafeString:
        return format_html("<pre>{}</pre>", masked_json(obj.meta))

    @admin.display(description="result")
    def masked_result(self, obj: JobRecord) -> SafeString:
        return format_html("<pre>{}</pre>", masked_json(obj.result))


@admin.register(Job)
class JobAdmin(MaskedJobAdmin):
    list_display = (
        "id", "kind", "name", "queue", "state", "priority", "attempt", "run_at", "payload_line",
    )  # fmt: skip
    list_filter = ("state", "queue")
    search_fields = ("kind", "name", "dedup_key")
    show_full_result_count = False
    actions = ["cancel", "retry"]

    @admin.action(permissions=["operate"], description="Cancel the selected jobs")
    def cancel(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        ids = list(queryset.values_list("id", flat=True))
        count = ops.cancel_jobs(ids, actor=request.user)
        self.message_user(request, f"Cancelled {count} job(s); running ones were told to stop.")

    retry = each_action(
        ops.retry_job,
        "Made available now",
        key="id",
        description="Run the selected waiting jobs now",
    )


@admin.register(JobRecord)
class JobRecordAdmin(MaskedJobAdmin):
    list_display = (
        "id", "kind", "name", "queue", "state", "attempt", "finished_at", "payload_line",
    )  # fmt: skip
    list_filter = ("state", "queue")
    search_fields = ("kind", "name")
    show_full_result_count = False
    actions = ["redrive", "retry"]

    @admin.action(
        permissions=["operate"], description="Redrive the selected failed or cancelled jobs"
    )
    def redrive(self, request: HttpRequest, queryset: QuerySet[JobRecord]) -> None:
        ids = list(queryset.values_list("id", flat=True))
        count = ops.redrive_jobs(ids, actor=request.user)
        self.message_user(
            request,
            f"Redrove {count} job(s); jobs that had not failed or been cancelled were left alone.",
        )

    retry = each_action(
        ops.retry_job, "Queued again", key="id", description="Run the selected jobs again"
    )


# --- queues ----------------------------------------------------------------------------


class QueueConfigForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = QueueConfig
        fields = ("name", *ops_queues.EDITABLE)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance._state.adding:  # show what a queue QUEUES does not name starts with
            for name, value in queue_defaults.starting_values(None).items():
                self.fields[name].initial = value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name = data.get("name") or (self.instance.name if self.instance.pk else "")
        try:
            ops_queues.check_settings(name, {f: data[f] for f in ops_queues.EDITABLE if f in data})
        except OpsError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(QueueConfig)
class QueueConfigAdmin(OperatorActions, admin.ModelAdmin):  # type: ignore[type-arg]
    form = QueueConfigForm
    list_display = (
        "name",
        "paused",
        "max_concurrency",
        "rate_limit",
        "rate_window",
        "rate_limit_per_key",
        "lock_duration",
        "group_concurrency",
        "fair_share",
        "retain_succeeded",
        "retain_failed",
        "retain_cancelled",
        "edited_fields",
    )
    list_filter = ("paused", "fair_share")
    search_fields = ("name",)
    actions = ["pause", "resume", "reset"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Pausing and resuming need the operator permission, as the actions do.
        held = () if self.has_operate_permission(request) else ("paused",)
        return ("name", "edited_fields", *held) if obj is not None else held

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a queue's row comes back with its next job; reset values instead

    def save_model(
        self,
        request: HttpRequest,
        obj: QueueConfig,
        form: forms.ModelForm,  # type: ignore[type-arg]
        change: bool,
    ) -> None:
        # Only what the operator changed: the rest stays with settings (a new queue's
        # row starts from its QUEUES entry, not from the form's initial values).
        fields = [f for f in ops_queues.EDITABLE if f in form.changed_data]
        ops_queues.update_queue_config(
            obj.name, actor=request.user, **{f: form.cleaned_data[f] for f in fields}
        )

    pause = each_action(
        ops_queues.pause_queue, "Paused", key="name", description="Pause the selected queues"
    )

    resume = each_action(
        ops_queues.resume_queue, "Resumed", key="name", description="Resume the selected queues"
    )

    reset = each_action(
        ops_queues.reset_queue_config,
        "Limits and retention reset to settings, pause state kept",
        key="name",
        description="Hand the selected queues' edited limits and retention back to "
        "QUEUE_ENGINE settings (paused queues stay paused)",
        permission="change",
    )


@admin.register(GroupWeight)
class GroupWeightAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A key's share of its fair queue's claims; written through ops, which audits it."""

    list_display = ("queue", "group_key", "weight")
    search_fields = ("queue", "group_key")

    def save_model(self, request: HttpRequest, obj: GroupWeight, form: Any, change: bool) -> None:
        ops_queues.set_group_weight(obj.queue, obj.group_key, obj.weight, actor=request.user)

    def delete_model(self, request: HttpRequest, obj: GroupWeight) -> None:
        ops_queues.set_group_weight(obj.queue, obj.group_key, None, actor=request.user)


# --- schedules -------------------------------------------------------------------------


class ScheduleForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Schedule
        fields = (
            "name",
            "kind",
            "cron",
            "timezone",
            "every",
            "payload",
            "queue",
            "priority",
            "enabled",
            "missed_fire_policy",
        )

    declaration: schedules.Declaration | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:  # secrets show masked; clean_payload takes back what stays so
            self.initial["payload"] = mask(self.instance.payload)

    def clean_payload(self) -> Any:
        payload = self.cleaned_data.get("payload")
        if not self.instance.pk:
            return payload
        try:
            return take_back(payload, self.instance.payload, "the schedule")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name = data.get("name") or (self.instance.name if self.instance.pk else "")
        try:
            self.declaration = schedules.declaration(
                name,
                data.get("kind") or "",
                every=data.get("every"),
                cron=data.get("cron") or None,
                timezone=data.get("timezone") or "UTC",
                payload=data.get("payload") or {},
                queue=data.get("queue") or None,
                priority=data.get("priority"),
                # Left as it is when the field is read-only here (no operator permission).
                enabled=bool(data.get("enabled"))
                if "enabled" in self.fields
                else (self.instance.enabled if self.instance.pk else True),
                missed=data.get("missed_fire_policy") or "run_once",
                source="admin",
            )
        except ScheduleError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(Schedule)
class ScheduleAdmin(OperatorActions, admin.ModelAdmin):  # type: ignore[type-arg]
    form = ScheduleForm
    list_display = (
        "name",
        "kind",
        "timing",
        "enabled",
        "next_fire_at",
        "last_fire_at",
        "last_error",
        "source",
    )
    list_filter = ("enabled", "source")
    search_fields = ("name", "kind")
    actions = ["enable", "disable", "run_now", "remove"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = [f for f in super().get_fields(request, obj) if f != "masked_payload"]
        if obj is not None and not self.has_change_permission(request, obj):
            return ["masked_payload" if f == "payload" else f for f in fields]
        return fields

    @admin.display(description="payload")
    def masked_payload(self, obj: Schedule) -> SafeString:
        return format_html("<pre>{}</pre>", masked_json(obj.payload))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        always = (
            "next_fire_at",
            "last_fire_at",
            "last_job_id",
            "last_error",
            "source",
            "created_at",
            "updated_at",
            "masked_payload",
        )
        # Enabling and disabling need the operator permission, as the actions do.
        held = () if self.has_operate_permission(request) else ("enabled",)
        return ("name", *always, *held) if obj is not None else (*always, *held)

    def get_actions(
        self, request: HttpRequest, action_location: ActionLocation = ActionLocation.CHANGE_LIST
    ) -> Any:
        found = super().get_actions(request, action_location)
        found.pop("delete_selected", None)  # "remove" goes through schedules and is audited
        return found

    def save_model(
        self,
        request: HttpRequest,
        obj: Schedule,
        form: ScheduleForm,  # type: ignore[override]
        change: bool,
    ) -> None:
        assert form.declaration is not None
        saved = schedules.save_declaration(form.declaration, actor=request.user)
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        ops.remove_schedule(obj.name, actor=request.user)

    enable = each_action(
        ops.enable_schedule, "Enabled", key="name", description="Enable the selected schedules"
    )

    disable = each_action(
        ops.disable_schedule, "Disabled", key="name", description="Disable the selected schedules"
    )

    run_now = each_action(
        ops.run_schedule_now,
        "Enqueued",
        key="name",
        description="Run the selected schedules' jobs now",
    )

    remove = each_action(
        ops.remove_schedule,
        "Removed",
        key="name",
        description="Remove the selected schedules",
        permission="delete",
    )


# --- the rest, read-only ---------------------------------------------------------------


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
