"""The records package's modules import each other one way only (no cycle), and never verl."""

from __future__ import annotations

import ast
from pathlib import Path

import devenus.records as records

PKG = Path(records.__file__).parent


def _imports(path: Path) -> set[str]:
    """Sibling modules a records module imports (relative or absolute, at any depth in the file)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                out.add(node.module.split(".")[0])
            elif node.level == 1:
                out.update(a.name for a in node.names)
            elif node.module and node.module.startswith("devenus.records."):
                out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("devenus.records."):
                    out.add(a.name.split(".")[2])
    return out


def _all_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_no_import_cycle_between_records_modules():
    mods = {p.stem: p for p in PKG.glob("*.py") if p.stem != "__init__"}
    graph = {m: _imports(p) & set(mods) for m, p in mods.items()}
    assert "validate" not in graph["schema"] and "rows" not in graph["schema"]
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for n in sorted(graph[m]):
            assert state.get(n) != 1, f"import cycle: {' -> '.join(stack + [m, n])}"
            if n not in state:
                visit(n, stack + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_records_never_imports_verl():
    for p in PKG.glob("*.py"):
        assert not any(n == "verl" or n.startswith("verl.") for n in _all_imports(p)), p
