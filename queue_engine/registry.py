"""The job kinds this process knows, by kind name."""

from __future__ import annotations

from importlib import import_module

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules, import_string

from queue_engine.definitions import JobDefinition


class Registry:
    def __init__(self) -> None:
        self._definitions: dict[str, JobDefinition] = {}

    def register(self, definition: JobDefinition) -> None:
        existing = self._definitions.get(definition.kind)
        if existing is not None and _origin(existing) != _origin(definition):
            raise ImproperlyConfigured(
                f"Job kind {definition.kind!r} is registered twice: by {_origin(existing)} "
                f"and by {_origin(definition)}; give one of them another kind=..."
            )
        self._definitions[definition.kind] = definition

    def get(self, kind: str) -> JobDefinition | None:
        definition = self._definitions.get(kind)
        if definition is None and "." in kind:
            definition = self._import(kind)
        return definition

    def kinds(self) -> list[str]:
        return sorted(self._definitions)

    def _import(self, kind: str) -> JobDefinition | None:
        """Resolve a dotted path: a `django.tasks` Task, or a module whose import registers it."""
        try:
            target = import_string(kind)
        except ImportError:
            return None
        from queue_engine.tasks_backend import definition_for_task

        definition = definition_for_task(target)
        if definition is not None:
            self._definitions[kind] = definition
        elif isinstance(target, JobDefinition):
            definition = target
        return definition


def _origin(definition: JobDefinition) -> str:
    return f"{definition.func.__module__}.{definition.func.__qualname__}"


registry = Registry()


def autodiscover() -> None:
    """Import every app's `jobs` module and the modules listed in JOB_MODULES."""
    from queue_engine.conf import option

    autodiscover_modules("jobs")
    for module in option("JOB_MODULES"):
        import_module(module)
