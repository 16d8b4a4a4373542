"""The console's two roles, as auth groups: viewer (read-only) and operator.

Frozen: the permissions and groups are written out here, not read from
`queue_engine.console.roles`, so that a later change there comes as a new migration.
"""

from django.db import migrations

PERMISSIONS = {
    "view_console": "Can view the operations console",
    "operate_console": "Can act in the operations console",
}
ROLES = {"viewer": ["view_console"], "operator": ["view_console", "operate_console"]}


def create_roles(apps, schema_editor):
    content_type, _ = apps.get_model("contenttypes", "ContentType").objects.get_or_create(
        app_label="queue_engine", model="consoleaccess"
    )
    permission_model = apps.get_model("auth", "Permission")
    permissions = {
        codename: permission_model.objects.get_or_create(
            content_type=content_type, codename=codename, defaults={"name": name}
        )[0]
        for codename, name in PERMISSIONS.items()
    }
    for role, codenames in ROLES.items():
        group, _ = apps.get_model("auth", "Group").objects.get_or_create(name=role)
        group.permissions.add(*(permissions[c] for c in codenames))


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=list(ROLES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("queue_engine", "0002_sql"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
