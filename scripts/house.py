"""The house in numbers: how big the source is and how many ways it does each job, read from the AST.

    python scripts/house.py            # a table (the same bytes for the same tree)
    python scripts/house.py --json     # the same numbers as JSON
    python scripts/house.py --root DIR # another checkout (DIR holds src/devenus and tests)

What each number counts (``src`` = every ``*.py`` under ``src/devenus``):

- **src lines**: physical lines of ``src``, blank lines and comments included (``wc -l``).
- **largest file**: the ``src`` file with the most lines.
- **functions over 60 lines**: every ``def`` (methods and nested functions too) longer than 60 lines,
  from its ``def`` line to its last line, decorators left out.
- **registries**: the modules that keep a table of named units chosen by name. A module counts once when
  it (a) defines a function or method named ``register`` or ``register_*`` that stores into a dict of its
  own module (``NAME[key] = ...`` with ``NAME`` assigned at module level, or ``self.attr[key] = ...`` /
  ``cls.attr[key] = ...`` with ``attr`` assigned in a class body or a method of the module), or (b)
  builds a module-level dict keyed by the units' names (``{u.name: u for u in ...}``). Writing into
  another package's dict (the adapter registering parts in verl's registries) does not count, nor does a
  ``register*`` function that hands the entry to a :class:`devenus.registry.Registry` (it calls
  ``X.register(...)`` on a name the module binds to ``Registry(...)``): that is the one registry, and a
  dict it fills beside it (a help line, a trainer's path) describes the entry, not a second table.
- **config mechanisms**: the modules that parse YAML themselves (``yaml.load``/``safe_load``/``full_load``,
  ``OmegaConf.load``). ``src/devenus/adapters/verl`` is left out: what it reads there is verl's own
  configuration. So is a parse of a run's record that a tool wrote: a file under Hydra's output folder
  ``.hydra`` (``<run dir>/.hydra/config.yaml``, the composed config Hydra saves in every run), named in
  the path the parse reads. That is reading a trainer's output, not a way to configure anything.
- **launchers**: the functions that start a training process: a ``subprocess`` call (``Popen``, ``run``,
  ``call``, ``check_call``, ``check_output``) or an ``os.exec*``/``os.spawn*`` call in a function whose
  text names ``devenus.train`` or ``verl.trainer.main_ppo``.
- **test files per capability**: ``tests/**/test_*.py`` by the first folder under ``tests/`` (``.`` for
  the files directly in ``tests/``).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from pathlib import Path

LONG_FUNCTION = 60
YAML_PARSERS = {("yaml", "load"), ("yaml", "safe_load"), ("yaml", "full_load"), ("OmegaConf", "load")}
NOT_OUR_CONFIG = "src/devenus/adapters/verl/"
PROCESS_STARTS = {("subprocess", n) for n in ("Popen", "run", "call", "check_call", "check_output")}
TRAINING_ENTRIES = ("devenus.train", "verl.trainer.main_ppo")


def _functions(tree: ast.AST):
    """``(qualified name, node)`` of every function, methods and nested ones included, in source order."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out.append((name, child))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _call_name(node: ast.AST) -> tuple[str, str] | None:
    """``("os", "replace")`` for a call ``os.replace(...)``; None for any other node."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        return node.func.value.id, node.func.attr
    return None


def _own_nodes(fn: ast.AST):
    """The nodes of a function, less those of the functions and classes defined inside it."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _assigned(statements) -> set[str]:
    """The plain names ``statements`` assign (``x = ...``, ``x: T = ...``)."""
    names = set()
    for node in statements:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _class_attrs(tree: ast.Module) -> set[str]:
    """Attributes the module's classes define: names assigned in a class body, and ``self.x``/``cls.x``
    assigned in a method (a registry object that makes its table in ``__init__``)."""
    attrs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            attrs |= _assigned(node.body)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) \
                and node.value.id in ("self", "cls"):
            attrs.add(node.attr)
    return attrs


def _registry_bindings(tree: ast.Module) -> set[str]:
    """The names (``X``) and attributes (``self.x``/``cls.x``: ``x``) the module binds to ``Registry(...)``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "Registry":
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Name):
                    out.add(t.id)
                elif isinstance(t, ast.Attribute):
                    out.add(t.attr)
    return out


def _registers_on_the_registry(fn: ast.AST, bindings: set[str]) -> bool:
    """Whether ``fn`` hands its entry to a :class:`devenus.registry.Registry` the module binds."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register":
            target = node.func.value
            if (isinstance(target, ast.Name) and target.id in bindings) or (
                    isinstance(target, ast.Attribute) and target.attr in bindings):
                return True
    return False


def _registry_reasons(tree: ast.Module) -> list[tuple[int, str]]:
    """Why a module is a registry (rule (a) or (b) of the module docstring); empty when it is not."""
    reasons = []
    own, attrs, bindings = _assigned(tree.body), _class_attrs(tree), _registry_bindings(tree)
    for name, fn in _functions(tree):
        if fn.name != "register" and not fn.name.startswith("register_"):
            continue
        if _registers_on_the_registry(fn, bindings):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                table = node.value
                if (isinstance(table, ast.Name) and table.id in own) or (
                        isinstance(table, ast.Attribute) and isinstance(table.value, ast.Name)
                        and table.value.id in ("cls", "self") and table.attr in attrs):
                    reasons.append((fn.lineno, f"{name} -> {ast.unparse(table)}"))
                    break
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.DictComp) and isinstance(value.key, ast.Attribute) and value.key.attr == "name":
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            reasons.append((node.lineno, f"{ast.unparse(target)} = {{{ast.unparse(value.key)}: ...}}"))
    return reasons


def _reads_a_run_record(fn: ast.AST, call: ast.Call) -> bool:
    """Whether the YAML parse ``call`` in ``fn`` reads a file under Hydra's output folder ``.hydra``: the
    parse's argument, or the expression ``fn`` assigns to it, names ``.hydra`` as a path part."""
    if not call.args:
        return False
    source = call.args[0]
    exprs = [source]
    if isinstance(source, ast.Name):
        exprs += [n.value for n in _own_nodes(fn) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == source.id for t in n.targets)]
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and ".hydra" in n.value.split("/")
               for e in exprs for n in ast.walk(e))


def _yaml_parses(tree: ast.Module) -> list[int]:
    """The lines of the module's YAML parses that are not reads of a run's record (module docstring); each
    node is seen once, in the scope (module, class, function) that holds it."""
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return sorted({node.lineno for scope in scopes for node in _own_nodes(scope)
                   if _call_name(node) in YAML_PARSERS and not _reads_a_run_record(scope, node)})


def _starts_a_process(node: ast.AST) -> bool:
    name = _call_name(node)
    return name in PROCESS_STARTS or (name is not None and name[0] == "os" and name[1].startswith(("exec", "spawn")))


def _launchers(tree: ast.Module) -> list[tuple[int, str]]:
    out = []
    for name, fn in _functions(tree):
        nodes = list(_own_nodes(fn))
        if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and any(e in n.value for e in TRAINING_ENTRIES)
               for n in nodes):
            calls = sorted(n.lineno for n in nodes if _starts_a_process(n))
            if calls:
                out.append((fn.lineno, f"{name} (starts a process at line {', '.join(map(str, calls))})"))
    return out


def measure(root: Path) -> dict:
    """The numbers of the checkout at ``root``, as the module docstring defines them."""
    src = sorted((root / "src" / "devenus").rglob("*.py"))
    lines, long_functions, registries, mechanisms, launchers = {}, [], [], [], []
    for path in src:
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        lines[rel] = len(text.splitlines())
        tree = ast.parse(text, rel)
        for name, fn in _functions(tree):
            n = fn.end_lineno - fn.lineno + 1
            if n > LONG_FUNCTION:
                long_functions.append({"path": rel, "line": fn.lineno, "name": name, "lines": n})
        registries += [{"path": rel, "line": line, "what": what} for line, what in _registry_reasons(tree)[:1]]
        if not rel.startswith(NOT_OUR_CONFIG):
            parses = _yaml_parses(tree)
            if parses:
                mechanisms.append({"path": rel, "line": parses[0], "what": "parses YAML"})
        launchers += [{"path": rel, "line": line, "what": what} for line, what in _launchers(tree)]
    largest = max(lines, key=lambda p: (lines[p], p))
    long_functions.sort(key=lambda f: (-f["lines"], f["path"], f["line"]))
    tests = Counter(p.relative_to(root / "tests").parts[0] if len(p.relative_to(root / "tests").parts) > 1 else "."
                    for p in (root / "tests").rglob("test_*.py"))
    return {
        "src_lines": sum(lines.values()),
        "src_files": len(lines),
        "largest_file": {"path": largest, "lines": lines[largest]},
        "functions_over_60_lines": {"count": len(long_functions), "items": long_functions},
        "registries": {"count": len(registries), "items": registries},
        "config_mechanisms": {"count": len(mechanisms), "items": mechanisms},
        "launchers": {"count": len(launchers), "items": launchers},
        "test_files_per_capability": dict(sorted(tests.items())),
    }


def table(m: dict) -> str:
    out = [f"src lines                 {m['src_lines']:>7,}  ({m['src_files']} files under src/devenus)",
           f"largest file              {m['largest_file']['lines']:>7,}  {m['largest_file']['path']}",
           f"functions over {LONG_FUNCTION} lines   {m['functions_over_60_lines']['count']:>7}"]
    out += [f"  {f['lines']:>4}  {f['path']}:{f['line']} {f['name']}" for f in m["functions_over_60_lines"]["items"]]
    for key, title in (("registries", "registries"), ("config_mechanisms", "config mechanisms"),
                       ("launchers", "launchers")):
        out.append(f"{title:<26}{m[key]['count']:>7}")
        out += [f"  {i['path']}:{i['line']} {i['what']}" for i in m[key]["items"]]
    tests = m["test_files_per_capability"]
    out.append(f"test files per capability {sum(tests.values()):>7}  (tests/<folder>/**/test_*.py)")
    out += [f"  {n:>4}  {folder}" for folder, n in tests.items()]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="the checkout to measure")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = ap.parse_args(argv)
    if not (args.root / "src" / "devenus").is_dir():
        print(f"error: {args.root} has no src/devenus", file=sys.stderr)
        return 1
    m = measure(args.root)
    print(json.dumps(m, indent=1) if args.json else table(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
