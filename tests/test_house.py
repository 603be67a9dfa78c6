"""scripts/house.py: its numbers on this tree have the right shape, and each count finds what its rule says
on a small tree made here (the values of this tree are not pinned: they are meant to change)."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"src_lines", "src_files", "largest_file", "functions_over_60_lines", "registries", "config_mechanisms",
        "launchers", "test_files_per_capability"}


def house(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "house.py"), *args], capture_output=True, text=True,
                          timeout=120)


def test_the_numbers_of_this_tree():
    r = house("--json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert set(m) == KEYS
    for key in ("src_lines", "src_files"):
        assert type(m[key]) is int and m[key] > 0, key
    assert (ROOT / m["largest_file"]["path"]).is_file() and type(m["largest_file"]["lines"]) is int
    assert m["largest_file"]["lines"] > 0
    for key in ("functions_over_60_lines", "registries", "config_mechanisms", "launchers"):
        assert type(m[key]["count"]) is int and m[key]["count"] == len(m[key]["items"]), key
        assert all((ROOT / i["path"]).is_file() and type(i["line"]) is int and i["line"] > 0 for i in m[key]["items"])
    for key in ("registries", "config_mechanisms", "launchers"):
        assert m[key]["count"] > 0, key  # at least the one the house is meant to have
    caps = m["test_files_per_capability"]
    assert caps and all(type(n) is int and n > 0 for n in caps.values()) and "." in caps
    table = house()
    assert table.returncode == 0 and table.stdout == house().stdout  # the same bytes for the same tree
    assert f"{m['largest_file']['lines']:,}  {m['largest_file']['path']}" in table.stdout


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))


def test_each_count_follows_its_rule(tmp_path):
    pkg = "src/devenus/"
    _write(tmp_path, pkg + "a.py", """\
        _UNITS = {}
        def register(cls):
            _UNITS[cls.name] = cls
            return cls
        """)
    _write(tmp_path, pkg + "b.py", """\
        class Reg:
            _specs: dict = {}
            @classmethod
            def register(cls, m):
                def deco(mc):
                    cls._specs[mc.name] = mc
                return deco(m)
        """)
    _write(tmp_path, pkg + "c.py", "TABLE = {u.name: u for u in ()}\n")
    _write(tmp_path, pkg + "d.py", """\
        class Registry:
            def __init__(self):
                self._items = {}
            def register(self, name, unit):
                self._items[name] = unit
        ROUTERS = Registry()
        """)
    # not registries: a dict of another module written by a register hook, a dict filled outside register_*
    _write(tmp_path, pkg + "adapters/verl/hook.py", """\
        import other
        LOCAL = {}
        def register_hf():
            other._REGISTRY["hf"] = 1
        def fill():
            LOCAL["x"] = 1
        """)
    # not a registry: a register_* that hands its entry to the one Registry, a help line kept beside it
    _write(tmp_path, pkg + "sources.py", """\
        from devenus.registry import Registry
        POOLS = Registry("pool")
        _HELP = {}
        def register_pool(name, build, help=""):
            POOLS.register(name, build)
            _HELP[name] = help
        """)
    _write(tmp_path, pkg + "config/__init__.py", "import yaml\ndef load(t):\n    return yaml.safe_load(t)\n")
    # reading Hydra's record of a run (its .hydra folder) is reading an output; any other YAML file is a config
    _write(tmp_path, pkg + "runner.py", """\
        from pathlib import Path
        from omegaconf import OmegaConf
        def trainer_config(run_dir):
            path = Path(run_dir) / "hydra" / ".hydra" / "config.yaml"
            return OmegaConf.load(path)
        def hydra_overrides(run_dir):
            return OmegaConf.load(f"{run_dir}/.hydra/overrides.yaml")
        """)
    _write(tmp_path, pkg + "arms.py", """\
        from pathlib import Path
        import yaml
        def arm(folder):
            path = Path(folder) / "hydra_arm.yaml"
            return yaml.safe_load(path.read_text())
        """)
    _write(tmp_path, pkg + "adapters/verl/votes.py", "from omegaconf import OmegaConf\nx = OmegaConf.load('v.yaml')\n")
    _write(tmp_path, pkg + "runs/launch.py", """\
        import subprocess, sys
        def launch(entry=("-m", "devenus.train")):
            return subprocess.Popen([sys.executable, *entry])
        def verify_worker():
            return subprocess.Popen([sys.executable, "-c", "pass"])
        def outer():
            def inner():
                return subprocess.run([sys.executable, "-m", "verl.trainer.main_ppo"])
            return inner
        """)
    _write(tmp_path, pkg + "long.py", "def f():\n" + "    x = 1\n" * 60 + "\ndef g():\n" + "    x = 1\n" * 59)
    for rel in ("tests/test_top.py", "tests/select/test_a.py", "tests/select/deep/test_b.py", "tests/select/helper.py"):
        _write(tmp_path, rel, "")
    r = house("--json", "--root", str(tmp_path))
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert [(i["path"].removeprefix(pkg), i["line"]) for i in m["registries"]["items"]] == [
        ("a.py", 2), ("b.py", 4), ("c.py", 1), ("d.py", 4)]
    assert [i["path"] for i in m["config_mechanisms"]["items"]] == [pkg + "arms.py", pkg + "config/__init__.py"]
    assert [(i["line"], i["what"]) for i in m["launchers"]["items"]] == [
        (2, "launch (starts a process at line 3)"), (7, "outer.inner (starts a process at line 8)")]
    assert [(f["name"], f["lines"]) for f in m["functions_over_60_lines"]["items"]] == [("f", 61)]
    assert m["largest_file"] == {"path": pkg + "long.py", "lines": 122}
    assert m["test_files_per_capability"] == {".": 1, "select": 2}
    assert house("--root", str(tmp_path / "nowhere")).stderr.startswith("error: ")
