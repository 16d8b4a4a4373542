from django.apps import AppConfig, apps


class QueueEngineConfig(AppConfig):
    name = "queue_engine"
    verbose_name = "Queue engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from queue_engine import checks, gates  # noqa: F401  gates: its kind
        from queue_engine.definition import registry
        from queue_engine.ops import queues as ops_queues

        checks.register()
        registry.autodiscover()
        post_migrate.connect(ops_queues.declare_after_migrate, sender=self)
        if apps.is_installed("axes"):  # the engine runs without it; jobsite uses it
            from axes.signals import user_locked_out

            from queue_engine.console.lockout import log_lockout

            user_locked_out.connect(log_lockout, dispatch_uid="queue_engine.log_lockout")
