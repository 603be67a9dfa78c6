"""Every YAML the package ships is in its package data (else only an editable install finds it)."""

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_shipped_yaml_is_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["devenus"]
    pkg = ROOT / "src" / "devenus"
    shipped = [p.relative_to(pkg).as_posix() for p in pkg.rglob("*.yaml")]
    assert shipped
    missing = [f for f in shipped if not any(fnmatch.fnmatchcase(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert missing == [], f"add these to [tool.setuptools.package-data] in pyproject.toml: {missing}"
