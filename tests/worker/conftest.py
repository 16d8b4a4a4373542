"""Fixtures of the worker tests."""

from tests.support.step_runs import step_runs  # noqa: F401  the fixture
