"""The house rules of the import graph (architecture.md, "Target layout"), checked on the source's AST.

Imports are resolved as Python resolves them: absolute and relative (``from .x import y``, ``from .. import
z``), at module level and inside functions. Only imports under ``if TYPE_CHECKING:`` are left out (they
never run)."""

import ast
from functools import lru_cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "devenus"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def _imports(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """(module-level, function-level) imported names of ``path``, absolute: ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a.b`` (``b`` may be a module or a name in ``a``; the graph below tells them
    apart), ``from a import *`` gives ``a``."""
    me = module_name(path)
    package = me if path.stem == "__init__" else me.rpartition(".")[0]
    top, local = set(), set()

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            out = local if inside else top
            if isinstance(child, ast.Import):
                out |= {a.name for a in child.names}
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - (child.level - 1)]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module
                out |= {module if a.name == "*" else f"{module}.{a.name}" for a in child.names}
            visit(child, inside)

    visit(ast.parse(path.read_text(), str(path)), False)
    return frozenset(top), frozenset(local)


def imports(path: Path) -> set[str]:
    """Every name ``path`` imports, module-level and function-level."""
    top, local = _imports(path)
    return set(top | local)


def modules(under: str = "") -> list[Path]:
    return sorted((SRC / under).rglob("*.py"))


def rel(p: Path) -> str:
    return str(p.relative_to(SRC.parent))


def under(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_relative_imports_are_resolved():
    # the checks below are only as good as this: a relative import must count like its absolute spelling
    cpu_init = SRC / "adapters" / "verl" / "cpu" / "__init__.py"
    assert "devenus.adapters.verl.cpu.platform.install" in imports(cpu_init)
    hf_rollout = SRC / "adapters" / "verl" / "cpu" / "hf_rollout.py"
    assert "devenus.adapters.verl.cpu.shims.pin_torch_threads" in imports(hf_rollout)
    records_init = SRC / "records" / "__init__.py"
    assert "devenus.records.io.normalize_rows" in _imports(records_init)[0]


# ------------------------------------------------------------------------------ no cycles
def import_graph(function_level: bool) -> dict[str, set[str]]:
    """module -> the package's modules it imports: ``from a import b`` is an arrow to the module ``a.b`` when
    there is one, else to ``a`` (the parent packages Python initialises on the way are no arrow of the
    importer's: every submodule's import would close a cycle with its package's ``__init__``)."""
    paths = {module_name(p): p for p in modules()}

    def owner(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for me, p in paths.items():
        top, local = _imports(p)
        names = top | local if function_level else top
        graph[me] = {m for m in map(owner, names) if m and m != me}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph(function_level=False)) == []


def test_no_import_cycle_even_through_function_level_imports():
    # architecture.md: "no import cycles, function-local imports included": a local import that closes a
    # cycle only postpones it to the call
    assert cycles(import_graph(function_level=True)) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# ------------------------------------------------------------------------------ verl
#: modules outside devenus/adapters/verl/ that may import verl, each with its reason
VERL_EXCEPTIONS: dict[str, str] = {}


def test_only_the_verl_adapter_imports_verl():
    offenders = [rel(p) for p in modules() if not rel(p).startswith("devenus/adapters/verl/")
                 and rel(p) not in VERL_EXCEPTIONS and any(under(m, "verl") for m in imports(p))]
    assert offenders == []


#: what sits below the adapter on the data path (adapters -> online -> signals/records/verify) and the
#: offline modules, which reach verl through a process (``python -m devenus.train``), never by import.
#: Above it, the entry point (train.py), recipes, experiments and lifecycle drive it and may import it.
BELOW_THE_ADAPTER = ("devenus.online", "devenus.signals", "devenus.records", "devenus.verify", "devenus.config",
                     "devenus.select", "devenus.transitions", "devenus.runs", "devenus.testbed",
                     "devenus.generate")


@pytest.mark.parametrize("package", BELOW_THE_ADAPTER)
def test_what_sits_below_the_adapter_never_imports_it(package):
    offenders = [(rel(p), m) for p in modules(package.removeprefix("devenus.")) for m in imports(p)
                 if under(m, "devenus.adapters")]
    assert offenders == []


def test_evaluate_imports_the_adapter_only_where_the_reason_is_written():
    # evaluate reads validation dumps and runs its own backends; only merging an FSDP checkpoint into an HF
    # folder is verl's code (its model merger), imported where a checkpoint is given, the reason beside it
    seen = 0
    for p in modules("evaluate"):
        lines = p.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.ImportFrom) and node.module and under(node.module, "devenus.adapters"):
                assert "#" in lines[node.lineno - 1], f"{rel(p)}:{node.lineno} imports the adapter without its reason"
                seen += 1
    assert seen <= 1, "evaluate imports the adapter in more places than the one documented"


# ------------------------------------------------------------------------------ methods
#: the method packages (architecture.md's target layout): module 1 (select), module 2 (online/supervise),
#: module 3 online (online/refine) and offline (transitions). The adapter calls the typed hooks on
#: OnlineMethod and finds a method through the registry; it never imports one.
METHOD_PACKAGES = ("devenus.online.supervise", "devenus.online.refine", "devenus.select", "devenus.transitions")
#: the layers above the adapter: they drive it (through a process or its entry point), it never imports them
ABOVE_THE_ADAPTER = ("devenus.evaluate", "devenus.lifecycle", "devenus.experiments", "devenus.recipes", "devenus.cli")


@pytest.mark.parametrize("package", METHOD_PACKAGES + ABOVE_THE_ADAPTER)
def test_the_adapter_never_imports_a_method_package(package):
    assert (SRC.parent / package.replace(".", "/")).with_suffix(".py").exists() or \
        (SRC.parent / package.replace(".", "/")).is_dir(), f"{package} is not in the layout any more"
    offenders = [(rel(p), m) for p in modules("adapters") for m in imports(p) if under(m, package)]
    assert offenders == []


ONLINE_METHODS = ("supervise", "refine")


@pytest.mark.parametrize("package", ONLINE_METHODS)
def test_a_method_never_imports_another_method(package):
    folder = SRC / "online" / package
    from devenus.online import WeakTrainerInterface

    method_modules = {spec.method_cls.__module__ for spec in map(WeakTrainerInterface.get, WeakTrainerInterface.names())}
    offenders = []
    for p in sorted(folder.glob("*.py")):
        own = module_name(p)
        if p.stem == "__init__":
            continue
        offenders += [(own, m) for m in imports(p) if m in method_modules and m != own]
    assert offenders == []


def test_shared_math_lives_below_the_methods():
    # signals/, verify/ and records/ sit at the bottom of the data path: they import no method, no adapter
    for below in ("signals", "verify", "records"):
        for p in modules(below):
            bad = [m for m in imports(p) if under(m, "devenus.online", "devenus.adapters", "devenus.select",
                                                   "devenus.transitions")]
            assert bad == [], rel(p)


# ------------------------------------------------------------------------------ renames
#: the one module that renames files: the atomic writer (a temporary file renamed over its target). Any other
#: module that needs a file in place writes it through that module. ``path -> why`` for each exception.
RENAMERS = {"devenus/atomic.py": "the atomic writer"}
RENAME_CALLS = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move")}


def renames(tree: ast.AST) -> list[int]:
    """Lines of ``os.replace/rename/renames``, ``shutil.move`` and ``<path>.replace(x)``/``<path>.rename(x)`` calls
    (one positional argument and no keyword: not ``str.replace(a, b)`` nor ``dataclasses.replace(obj, k=v)``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
            if (owner, node.func.attr) in RENAME_CALLS or (
                    node.func.attr in ("replace", "rename") and owner not in ("os", "shutil", "dataclasses")
                    and len(node.args) == 1 and not node.keywords):
                found.append(node.lineno)
    return found


def test_the_rename_finder_finds_each_form():
    code = ("os.replace(a, b); os.rename(a, b); shutil.move(a, b); Path(a).replace(b); tmp.rename(b)\n"
            "s.replace('a', 'b'); dataclasses.replace(cfg, x=1); df.rename(columns={}); os.path.join(a, b)\n")
    assert renames(ast.parse(code)) == [1] * 5


def test_nothing_outside_the_bottom_io_module_renames_a_file():
    for p in RENAMERS:  # an exception that no longer renames is stale
        assert renames(ast.parse((SRC.parent / p).read_text())), f"{p} renames nothing: drop it from RENAMERS"
    offenders = [f"{rel(p)}:{line}" for p in modules() if rel(p) not in RENAMERS
                 for line in renames(ast.parse(p.read_text()))]
    assert offenders == []


def test_the_atomic_writer_is_at_the_bottom():
    # every package writes files through devenus.atomic: it imports no devenus module
    assert [m for m in imports(SRC / "atomic.py") if under(m, "devenus")] == []


def test_the_registry_helper_is_at_the_bottom():
    # every package registers its units on devenus.registry: it imports no devenus module
    assert [m for m in imports(SRC / "registry.py") if under(m, "devenus")] == []


# ------------------------------------------------------------------------------ sampling
#: the one package that samples tokens (docs/generate.md): its seeded per-row sampler is the only sampler
SAMPLERS = "devenus/generate/"
#: keywords of HF's ``model.generate`` (our backends' ``generate(prompts, keys, n, sampling)`` takes none)
HF_GENERATE_KEYWORDS = {"max_new_tokens", "do_sample", "generation_config", "logits_processor"}
SAMPLING_IMPORTS = {"transformers.GenerationConfig", "transformers.LogitsProcessor", "transformers.LogitsProcessorList"}


def samples_tokens(tree: ast.AST) -> list[int]:
    """Lines that sample tokens: ``.multinomial(...)``, anything named ``*gumbel*``, HF's ``model.generate(...)``
    (a ``.generate`` call with one of its keywords) and imports of its generation config or logits processors."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "multinomial" or (node.func.attr == "generate" and any(
                    k.arg in HF_GENERATE_KEYWORDS for k in node.keywords))):
            found.append(node.lineno)
        elif isinstance(node, (ast.Name, ast.Attribute, ast.FunctionDef, ast.ClassDef)):
            name = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", "")
            if "gumbel" in name.lower():
                found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "transformers" and any(
                f"transformers.{a.name}" in SAMPLING_IMPORTS for a in node.names):
            found.append(node.lineno)
    return sorted(set(found))


def test_the_sampling_finder_finds_each_form():
    code = ("torch.multinomial(p, 1); model.generate(ids, max_new_tokens=4); m.generate(**enc, do_sample=True)\n"
            "class SeededGumbelSampler: pass\nfrom transformers import LogitsProcessorList\n"
            "backend.generate(prompts, keys, n, sampling); tasks.generate('add', 3)\n")
    assert samples_tokens(ast.parse(code)) == [1, 2, 3]


def test_only_the_generation_package_samples():
    assert samples_tokens(ast.parse((SRC / "generate" / "sampler.py").read_text()))  # the finder sees the sampler
    offenders = [f"{rel(p)}:{line}" for p in modules() if not rel(p).startswith(SAMPLERS)
                 for line in samples_tokens(ast.parse(p.read_text()))]
    assert offenders == []
