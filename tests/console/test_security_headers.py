"""Security by default: a Content-Security-Policy on every page, and a limit on failed sign-ins."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

from queue_engine.console.views.auth import locked_out  # noqa: F401  named in settings
from tests.support import console_data


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    """Many sign-ins per test: a cheap hasher (the lockout does not depend on it)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


PAGES = [
    "/",
    "/queues/",
    "/queues/emails/",
    "/jobs/",
    "/flows/",
    "/dead/",
    "/schedules/",
    "/workers/",
    "/audit/",
    "/jobs/999999999/",  # a 404, in the console's layout
    "/admin/login/",
]


def policy(response: Any) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives = [part.split() for part in header.split(";") if part.strip()]
    return {name: values for name, *values in directives}


@pytest.mark.parametrize("url", PAGES)
def test_every_page_forbids_inline_scripts(operator: Client, db: None, url: str) -> None:
    console_data.seed()
    response = operator.get(url)

    csp = policy(response)
    assert response.status_code in (200, 404)
    assert csp["script-src"] == ["'self'"]
    assert csp["default-src"] == ["'self'"]
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["object-src"] == ["'none'"]
    assert b"<script>" not in response.content  # no inline script to allow


def test_the_sign_in_page_has_the_policy_too(client: Client, db: None) -> None:
    response = client.get("/login/")

    assert "'unsafe-inline'" not in policy(response)["script-src"]


def sign_in(client: Client, username: str, password: str) -> Any:
    return client.post("/login/", {"username": username, "password": password, "next": "/"})


def test_a_name_is_locked_from_one_address_after_ten_failures_with_a_clear_message(
    make_user: Any,
) -> None:
    make_user("viewer", password="right-password")
    make_user("operator", password="other-password")
    attacker = Client(REMOTE_ADDR="203.0.113.7")

    failures = [sign_in(attacker, "user-viewer", "wrong").status_code for _ in range(9)]
    tenth = sign_in(attacker, "user-viewer", "wrong")
    even_right = sign_in(attacker, "user-viewer", "right-password")
    # The pair, not the address nor the account: a colleague behind the same address
    # signs in, and so does the owner from elsewhere.
    colleague = sign_in(Client(REMOTE_ADDR="203.0.113.7"), "user-operator", "other-password")
    owner = sign_in(Client(REMOTE_ADDR="198.51.100.2"), "user-viewer", "right-password")

    assert failures == [200] * 9  # the form again, "enter a correct user name"
    assert tenth.status_code == 429
    assert even_right.status_code == 429
    assert colleague.status_code == 302
    assert owner.status_code == 302
    page = even_right.content.decode()
    assert "Too many failed sign-ins for the user name &#x27;user-viewer&#x27; from this" in page
    assert "15 min" in page
    assert "manage.py axes_reset_ip_username 203.0.113.7 user-viewer</code>" in page


def test_twelve_failures_for_one_name_leave_the_address_open_to_everyone_else(
    make_user: Any,
) -> None:
    make_user("operator", password="admin-password")
    for _ in range(12):
        sign_in(Client(REMOTE_ADDR="192.0.2.10"), "someone", "wrong")

    admin = sign_in(Client(REMOTE_ADDR="192.0.2.10"), "user-operator", "admin-password")

    assert admin.status_code == 302


def test_an_address_is_locked_after_many_failures_across_user_names(
    make_user: Any, settings: Any
) -> None:
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "SIGN_IN_ADDRESS_LIMIT": 30}
    make_user("viewer", password="right-password")
    sprayer = Client(REMOTE_ADDR="203.0.113.8")

    for n in range(29):
        sign_in(sprayer, f"guess-{n}", "password1")
    before_the_limit = sign_in(Client(REMOTE_ADDR="203.0.113.8"), "user-viewer", "right-password")
    for n in range(30):
        sign_in(sprayer, f"guess-{n}", "password1")
    from_there = sign_in(sprayer, "user-viewer", "right-password")
    from_elsewhere = sign_in(Client(REMOTE_ADDR="198.51.100.3"), "user-viewer", "right-password")

    assert before_the_limit.status_code == 302
    assert from_there.status_code == 429
    assert "from this address, for several user names" in from_there.content.decode()
    assert "manage.py axes_reset_ip 203.0.113.8</code>" in from_there.content.decode()
    assert from_elsewhere.status_code == 302  # the account itself is not locked


def test_hammering_one_locked_name_does_not_lock_the_address(make_user: Any, settings: Any) -> None:
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "SIGN_IN_ADDRESS_LIMIT": 20}
    make_user("operator", password="other-password")
    attacker = Client(REMOTE_ADDR="203.0.113.12")

    refused = [sign_in(attacker, "user-viewer", "wrong").status_code for _ in range(30)]
    colleague = sign_in(Client(REMOTE_ADDR="203.0.113.12"), "user-operator", "other-password")

    assert refused == [200] * 9 + [429] * 21  # refused ones are not counted as failures
    assert colleague.status_code == 302


def test_a_lock_is_logged_once_with_the_name_and_the_address(
    make_user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    attacker = Client(REMOTE_ADDR="203.0.113.11")

    with caplog.at_level(logging.INFO):
        for _ in range(14):
            sign_in(attacker, "mallory", "wrong")

    # (django.request also notes each 429 response, as it does every 4xx one)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.split(".")[0] in ("axes", "queue_engine")
    ]
    assert warnings == [
        "Sign-in locked for user name 'mallory' from address 203.0.113.11 after 10 failures; "
        "`manage.py axes_reset_ip_username 203.0.113.11 mallory` lifts it."
    ]


def via_proxy(client_address: str) -> Client:
    return Client(REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR=f"{client_address}, 10.0.0.9")


def test_behind_trusted_proxies_the_forwarded_address_is_counted(
    make_user: Any, settings: Any
) -> None:
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "TRUSTED_PROXIES": ["10.0.0.0/24"]}
    make_user("viewer", password="right-password")

    for _ in range(10):
        sign_in(via_proxy("203.0.113.20"), "user-viewer", "wrong")
    locked = sign_in(via_proxy("203.0.113.20"), "user-viewer", "right-password")
    other_client = sign_in(via_proxy("203.0.113.21"), "user-viewer", "right-password")

    assert locked.status_code == 429
    assert "axes_reset_ip_username 203.0.113.20 user-viewer" in locked.content.decode()
    assert other_client.status_code == 302


def test_without_trusted_proxies_a_forwarded_header_changes_nothing(make_user: Any) -> None:
    make_user("viewer", password="right-password")

    for n in range(10):
        sign_in(via_proxy(f"203.0.113.{30 + n}"), "user-viewer", "wrong")
    spoofed = sign_in(via_proxy("203.0.113.99"), "user-viewer", "right-password")

    assert spoofed.status_code == 429
    assert "axes_reset_ip_username 10.0.0.5 user-viewer" in spoofed.content.decode()


def test_a_successful_sign_in_forgets_earlier_failures(make_user: Any) -> None:
    make_user("viewer", password="right-password")
    person = Client(REMOTE_ADDR="198.51.100.4")

    for _ in range(9):
        sign_in(person, "user-viewer", "typo")
    signed_in = sign_in(person, "user-viewer", "right-password")
    person.logout()
    for _ in range(9):
        sign_in(person, "user-viewer", "typo")
    still_allowed = sign_in(person, "user-viewer", "right-password")

    assert signed_in.status_code == 302
    assert still_allowed.status_code == 302
