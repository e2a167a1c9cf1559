"""Imports flow one way: cli -> commands -> core. A test over the source, not a convention.

- Nothing below `apexrl.cli` imports from it (only the entry points `apexrl.__main__`
  and the completion generator `apexrl.completions` sit above the CLI).
- No import cycle between apexrl's packages, except the ones listed in KNOWN_CYCLES,
  which are waiting for their move (issue "One home per idea"); a new one fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "apexrl"
ABOVE_CLI = {"apexrl.__main__", "apexrl.completions"}
KNOWN_CYCLES = {frozenset({"envs", "grading"}), frozenset({"registry", "worlds"})}


def modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n == "apexrl" or n.startswith("apexrl.")}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for mod, path in modules().items():
        src = package_of(mod)
        for target in imported(path):
            dst = package_of(target)
            if dst not in (src, "apexrl"):
                graph.setdefault(src, set()).add(dst)
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_nothing_below_the_cli_imports_it():
    upward = [
        f"{mod} imports {t}"
        for mod, path in sorted(modules().items())
        if not mod.startswith("apexrl.cli") and mod not in ABOVE_CLI
        for t in sorted(imported(path))
        if t == "apexrl.cli" or t.startswith("apexrl.cli.")
    ]
    assert upward == [], "pass a callback (on_warn, on_progress) instead:\n" + "\n".join(upward)


def test_no_new_package_cycles():
    graph = package_graph()
    cycles = {
        frozenset({a, b})
        for a, targets in graph.items()
        for b in targets
        if a in reachable(graph, b) and a != b
    }
    assert cycles - KNOWN_CYCLES == set(), sorted(map(sorted, cycles - KNOWN_CYCLES))


def test_the_walker_sees_a_cycle():
    """The checks above can fail: the walker finds an edge pair it is given."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert "a" in reachable(graph, "b")
    assert package_of("apexrl.cli.app") == "cli" and package_of("apexrl") == "apexrl"
