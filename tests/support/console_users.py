"""Test clients logged in as console users; the users come from conftest's `make_user`."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client


def client_for(user: User, *, enforce_csrf_checks: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    client.force_login(user)
    return client
