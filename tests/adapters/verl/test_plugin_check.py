"""A devenus verl plugin that does not load is an error before Ray starts, not verl's debug log line.
Each case runs in a fresh interpreter: ``import verl`` loads plugins once per process."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("verl")

PROBE = """
import sys
{prelude}
from devenus.adapters.verl.cluster_rules import plugin_problem
print("PROBLEM:", plugin_problem())
"""

# a finder that makes one of the plugin's own imports fail, as a broken install would
BREAK_TOKEN_STATS = """
import importlib.abc
class _Broken(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "devenus.adapters.verl.token_stats":
            raise ImportError("simulated: the engine extension cannot import")
sys.meta_path.insert(0, _Broken())
"""


def _probe(prelude: str = "", drop: tuple[str, ...] = (), **env) -> str:
    environ = {k: v for k, v in {**os.environ, **env}.items() if k not in drop}
    out = subprocess.run([sys.executable, "-c", PROBE.format(prelude=prelude)], capture_output=True, text=True,
                         env=environ, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return [ln for ln in out.stdout.splitlines() if ln.startswith("PROBLEM:")][-1].removeprefix("PROBLEM: ")


def test_the_installed_plugin_loads_with_verl():
    assert _probe() == "None"


def test_a_plugin_that_fails_to_import_is_named_with_its_error():
    assert _probe(BREAK_TOKEN_STATS) == ("devenus's verl plugin devenus.adapters.verl.plugin failed to import: "
                                         "ImportError: simulated: the engine extension cannot import")


def test_a_plugin_policy_that_skips_devenus_is_an_error():
    # without the plugins the CPU platform is not registered: verl's default platform, as on a GPU node
    got = _probe(VERL_USE_EXTERNAL_PLUGINS="none", VERL_USE_EXTERNAL_MODULES="", drop=("VERL_PLATFORM",))
    assert got.startswith("VERL_USE_EXTERNAL_PLUGINS=none skips devenus's verl plugin")


def test_importing_verl_quietly_hides_only_the_optional_engines_warnings():
    code = ("import warnings; warnings.simplefilter('always')\n"
            "from devenus.adapters.verl.cluster_rules import import_verl_quietly; import_verl_quietly()\n"
            "warnings.warn('megatron engine is not available: after the import, still shown', UserWarning)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "torchtitan engine is not available" not in out.stderr
    assert "veomni engine is not available" not in out.stderr
    assert "after the import, still shown" in out.stderr  # the filter is scoped to verl's import
