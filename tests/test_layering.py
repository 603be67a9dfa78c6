"""The house rules of the import graph (architecture.md, "Target layout"), checked on the source's AST."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "devenus"


def imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def modules(under: str = "") -> list[Path]:
    return sorted((SRC / under).rglob("*.py"))


def rel(p: Path) -> str:
    return str(p.relative_to(SRC.parent))


def test_only_the_verl_adapter_imports_verl():
    offenders = [rel(p) for p in modules() if not rel(p).startswith("devenus/adapters/verl/")
                 and any(m == "verl" or m.startswith("verl.") for m in imports(p))]
    assert offenders == []


def test_the_adapter_never_imports_a_particular_method():
    offenders = [(rel(p), m) for p in modules("adapters") for m in imports(p) if m.startswith("devenus.online.supervise")]
    assert offenders == []


METHOD_PACKAGES = ("supervise", "refine")


@pytest.mark.parametrize("package", METHOD_PACKAGES)
def test_a_method_never_imports_another_method(package):
    folder = SRC / "online" / package
    if not folder.exists():
        pytest.skip(f"online/{package} does not exist yet")
    from devenus.online import WeakTrainerInterface

    method_modules = {spec.method_cls.__module__ for spec in map(WeakTrainerInterface.get, WeakTrainerInterface.names())}
    offenders = []
    for p in sorted(folder.glob("*.py")):
        own = f"devenus.online.{package}.{p.stem}"
        if p.stem == "__init__":
            continue
        offenders += [(own, m) for m in imports(p) if m in method_modules and m != own]
    assert offenders == []


def test_shared_math_lives_below_the_methods():
    # signals/, verify/ and records/ sit at the bottom of the data path: they import no method, no adapter
    for under in ("signals", "verify", "records"):
        for p in modules(under):
            bad = [m for m in imports(p) if m.startswith(("devenus.online", "devenus.adapters", "devenus.select",
                                                          "devenus.transitions"))]
            assert bad == [], rel(p)
