from __future__ import annotations

from django.db import models


class ConsoleAccess(models.Model):
    """Carries the console's two permissions; it has no table and no rows.

    `view_console` lets a user read every console page, `operate_console` lets
    them act (cancel, retry, remove, redrive, pause). The data migration gives
    them to the groups "viewer" and "operator".
    """

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_console", "Can view the operations console"),
            ("operate_console", "Can act in the operations console"),
        ]

    def __str__(self) -> str:
        return "console access"
