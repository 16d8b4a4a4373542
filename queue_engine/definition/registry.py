"""The job kinds this process knows, by kind name."""

from __future__ import annotations

from importlib import import_module

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules, import_string

from queue_engine.conf import option
from queue_engine.definition.job import JobDefinition
from queue_engine.definition.tasks import definition_for_task


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
        definition = definition_for_task(target)
        if definition is not None:
            self._definitions[kind] = definition
        elif isinstance(target, JobDefinition):
            definition = target
        return definition


ENGINE_KINDS = "queue_engine."  # the prefix of the engine's own kinds (the console's bulk actions)


def is_engine_kind(kind: str) -> bool:
    """Whether `kind` is the engine's own: the console lists it as internal, with no Pause."""
    return kind.startswith(ENGINE_KINDS)


def _origin(definition: JobDefinition) -> str:
    return f"{definition.func.__module__}.{definition.func.__qualname__}"


registry = Registry()


def autodiscover() -> None:
    """Import every app's `jobs` module and the modules listed in JOB_MODULES."""
    autodiscover_modules("jobs")
    modules = option("JOB_MODULES")
    if isinstance(modules, str) or not all(isinstance(m, str) for m in modules):
        raise ImproperlyConfigured(
            f"QUEUE_ENGINE['JOB_MODULES'] must be a list of module names, not {modules!r}; "
            'for example ["myapp.jobs"]'
        )
    for module in modules:
        try:
            import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not (module + ".").startswith(exc.name + "."):
                raise  # the module exists; something it imports does not
            raise ImproperlyConfigured(
                f"QUEUE_ENGINE['JOB_MODULES'] names {module!r}, which cannot be imported "
                f"({exc}); check its spelling and that its package is installed"
            ) from None
