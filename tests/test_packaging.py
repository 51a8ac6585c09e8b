"""What the README's first command installs (`pip install ".[lab]"`) runs every example notebook: each package a
notebook imports comes with the package's dependencies or the `lab` extra (tour chapter 13 once needed FastAPI
that only the `serve` extra brought, which would also have failed Binder's build). And what the wheel holds: the
safety layer's run-time tables and probe, none of the lab's rows or scripts (`safety_lab/`, issue 33)."""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "examples").rglob("*.ipynb"))
SAFETY = "jupyter_chatflow/pipeline/safety"
LAB = ROOT / "safety_lab"
RUN_TIME = ("data/cues.json", "data/hazards/S1.json", "data/hazards/S14.json", "data/README.md")
"""What the safety layer reads at run time (with the probe file, `data/intent/*.npz`): shipped."""


def requirement_names(requirements: list[str]) -> set[str]:
    return {_normal(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in requirements}


def closure(names: set[str]) -> set[str]:
    """The distributions `names` bring, with everything they require (as installed here; extras left out)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            required = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += requirement_names([r for r in required if "extra ==" not in r])
    return seen


def notebook_imports(path: Path) -> set[str]:
    """Top-level modules the notebook's code cells import (magics and shell lines left out)."""
    modules = set()
    for cell in json.loads(path.read_text())["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] != "code" or text.lstrip().startswith("%%"):  # a cell magic's body is not Python
            continue
        source = "\n".join(
            line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
                if node.module.split(".")[0] == "jupyter_chatflow":
                    modules |= {m for a in node.names for m in package_imports(f"{node.module}.{a.name}")}
                    modules |= package_imports(node.module)
    return modules - set(sys.stdlib_module_names) - {"jupyter_chatflow"}


def package_imports(module: str, seen: set[str] | None = None) -> set[str]:
    """Third-party top-level modules that importing `module` (of this package) imports, through the package's own
    modules: module-level imports only (a function's lazy import, or one under TYPE_CHECKING, runs later or never)."""
    seen = set() if seen is None else seen
    if module in seen:
        return set()
    seen.add(module)
    base = ROOT / Path(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    if not path.exists():
        return set()
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in _module_level(ast.parse(path.read_text()).body):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                origin = f"{parent}.{node.module}" if node.module else parent
                names = [origin, *(f"{origin}.{alias.name}" for alias in node.names)]
            elif node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            if name.split(".")[0] == "jupyter_chatflow":
                found |= package_imports(name, seen)
            elif name.split(".")[0] not in sys.stdlib_module_names:
                found.add(name.split(".")[0])
    return found


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The import statements that run when the module is imported (through try and if, not TYPE_CHECKING)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, ast.Try):
            out += _module_level(node.body)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            out += _module_level(node.body) + _module_level(node.orelse)
    return out


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_lab_install_brings_every_package_the_notebooks_import():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = closure(requirement_names(project["dependencies"] + project["optional-dependencies"]["lab"]))
    providers = metadata.packages_distributions()
    missing = {}
    for path in NOTEBOOKS:
        for module in notebook_imports(path):
            dists = {_normal(d) for d in providers.get(module, [module])}
            if not dists & installed:
                missing.setdefault(path.name, []).append(module)
    assert missing == {}, f"imported by the notebooks but not installed by .[lab]: {missing}"


def test_the_safety_lab_stays_out_of_the_package():
    """Hatch packs every file under `jupyter_chatflow/`: no lab row (`.jsonl`) lies there, and no module of the package
    imports a lab script (the wheel would ship a package that fails to import them)."""
    assert sorted((ROOT / SAFETY).rglob("*.jsonl")) == []
    lab_modules = {"safety_lab", *(path.stem for path in LAB.glob("*.py"))}
    importers = {}
    for path in (ROOT / "jupyter_chatflow").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            if found := [name for name in names if name.split(".")[0] in lab_modules]:
                importers[str(path.relative_to(ROOT))] = found
    assert importers == {}


@pytest.mark.slow
def test_the_wheel_ships_the_run_time_tables_and_the_probe_but_no_lab_rows(tmp_path):
    """The wheel as pip builds it: the hazard tables and the probe, no `.jsonl` of the safety layer (its evaluation
    sets and held-out splits were about 1.5 MB of the wheel before they moved to `safety_lab/`), nothing of the lab."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
                   check=True, timeout=540)  # fmt: skip
    [wheel] = tmp_path.glob("jupyter_chatflow-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if n.startswith(f"{SAFETY}/") and n.endswith(".jsonl")] == []
    assert [n for n in names if n.startswith("safety_lab/") or "/safety_lab/" in n] == []
    assert all(f"{SAFETY}/{path}" in names for path in RUN_TIME), RUN_TIME
    assert [n for n in names if n.startswith(f"{SAFETY}/data/intent/") and n.endswith(".npz")]
    # the package and its metadata only: the documentation site (docs/, its conf.py and pages) stays out (issue 35)
    assert [n for n in names if not n.startswith(("jupyter_chatflow/", "jupyter_chatflow-"))] == []
