from django.db import migrations, models


def create_roles(apps, schema_editor):
    from queue_engine.console.roles import ensure_roles

    ensure_roles(apps)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["viewer", "operator"]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("queue_engine", "0007_schedules_metrics"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="ConsoleAccess",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
            ],
            options={
                "managed": False,
                "default_permissions": (),
                "permissions": [
                    ("view_console", "Can view the operations console"),
                    ("operate_console", "Can act in the operations console"),
                ],
            },
        ),
        migrations.RunPython(create_roles, remove_roles),
    ]
