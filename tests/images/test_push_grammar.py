"""Issue 29, finding 7c: `image push` has one verdict per command line. The option
grammar is enumerated (every value option in every spelling, with odd values): a value
that looks like an option is refused, and the plain spellings give the values meant."""

from __future__ import annotations

import itertools
import re

import pytest
import typer.main

from apexrl.cli.app import app as root_app
from apexrl.cli.image import app
from tests.images.conftest import apexrl

_CMD = typer.main.get_command(app)
_CMD = _CMD.commands["push"] if hasattr(_CMD, "commands") else _CMD

_VALUES = {
    "ints": [
        "4", "04", "+4", " 4", "4 ", "1_0", "4.0", "1e1", "\uff14", "\u0664", "-1", "0", "64", "65",
        "99999999999999999999", "x", "",
    ],
    "floats": [
        "30", "2.5", "0.5", "0", "0.0", "-1", "1e3", "1_0", "nan", "inf", "-inf", " 5", "\uff15",
        ".5", "5.", "x", "",
    ],
    "text": ["h/r", "x", "{world_id}", "", "-", "--dry-run", "--json", "-n", "-x=1", "r é"],
}  # fmt: skip
_OPTIONS = {
    "--to": "text",
    "--tag": "text",
    "-n": "ints",
    "--concurrency": "ints",
    "--retries": "ints",
    "--timeout": "floats",
    "--registry-endpoint": "text",
}
_KEYS = ("to", "tag", "concurrency", "retries", "timeout", "registry_endpoint", "archives")


def _spellings(opt: str, value: str) -> list[list[str]]:
    out = [[opt, value], [f"{opt}={value}"]]
    if not opt.startswith("--"):
        out.append([f"{opt}{value}"])  # click's attached short value
    return out


def _typer(args: list[str]) -> dict | str:
    try:
        ctx = _CMD.make_context("push", list(args))
    except Exception as e:  # click's usage errors: exit 2
        return f"refused: {e}"
    return ctx.params


def _command_lines() -> list[list[str]]:
    lines = []
    for opt, kind in _OPTIONS.items():
        base = [] if opt == "--to" else ["--to", "h/r"]
        for value in _VALUES[kind]:
            for spelled in _spellings(opt, value):
                lines.append(["a.tar", *base, *spelled])
                lines.append([*spelled, *base, "a.tar", "b.tar"])
    lines += [
        ["a.tar", "--to", "h/r", "--json"],
        ["a.tar", "--to", "h/r", "--json", "--json"],
        ["a.tar", "--to", "h/r", "--json=1"],
        ["a.tar", "--to", "h/r", "--dry-run"],
        ["a.tar", "--to", "h/r", "--tag", "a", "--tag", "b"],
        ["--", "a.tar", "--to", "h/r"],
        ["a.tar", "--", "--to", "h/r"],
        ["-", "--to", "h/r"],
        ["a.tar", "--to"],
        ["a.tar", "--to", "h/r", "--tag"],
        ["a.tar", "--to", "h/r", "--concurrency=8", "--retries=3", "--timeout=2.5"],
        ["a.tar", "--to", "h/r", "--registry-endpoint", "http://127.0.0.1:5000", "--json"],
    ]
    return lines


def test_plain_spellings_give_the_values_meant(monkeypatch):
    monkeypatch.delenv("APEXRL_REGISTRY_ENDPOINT", raising=False)
    lines = _command_lines()
    assert len(lines) > 300
    read = [_typer(args) for args in lines]
    assert sum(isinstance(r, dict) for r in read) >= 40
    got = _typer(["a.tar", "--to", "h/r", "--tag=x", "-n", "3", "--timeout=2.5", "--json"])
    assert (got["archives"], got["to"], got["tag"], got["concurrency"]) == (
        ["a.tar"],
        "h/r",
        "x",
        3,
    )
    assert got["timeout"] == 2.5 and got["json_out"] and not got["dry_run"]
    for args, r in zip(lines, read, strict=True):
        if isinstance(r, dict):  # nothing that looks like an option became a value
            assert not any(
                isinstance(r[k], str) and r[k].startswith("-")
                for k in ("to", "tag", "registry_endpoint")
            ), args


@pytest.mark.parametrize(
    ("opt", "value"),
    list(itertools.product(["--to", "--tag", "--registry-endpoint"], ["--dry-run", "-n", "-"]))
    + [("-n", "-1"), ("--retries", "-1"), ("--timeout", "-5"), ("--timeout", "nan")],
)
def test_a_value_that_looks_like_an_option_is_refused_by_both(opt, value, monkeypatch):
    monkeypatch.delenv("APEXRL_REGISTRY_ENDPOINT", raising=False)
    base = [] if opt == "--to" else ["--to", "h/r"]
    for spelled in _spellings(opt, value)[:2]:
        args = ["a.tar", *base, *spelled]
        assert isinstance(_typer(args), str), args


def test_tag_dry_run_is_a_usage_error_not_a_push(runner, tmp_path):
    """`--tag --dry-run` read as a tag would push for real: exit 2, naming the option,
    from the Typer app and from the installed command."""
    archive = tmp_path / "w.tar"
    archive.write_bytes(b"")
    args = ["image", "push", str(archive), "--to", "127.0.0.1:9/r", "--tag", "--dry-run"]
    res = runner.invoke(root_app, args)
    assert res.exit_code == 2 and "looks like an option" in _flat(res.output), res.output
    p = apexrl(*args)
    assert p.returncode == 2 and "looks like an option" in _flat(p.stderr), p.stderr


def _flat(text: str) -> str:
    """The message without Rich's box and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())
