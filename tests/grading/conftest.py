"""Grading fixtures: the converted example tasks (shared with the eval tests)."""

from tests.eval.conftest import example_dirs, task_dirs  # noqa: F401
