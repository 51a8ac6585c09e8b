"""The package's dependencies point one way: model, tokenizer → engine → events → store → pipeline → front ends.

Every import counts, those inside functions too. A module may import its own subpackage's modules and those of
lower layers, never a higher layer or another package of its own layer, and no import cycle exists anywhere.
And no module reaches into another's private members: a name that starts with one underscore is used only in the
module that defines it (what another module needs is public, documented and tested as such).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "jupyter_chatflow"
LAYERS = {
    "errors": 0, "settings": 0, "processes": 0, "lazy": 0,
    "model": 1, "tokenizer": 1,
    "engine": 2, "testing": 2,
    "events": 3,
    "store": 4, "account": 4,
    "pipeline": 5,
    "frontends": 6,
    "__init__": 7, "__main__": 7,  # the package's face (cf.Chat, cf.ChatWidget, %load_ext) and `python -m`
}  # fmt: skip


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> set[str]:
    """The package's modules that `name` imports (a `from package import module` names the module)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names}
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports(name) for name in MODULES}


def layer_of(name: str) -> tuple[str, int]:
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    return top, LAYERS[top]


def test_every_module_has_a_layer():
    assert {layer_of(name)[0] for name in MODULES} <= set(LAYERS)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down(name):
    package, rank = layer_of(name)
    wrong = []
    for target in sorted(GRAPH[name]):
        other, other_rank = layer_of(target)
        if other != package and other_rank >= rank:
            wrong.append(f"{target} ({other}, layer {other_rank})")
    assert not wrong, f"{name} ({package}, layer {rank}) imports upward or sideways: {', '.join(wrong)}"


def test_no_import_cycles():
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        seen[name] = 1
        for target in sorted(GRAPH[name]):
            if seen.get(target) == 1:
                cycle = [*path[path.index(target) :], target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in seen:
                visit(target, [*path, target])
        seen[name] = 2

    for name in sorted(GRAPH):
        if name not in seen:
            visit(name, [name])


def _names_defined(tree: ast.AST) -> set[str]:
    """Every name a module binds: functions, classes, attributes it assigns, variables, parameters."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}
DEFINED = {name: _names_defined(tree) for name, tree in TREES.items()}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_uses_another_modules_private_names(name):
    """`from .model import _Run` or `model._take_cache(…)`, where `_Run`/`_take_cache` are another module's, is a
    reach into its internals. (A private attribute the module itself defines is its own, and so is one on `self`,
    a base class's; one that no module of the package defines, such as `os._Environ`, is a library's, not checked
    here.)"""
    elsewhere = {n for other, names in DEFINED.items() if other != name for n in names if _private(n)}
    own = DEFINED[name]
    wrong = []
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.ImportFrom):
            wrong += [f"line {node.lineno}: imports {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr in elsewhere - own:
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue  # (a subclass's own use of what its base class keeps for subclasses)
            wrong.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert not wrong, f"{name} uses other modules' private names: " + "; ".join(wrong)
