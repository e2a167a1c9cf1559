"""The environment a judge model may need reaches archipelago's runner both ways it runs:
from the host (apexrl.grading.archipelago) and from the standalone copy vendored into
converted tasks (tasks/vendored/archipelago_grade.py, which cannot import apexrl)."""

from __future__ import annotations

import ast
from pathlib import Path

import apexrl.tasks
from apexrl.grading.archipelago import PASS_KEYS
from apexrl.secrets import JUDGE_KEYS, VERTEX_ENV

VENDORED = Path(apexrl.tasks.__file__).parent / "vendored" / "archipelago_grade.py"


def vendored_pass_keys() -> tuple[str, ...]:
    for node in ast.parse(VENDORED.read_text("utf-8")).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["PASS_KEYS"]:
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{VENDORED} assigns no PASS_KEYS")


def test_the_vendored_grader_passes_every_key_the_host_runner_passes():
    assert PASS_KEYS == JUDGE_KEYS + VERTEX_ENV
    missing = [k for k in PASS_KEYS if k not in vendored_pass_keys()]
    assert missing == [], f"{VENDORED.name} does not pass {missing}"


def test_the_vendored_grader_blanks_the_judge_keys_in_its_log():
    # its SECRET_KEYS takes the first four of its PASS_KEYS as the provider keys
    assert vendored_pass_keys()[:4] == JUDGE_KEYS
