"""Editing a queue's configuration and group limits from the console's queue page."""

from __future__ import annotations

import html

import pytest
from django.test import Client

from queue_engine.console.queue_form import as_input
from queue_engine.models import AuditEvent, GroupLimit, QueueConfig
from queue_engine.ops import queues as ops_queues
from queue_engine.templatetags.queue_engine import queue_url_name
from tests.support.console_data import XSS
from tests.support.console_users import client_for

pytestmark = pytest.mark.django_db

FORM = {
    "max_concurrency": "",
    "rate_limit": "",
    "rate_window": "1m",
    "group_concurrency": "",
    "lock_duration": "1m",
    "retain_succeeded": "1d",
    "retain_failed": "7d",
    "retain_cancelled": "1d",
}


@pytest.fixture
def emails(db: None) -> QueueConfig:
    return QueueConfig.objects.create(name="emails")


def text_of(response) -> str:  # type: ignore[no-untyped-def]
    return response.content.decode()


def url(name: str, action: str = "") -> str:
    return f"/queues/{queue_url_name(name)}/{action}"


# --- who may edit ---------------------------------------------------------------------


def test_viewers_see_the_configuration_but_no_edit_form(viewer: Client, emails) -> None:
    page = text_of(viewer.get(url("emails")))

    assert "Max concurrency" in page and "read only" in page
    assert "Edit configuration" not in page and "/config/" not in page


@pytest.mark.parametrize("action", ["config/", "config/reset/", "group-limit/"])
def test_viewers_cannot_post_changes(viewer: Client, emails, action: str) -> None:
    response = viewer.post(
        url("emails", action),
        {**FORM, "max_concurrency": "3", "group_key": "acme", "confirm": "yes"},
    )

    assert response.status_code == 403
    assert QueueConfig.objects.get(name="emails").max_concurrency is None
    assert not GroupLimit.objects.exists() and not AuditEvent.objects.exists()


def test_operators_see_the_edit_form_with_current_values(operator: Client, emails) -> None:
    page = text_of(operator.get(url("emails")))

    assert "Edit configuration" in page
    assert 'name="retain_failed" value="7d"' in page
    assert 'name="lock_duration" value="1m"' in page


def test_posts_without_a_csrf_token_are_refused(make_user, emails) -> None:
    client = client_for(make_user("operator"), enforce_csrf_checks=True)

    response = client.post(url("emails", "config/"), {**FORM, "max_concurrency": "3"})

    assert response.status_code == 403
    assert QueueConfig.objects.get(name="emails").max_concurrency is None


# --- editing --------------------------------------------------------------------------


def test_an_edit_shows_old_and_new_values_and_changes_nothing_yet(operator: Client, emails) -> None:
    response = operator.post(
        url("emails", "config/"), {**FORM, "max_concurrency": "5", "lock_duration": "15m"}
    )

    page = text_of(response)
    assert response.status_code == 200
    assert "Change the configuration of emails?" in page
    assert 'no limit</span> <span aria-label="becomes">→</span> <span class="new">5' in page
    assert "1 min</span>" in page and "15 min</span>" in page
    assert "Keep dead" not in page  # unchanged fields are not listed
    assert QueueConfig.objects.get(name="emails").max_concurrency is None
    assert not AuditEvent.objects.exists()


def test_a_confirmed_edit_is_applied_recorded_and_audited(operator: Client, emails) -> None:
    response = operator.post(
        url("emails", "config/"),
        {
            "max_concurrency": "5",
            "lock_duration": "15m",
            "retain_failed": "2 days",
            "confirm": "yes",
        },
    )

    assert response.status_code == 302 and response["Location"] == "/queues/emails/"
    config = QueueConfig.objects.get(name="emails")
    assert (config.max_concurrency, config.lock_duration, config.retain_failed) == (5, 900, 172800)
    assert config.edited_fields == ["lock_duration", "max_concurrency", "retain_failed"]
    [event] = AuditEvent.objects.all()
    assert (event.actor, event.action, event.target) == ("user-operator", "queue_config", "emails")
    assert event.details["changes"]["lock_duration"] == [60, 900]


def test_an_edit_that_changes_nothing_says_so(operator: Client, emails) -> None:
    response = operator.post(url("emails", "config/"), FORM, follow=True)

    assert "Nothing changed" in text_of(response)
    assert not AuditEvent.objects.exists()
    assert QueueConfig.objects.get(name="emails").edited_fields == []


def test_emptying_a_limit_removes_it(operator: Client, emails) -> None:
    ops_queues.update_queue_config("emails", max_concurrency=4)

    operator.post(url("emails", "config/"), {"max_concurrency": "", "confirm": "yes"})

    assert QueueConfig.objects.get(name="emails").max_concurrency is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_concurrency", "-3", "Enter a whole number, or leave it empty for no limit."),
        ("max_concurrency", "lots", "Enter a whole number, or leave it empty for no limit."),
        ("max_concurrency", "0", "max_concurrency must be a whole number from 1"),
        ("rate_limit", "99999999999999", "rate_limit must be a whole number from 1"),
        ("lock_duration", "0s", "lock_duration must be a whole number from 1"),
        ("lock_duration", "", "Enter a duration such as 90s, 15m, 2h or 7d."),
        ("retain_failed", "-1d", "Enter a duration such as 90s, 15m, 2h or 7d."),
        ("retain_failed", "3 fortnights", "Enter a duration such as 90s, 15m, 2h or 7d."),
        ("retain_succeeded", "999999d", "retain_succeeded must be a whole number from 0"),
    ],
)
def test_invalid_values_show_the_form_again_and_write_nothing(
    operator: Client, emails, field: str, value: str, message: str
) -> None:
    response = operator.post(
        url("emails", "config/"), {**FORM, "max_concurrency": "5", field: value, "confirm": "yes"}
    )

    page = text_of(response)
    assert response.status_code == 200
    assert "Nothing was changed" in page
    assert html.escape(message) in page
    assert f'id="cfg-{field}" name="{field}" value="{html.escape(value)}"' in page
    assert QueueConfig.objects.get(name="emails").max_concurrency is None
    assert not AuditEvent.objects.exists()


def test_an_unknown_queue_cannot_be_configured(operator: Client) -> None:
    response = operator.post(url("nosuchqueue", "config/"), {"max_concurrency": "3"})

    assert response.status_code == 404
    assert not QueueConfig.objects.exists()


def test_durations_are_shown_in_their_largest_whole_unit() -> None:
    assert [as_input("duration", s) for s in (0, 45, 90, 120, 3600, 5400, 86400, 604800)] == [
        "0s",
        "45s",
        "90s",
        "2m",
        "1h",
        "90m",
        "1d",
        "7d",
    ]
    assert (as_input("count", None), as_input("count", 12)) == ("", "12")


# --- handing fields back to settings ---------------------------------------------------


def test_edited_fields_are_marked_with_a_way_back_to_the_setting(operator: Client, emails) -> None:
    ops_queues.update_queue_config("emails", max_concurrency=4)

    page = text_of(operator.get(url("emails")))

    assert 'class="origin edited"' in page
    assert 'name="field" value="max_concurrency"' in page
    assert "use the setting" in page and "Use the settings for all" in page


def test_reset_confirms_then_hands_the_field_back(operator: Client, emails) -> None:
    ops_queues.update_queue_config("emails", max_concurrency=4, lock_duration=300)

    confirm = text_of(operator.post(url("emails", "config/reset/"), {"field": "max_concurrency"}))
    unchanged = QueueConfig.objects.get(name="emails").max_concurrency
    operator.post(url("emails", "config/reset/"), {"field": "max_concurrency", "confirm": "yes"})

    assert "Use the settings for emails?" in confirm and "Lock duration" not in confirm
    assert unchanged == 4
    config = QueueConfig.objects.get(name="emails")
    assert (config.max_concurrency, config.lock_duration) == (None, 300)
    assert config.edited_fields == ["lock_duration"]
    assert AuditEvent.objects.filter(action="queue_config_reset").count() == 1


def test_reset_all_hands_back_every_edited_field_but_not_paused(operator: Client, emails) -> None:
    ops_queues.update_queue_config("emails", max_concurrency=4, retain_failed=60)
    ops_queues.pause_queue("emails")

    operator.post(url("emails", "config/reset/"), {"confirm": "yes"})

    config = QueueConfig.objects.get(name="emails")
    assert (config.max_concurrency, config.retain_failed, config.paused) == (None, 604800, True)
    assert config.edited_fields == ["paused"]


def test_reset_with_nothing_edited_says_so(operator: Client, emails) -> None:
    response = operator.post(url("emails", "config/reset/"), {"confirm": "yes"}, follow=True)

    assert "Nothing to hand back" in text_of(response)
    assert not AuditEvent.objects.exists()


# --- group limits ---------------------------------------------------------------------


def test_a_group_limit_is_added_after_confirmation(operator: Client, emails) -> None:
    confirm = operator.post(
        url("emails", "group-limit/"), {"group_key": "acme", "max_concurrency": "2"}
    )
    written_early = GroupLimit.objects.exists()
    operator.post(
        url("emails", "group-limit/"),
        {"group_key": "acme", "max_concurrency": "2", "confirm": "yes"},
    )

    assert "Limit group acme of emails?" in text_of(confirm)
    assert "per-group limit (no limit)" in text_of(confirm)
    assert not written_early
    limit = GroupLimit.objects.get()
    assert (limit.queue, limit.group_key, limit.max_concurrency) == ("emails", "acme", 2)
    [event] = AuditEvent.objects.all()
    assert (event.action, event.details) == (
        "group_limit",
        {"group_key": "acme", "changes": {"max_concurrency": [None, 2]}},
    )


def test_a_group_limit_is_changed_and_removed(operator: Client, emails) -> None:
    ops_queues.set_group_limit("emails", "acme", 2)

    operator.post(
        url("emails", "group-limit/"),
        {"group_key": "acme", "max_concurrency": "5", "confirm": "yes"},
    )
    changed = GroupLimit.objects.get().max_concurrency
    hold = text_of(
        operator.post(url("emails", "group-limit/"), {"group_key": "acme", "max_concurrency": "0"})
    )
    operator.post(
        url("emails", "group-limit/"),
        {"group_key": "acme", "max_concurrency": "0", "confirm": "yes"},
    )
    held = GroupLimit.objects.get().max_concurrency
    page = text_of(operator.get(url("emails", "")))
    confirm = text_of(
        operator.post(url("emails", "group-limit/"), {"group_key": "acme", "max_concurrency": ""})
    )
    operator.post(
        url("emails", "group-limit/"),
        {"group_key": "acme", "max_concurrency": "", "confirm": "yes"},
    )

    assert (changed, held) == (5, 0)
    assert "Hold group acme of emails?" in hold and "held: none of its jobs start" in hold
    assert "held: none of its jobs start" in page
    assert "Remove the limit on group acme of emails?" in confirm
    assert not GroupLimit.objects.exists()
    assert [e.details["changes"] for e in AuditEvent.objects.order_by("id")] == [
        {"max_concurrency": [None, 2]},
        {"max_concurrency": [2, 5]},
        {"max_concurrency": [5, 0]},
        {"max_concurrency": [0, None]},
    ]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("acme", "many", "Enter a whole number (0 holds the group: none of its jobs start)"),
        ("", "3", "a group key has 1 to 255 characters"),
        ("acme", "999999999999", "it must be a whole number from 0 (hold the group) to"),
    ],
)
def test_bad_group_limits_show_the_form_again(
    operator: Client, emails, key: str, value: str, message: str
) -> None:
    response = operator.post(
        url("emails", "group-limit/"),
        {"group_key": key, "max_concurrency": value, "confirm": "yes"},
    )

    assert response.status_code == 200
    assert html.escape(message) in text_of(response)
    assert not GroupLimit.objects.exists() and not AuditEvent.objects.exists()


# --- escaping -------------------------------------------------------------------------


def test_hostile_queue_names_and_group_keys_come_out_escaped(operator: Client) -> None:
    name = f"team/{XSS}"
    QueueConfig.objects.create(name=name)
    ops_queues.update_queue_config(name, max_concurrency=3)
    ops_queues.set_group_limit(name, XSS, 2)

    pages = [
        operator.get(url(name)),
        operator.post(url(name, "config/"), {**FORM, "max_concurrency": "4"}),
        operator.post(url(name, "config/"), {**FORM, "lock_duration": XSS}),
        operator.post(url(name, "config/reset/"), {"field": "max_concurrency"}),
        operator.post(url(name, "group-limit/"), {"group_key": XSS, "max_concurrency": "5"}),
    ]

    for response in pages:
        assert response.status_code == 200
        assert XSS not in text_of(response)
        assert html.escape(XSS) in text_of(response)
    operator.post(
        url(name, "group-limit/"), {"group_key": XSS, "max_concurrency": "5", "confirm": "yes"}
    )
    assert GroupLimit.objects.get(queue=name, group_key=XSS).max_concurrency == 5
