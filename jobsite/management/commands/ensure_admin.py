from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the demo admin user if it does not exist, and print its credentials."

    def handle(self, *args: Any, **options: Any) -> None:
        username = os.environ.get("JOBSITE_ADMIN_USER", "admin")
        password = os.environ.get("JOBSITE_ADMIN_PASSWORD", "admin")
        User = get_user_model()
        if not User.objects.filter(username=username).exists():
            User.objects.create_superuser(username, f"{username}@localhost", password)
            self.stdout.write(f"created admin user: {username} / {password}")
        else:
            self.stdout.write(f"admin user: {username} (password unchanged; default {password!r})")
