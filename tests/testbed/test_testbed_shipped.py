"""The shipped base weights: their recorded hash, the checked install on a fresh cache (no SFT run), the
refusals of a corrupted or mismatched file, and (slow) that the SFT recipe still gives a model close to them."""

import fnmatch
import hashlib
import json
import shutil
import time
import tomllib
from pathlib import Path

import pytest

from devenus.testbed import TestbedConfig, build_testbed
from devenus.testbed import build as build_mod
from devenus.testbed import shipped

ROOT = Path(__file__).resolve().parents[2]
KEY = TestbedConfig().key()
HASH = shipped.SHIPPED_BASE_MODELS.get(KEY)


def _no_sft(*a, **k):
    pytest.fail("trained SFT although the key has shipped weights")


def _one_line_naming(err: pytest.ExceptionInfo, *hashes: str) -> None:
    msg = str(err.value)
    assert "\n" not in msg, msg
    for h in hashes:
        assert h in msg, (h, msg)


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the tensor data: the header still parses
    path.write_bytes(bytes(data))


def test_default_config_has_shipped_weights_with_the_recorded_hash():
    assert HASH == "28a1c599b142fd02"  # the weights behind the README demo and most committed results
    d = shipped.shipped_dir(KEY)
    assert d.name == f"base-{HASH}"
    assert shipped.model_hash(d) == HASH == shipped.build_record(KEY)["base_model"]
    weights = d / "model.safetensors"
    assert weights.stat().st_size < 8 * 2**20  # kept small in git
    # the digest is the one experiment results record as `base_model`: sha256 over (name, bytes), 16 hex
    assert hashlib.sha256(b"model.safetensors" + weights.read_bytes()).hexdigest()[:16] == HASH


def test_every_shipped_weight_file_is_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["devenus"]
    pkg = ROOT / "src" / "devenus"
    files = [p.relative_to(pkg).as_posix() for p in shipped.WEIGHTS_DIR.rglob("*") if p.is_file()]
    assert len(files) >= 6  # weights, config, generation config, tokenizer (3 files), build record
    missing = [f for f in files if not any(fnmatch.fnmatchcase(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert missing == [], f"add these to [tool.setuptools.package-data] in pyproject.toml: {missing}"


def test_questions_are_those_the_shipped_weights_were_trained_on():
    """The splits and SFT corpus are generated, not shipped: they must be the ones of the weights' build."""
    assert shipped.questions_digest(build_mod.question_sets(TestbedConfig())) == shipped.build_record(KEY)["questions_digest"]
    assert shipped.questions_digest(build_mod.question_sets(TestbedConfig(seed=1))) != shipped.build_record(KEY)["questions_digest"]


def test_fresh_cache_installs_the_shipped_weights_without_sft(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVENUS_CACHE", str(tmp_path))
    monkeypatch.setattr(build_mod, "_train_base", _no_sft)
    t0 = time.perf_counter()
    tb = build_testbed(log=lambda s: None)
    took = time.perf_counter() - t0
    assert tb.root == tmp_path / "testbed" / f"tb-{KEY}"
    assert shipped.model_hash(tb.model_dir) == HASH
    src = shipped.shipped_dir(KEY)
    for f in src.iterdir():  # the model folder is the shipped one, byte for byte (its build record aside)
        if f.name != "build.json":
            assert (tb.model_dir / f.name).read_bytes() == f.read_bytes(), f.name
    rep = tb.report
    assert rep["base_model"]["source"] == "shipped" and rep["base_model"]["hash"] == HASH
    assert rep["sft"]["chosen_step"] == shipped.build_record(KEY)["sft"]["chosen_step"]
    assert all(tb.split(s).exists() for s in build_mod.SPLIT_FILES)
    assert took < 60, f"installing the shipped weights took {took:.1f} s"  # ~2-5 s here; SFT takes ~4 min
    # resolving it again checks the hash and returns the cache
    monkeypatch.setattr(build_mod, "_build_into", lambda *a, **k: pytest.fail("rebuilt a cached testbed"))
    assert build_testbed(log=lambda s: None).root == tb.root


@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
    """A private copy of the shipped weights folder, installed in place of the package's."""
    d = tmp_path / "weights"
    shutil.copytree(shipped.WEIGHTS_DIR, d)
    monkeypatch.setattr(shipped, "WEIGHTS_DIR", d)
    return d / f"base-{HASH}"


def test_corrupted_shipped_file_is_refused_in_one_line(tmp_path, shipped_copy, monkeypatch):
    monkeypatch.setattr(build_mod, "_train_base", _no_sft)
    _flip_a_byte(shipped_copy / "model.safetensors")
    bad = shipped.model_hash(shipped_copy)
    cache = tmp_path / "cache"
    with pytest.raises(ValueError) as err:
        build_testbed(cache_dir=cache, log=lambda s: None)
    _one_line_naming(err, bad, HASH)
    assert [p.name for p in (cache / "testbed").iterdir() if not p.name.startswith(".lock")] == []  # nothing half-built


def test_changed_generators_are_refused(tmp_path, shipped_copy, monkeypatch):
    monkeypatch.setattr(build_mod, "_train_base", _no_sft)
    rec = json.loads((shipped_copy / "build.json").read_text())
    (shipped_copy / "build.json").write_text(json.dumps(rec | {"questions_digest": "0" * 16}))
    with pytest.raises(ValueError, match="BUILD_VERSION") as err:
        build_testbed(cache_dir=tmp_path / "cache", log=lambda s: None)
    _one_line_naming(err, "0" * 16, rec["questions_digest"])


def test_cached_testbed_with_other_weights_is_refused_then_reinstalled(tmp_path, monkeypatch):
    """A cache SFT-trained on another CPU before the weights shipped holds the same key with other weights."""
    monkeypatch.setattr(build_mod, "_train_base", _no_sft)
    tb = build_testbed(cache_dir=tmp_path, log=lambda s: None)
    _flip_a_byte(tb.model_dir / "model.safetensors")
    other = shipped.model_hash(tb.model_dir)
    with pytest.raises(ValueError) as err:
        build_testbed(cache_dir=tmp_path, log=lambda s: None)
    _one_line_naming(err, other, HASH)
    assert "--force" in str(err.value)
    assert shipped.model_hash(build_testbed(cache_dir=tmp_path, force=True, log=lambda s: None).model_dir) == HASH


def test_cli_testbed_build_installs_and_rebuild_is_its_own_flag(tmp_path, monkeypatch, capsys):
    from devenus.cli import build_parser, main

    monkeypatch.setattr(build_mod, "_train_base", _no_sft)
    assert main(["testbed", "build", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"(shipped, hash {HASH})" in out
    args = build_parser().parse_args(["testbed", "build", "--rebuild"])
    assert args.rebuild and not args.force


def test_recipe_gap_applies_the_tolerance():
    rec = shipped.build_record(KEY)
    ref = rec["base_accuracy"]["ID"]["sampled"]["mean"]

    def report(id_acc, h):
        return {"base_accuracy": {"ID": {"sampled": {"mean": id_acc}}}, "base_model": {"hash": h}, "sft": {"chosen_step": 180}}

    same = shipped.recipe_gap(report(ref, HASH), KEY)
    assert same["same_weights"] and same["within_tolerance"] and same["id_diff"] == 0
    near = shipped.recipe_gap(report(ref - shipped.RECIPE_TOLERANCE_ID + 0.01, "f" * 16), KEY)
    assert not near["same_weights"] and near["within_tolerance"]
    assert not shipped.recipe_gap(report(0.0, "f" * 16), KEY)["within_tolerance"]  # a recipe that stopped learning
    assert "OUTSIDE" in shipped.describe_gap(shipped.recipe_gap(report(0.9, "f" * 16), KEY))


@pytest.mark.slow
def test_recipe_tokenizer_is_the_shipped_one():
    """The tokenizer is shipped with the weights (their token ids); the recipe must still build the same."""
    from transformers import AutoTokenizer

    from devenus.testbed import tasks
    from devenus.testbed.tokenizer import build_tokenizer

    cfg = TestbedConfig()
    qs = build_mod.question_sets(cfg)
    corpus = [q.text(v) + "\n" + q.solution(v) for q in qs["sft"] for v in tasks.VIEWS]
    built = build_tokenizer(corpus + ["<|im_start|>user\n", "<|im_start|>assistant\n"], cfg.vocab_size)
    ship = AutoTokenizer.from_pretrained(shipped.shipped_dir(KEY))
    assert built.get_vocab() == ship.get_vocab()
    sample = corpus[:200] + [q.text() for q in qs["test_ood"]]
    assert [built.encode(t) for t in sample] == [ship.encode(t) for t in sample]


@pytest.mark.slow
def test_installed_weights_measure_as_their_build_recorded(base_testbed):
    """The build record's held-out ID accuracy, re-measured on the installed model (256 questions x 4).
    On a CPU like the build's it is the same number; elsewhere only sampling's float rounding may move it."""
    from devenus.testbed.evaluate import accuracy

    assert shipped.model_hash(base_testbed.model_dir) == HASH
    cfg = base_testbed.config
    qs = build_mod.question_sets(cfg)["test_id"]
    model, tok = base_testbed.load_model()
    got = accuracy(model, tok, [q.text() for q in qs], [q.answer for q in qs], cfg.report_samples, 1.0,
                   cfg.max_new_tokens, seed=cfg.seed + 1).mean
    assert abs(got - shipped.build_record(KEY)["base_accuracy"]["ID"]["sampled"]["mean"]) <= 0.05


@pytest.mark.slow
@pytest.mark.extended
def test_rebuild_recipe_gives_a_model_within_tolerance_of_the_shipped_one(tmp_path):
    """`devenus testbed build --rebuild`: SFT from scratch (190 s here, the shipped hash exactly), into its own folder."""
    tb = build_testbed(cache_dir=tmp_path, rebuild=True, log=lambda s: None)
    assert tb.root.name == f"rebuild-{KEY}" and not (tmp_path / "testbed" / f"tb-{KEY}").exists()
    rep = tb.report
    assert rep["base_model"]["source"] == "sft"
    cfg = tb.config.sft
    assert cfg.lo <= rep["sft"]["dev_acc"] <= cfg.hi  # the stopping rule found a snapshot in its window
    gap = shipped.recipe_gap(rep, KEY)
    print(shipped.describe_gap(gap))
    assert gap["within_tolerance"], shipped.describe_gap(gap)
