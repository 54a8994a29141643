"""The architecture holds: each stage imports only earlier stages (docs/architecture.md).

Every import statement of every module is read with ``ast`` -- function-level imports included, since most of
hloscope imports lazily -- and checked against the stage order::

    hlo model -> parsers -> cost -> roofline -> result -> compare -> report (presentation) -> front ends
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "hloscope"

#: stage -> modules (prefixes) it must never import.
FORBIDDEN = {
    "hloscope.parsers": ("hloscope.cost", "hloscope.roofline", "hloscope.report", "hloscope.result",
                         "hloscope.compare", "hloscope.analysis", "hloscope.pytest_plugin", "hloscope.cli"),
    "hloscope.hlo": ("hloscope.parsers", "hloscope.cost", "hloscope.roofline", "hloscope.report",
                     "hloscope.result", "hloscope.compare", "hloscope.analysis"),
    "hloscope.hlo_values": ("hloscope.parsers", "hloscope.cost", "hloscope.roofline", "hloscope.report",
                            "hloscope.result", "hloscope.compare", "hloscope.analysis"),
    "hloscope.cost": ("hloscope.roofline", "hloscope.report", "hloscope.result", "hloscope.compare",
                      "hloscope.analysis", "hloscope.pytest_plugin", "hloscope.cli"),
    "hloscope.roofline": ("hloscope.report", "hloscope.result", "hloscope.compare", "hloscope.analysis",
                          "hloscope.pytest_plugin", "hloscope.cli"),
    "hloscope.memory": ("hloscope.roofline", "hloscope.report", "hloscope.result", "hloscope.compare",
                        "hloscope.analysis", "hloscope.pytest_plugin", "hloscope.cli"),
    "hloscope.steps": ("hloscope.report", "hloscope.result", "hloscope.compare", "hloscope.analysis",
                       "hloscope.pytest_plugin", "hloscope.cli"),
    "hloscope.advice": ("hloscope.report", "hloscope.compare", "hloscope.analysis", "hloscope.pytest_plugin",
                        "hloscope.cli"),
    "hloscope.pod": ("hloscope.report", "hloscope.pytest_plugin", "hloscope.cli"),
    "hloscope.result": ("hloscope.report", "hloscope.compare", "hloscope.analysis", "hloscope.pytest_plugin",
                        "hloscope.cli"),
    "hloscope.compare": ("hloscope.report", "hloscope.analysis", "hloscope.pytest_plugin", "hloscope.cli"),
    "hloscope.report": ("hloscope.analysis", "hloscope.pytest_plugin", "hloscope.cli", "hloscope.compile"),
}

#: Data, not logic: exempt from the length rule.
LONG_OK: frozenset[str] = frozenset()
MAX_LINES = 850


def _modules() -> list[tuple[str, Path]]:
    out = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts)
        out.append((name[: -len(".__init__")] if name.endswith(".__init__") else name, f))
    return out


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return found


@pytest.mark.parametrize("module,path", _modules(), ids=[m for m, _ in _modules()])
def test_stage_imports_only_earlier_stages(module: str, path: Path) -> None:
    for stage, banned in FORBIDDEN.items():
        if module == stage or module.startswith(stage + "."):
            bad = [f"{path.name}:{line}: imports {name}" for line, name in _imports(path, module)
                   if any(name == b or name.startswith(b + ".") for b in banned)]
            assert not bad, f"{module} is in stage {stage}, which must not import later stages:\n" + "\n".join(bad)


def test_one_mfu_formula() -> None:
    """MFU is computed in one place (hloscope.roofline.tables.mfu / total_mfu); everything else calls it."""
    defining = []
    for module, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "mfu" in node.name.lower():
                divides = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for n in ast.walk(node))
                if divides:
                    defining.append(f"{module}.{node.name}")
    assert sorted(defining) == ["hloscope.roofline.tables.mfu", "hloscope.roofline.tables.total_mfu"], defining


def test_no_long_modules() -> None:
    too_long = {m: n for m, p in _modules() if m not in LONG_OK
                and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split them by idea): {too_long}"
