"""Imports flow one way: cli -> commands -> core. A test over the source, not a convention.

- Nothing below `apexrl.cli` imports from it (only the entry points `apexrl.__main__`,
  the completion generator `apexrl.completions` and the CLI reference generator
  `apexrl.clidocs` sit above the CLI).
- A "module:attr" string naming apexrl code (a registry's import path, a trial function,
  loaded by apexrl.importpath) counts as an import of that module between packages: it
  may not point up any more than an import statement may.
- No import cycle between apexrl's packages (e.g. worlds <-> registry, envs <-> grading
  before `apexrl.images` and `apexrl.worlds.store`), and none between its modules (e.g.
  cli/world.py <-> cli/world_pack.py), lazy imports inside functions included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "apexrl"
ABOVE_CLI = {"apexrl.__main__", "apexrl.completions", "apexrl.clidocs"}


def modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def dynamic_import(node: ast.AST) -> str | None:
    """The module of `importlib.import_module("apexrl....")` with a literal name."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


IMPORT_PATH = re.compile(r"^(apexrl(?:\.\w+)*):\w+$")


def string_import(node: ast.AST) -> str | None:
    """The module of a "apexrl.module:attr" string (loaded by apexrl.importpath.load)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        m = IMPORT_PATH.match(node.value)
        return m.group(1) if m else None
    return None


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif dyn := dynamic_import(node) or string_import(node):
            names.add(dyn)
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


def cycles_of(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Edges a -> b with a reachable again from b, as {a, b} pairs."""
    return {
        frozenset({a, b})
        for a, targets in graph.items()
        for b in targets
        if a != b and a in reachable(graph, b)
    }


def module_graph() -> dict[str, set[str]]:
    """Module -> the apexrl modules it imports (`from pkg import mod` counts as pkg.mod, and
    `importlib.import_module("apexrl.x")` as apexrl.x; a package's own __init__ is left
    out: importing a submodule always runs it)."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                    for a in node.names
                ]
            elif dyn := dynamic_import(node):
                names = [dyn]
            else:  # a registry's strings name its modules, which may read the registry:
                continue  # "module:attr" strings count between packages only
            for name in names:
                while name not in mods and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name in mods and name != mod and not mod.startswith(name + "."):
                    targets.add(name)
        graph[mod] = targets
    return graph


def test_no_package_cycles():
    cycles = cycles_of(package_graph())
    assert cycles == set(), sorted(map(sorted, cycles))


def test_no_module_cycles():
    cycles = cycles_of(module_graph())
    assert cycles == set(), sorted(map(sorted, cycles))


def test_the_walker_sees_a_cycle():
    """The checks above can fail: the walker finds an edge pair it is given."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert "a" in reachable(graph, "b")
    assert cycles_of(graph) == {frozenset({"a", "b"}), frozenset({"b", "c"}), frozenset({"a", "c"})}
    assert cycles_of({"a": {"b"}, "b": {"c"}}) == set()
    assert package_of("apexrl.cli.app") == "cli" and package_of("apexrl") == "apexrl"


def test_module_attr_strings_are_read_as_imports():
    """The registries' "module:attr" strings are edges: an agent registry in trial/ naming
    "apexrl.agent:ApexAgent" would be trial -> agent (and a cycle, agent reading its
    settings from below); the walker sees such strings."""
    tree = ast.parse('X = "apexrl.agent:ApexAgent"\nY = "not:apexrl.x"\nZ = "apexrl.a.b"')
    assert [string_import(n) for n in ast.walk(tree) if string_import(n)] == ["apexrl.agent"]
    graph = package_graph()
    assert "eval" not in graph["envs"] and "agent" in graph["trial"]
    assert "trial" not in reachable(graph, "agent")
