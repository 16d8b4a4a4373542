"""Security by default: a Content-Security-Policy on every page, and a limit on failed sign-ins."""

from __future__ import annotations

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


def test_an_account_is_locked_after_ten_failures_with_a_clear_message(
    make_user: Any, settings: Any
) -> None:
    make_user("viewer", password="right-password")
    attacker = Client(REMOTE_ADDR="203.0.113.7")

    failures = [sign_in(attacker, "user-viewer", "wrong").status_code for _ in range(9)]
    tenth = sign_in(attacker, "user-viewer", "wrong")
    even_right = sign_in(attacker, "user-viewer", "right-password")
    # The account, not only the address: the owner elsewhere is refused as well.
    owner = sign_in(Client(REMOTE_ADDR="198.51.100.2"), "user-viewer", "right-password")

    assert failures == [200] * 9  # the form again, "enter a correct user name"
    assert tenth.status_code == 429
    assert even_right.status_code == 429
    assert owner.status_code == 429
    page = owner.content.decode()
    assert "Too many failed sign-ins for this user name or from this address" in page
    assert "15 min" in page
    assert "axes_reset_username" in page


def test_an_address_is_locked_after_ten_failures_across_user_names(make_user: Any) -> None:
    make_user("viewer", password="right-password")
    sprayer = Client(REMOTE_ADDR="203.0.113.8")

    for n in range(10):
        sign_in(sprayer, f"guess-{n}", "password1")
    from_there = sign_in(sprayer, "user-viewer", "right-password")
    from_elsewhere = sign_in(Client(REMOTE_ADDR="198.51.100.3"), "user-viewer", "right-password")

    assert from_there.status_code == 429
    assert from_elsewhere.status_code == 302  # the account itself is not locked


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
