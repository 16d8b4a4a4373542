"""The console's two roles, as Django groups holding its two permissions."""

from __future__ import annotations

from typing import Any

VIEW = "queue_engine.view_console"
OPERATE = "queue_engine.operate_console"

PERMISSIONS = {
    "view_console": "Can view the operations console",
    "operate_console": "Can act in the operations console",
}
ROLES = {
    "viewer": ["view_console"],
    "operator": ["view_console", "operate_console"],
}


def ensure_roles(apps: Any = None) -> None:
    """Create the permissions and the groups "viewer" and "operator" if missing (idempotent).

    `apps` is the migration state's registry inside a migration, else the live one.
    """
    if apps is None:
        from django.apps import apps as live_apps

        apps = live_apps
    content_type_model = apps.get_model("contenttypes", "ContentType")
    permission_model = apps.get_model("auth", "Permission")
    group_model = apps.get_model("auth", "Group")
    content_type, _ = content_type_model.objects.get_or_create(
        app_label="queue_engine", model="consoleaccess"
    )
    permissions = {}
    for codename, name in PERMISSIONS.items():
        permissions[codename], _ = permission_model.objects.get_or_create(
            content_type=content_type, codename=codename, defaults={"name": name}
        )
    for role, codenames in ROLES.items():
        group, _ = group_model.objects.get_or_create(name=role)
        group.permissions.add(*(permissions[c] for c in codenames))
