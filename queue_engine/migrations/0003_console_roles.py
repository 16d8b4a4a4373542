"""The console's two roles, as auth groups: viewer (read-only) and operator."""

from django.db import migrations


def create_roles(apps, schema_editor):
    from queue_engine.console.roles import ensure_roles

    ensure_roles(apps)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["viewer", "operator"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("queue_engine", "0002_sql"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
