from django.apps import AppConfig


class QueueEngineConfig(AppConfig):
    name = "queue_engine"
    verbose_name = "Queue engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from queue_engine import checks, registry
        from queue_engine.ops import queues as ops_queues

        checks.register()
        registry.autodiscover()
        post_migrate.connect(ops_queues.declare_after_migrate, sender=self)
