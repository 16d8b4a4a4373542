from django.apps import AppConfig


class QueueEngineConfig(AppConfig):
    name = "queue_engine"
    verbose_name = "Queue engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from queue_engine import checks, registry

        checks.register()
        registry.autodiscover()
