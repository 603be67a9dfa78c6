"""Training pools for experiments: a seeded random draw, or one whose base pass rates spread around 0.5.

:func:`pool_train_file` draws ``size`` questions of the testbed's train split per seed.

A pool drawn at random from the testbed's train split is mostly questions the base model always or never
solves (1-digit sums it gets right, 4-digit ones it rarely does): a method has nothing to change on them.
The plans in ``experiments/plans/`` instead draw per seed a pool stratified on the base model's pass rate:

- :func:`pass_rates`: each train (or candidate-pool) question's pass rate over ``n`` samples at T=1 (:mod:`devenus.generate`,
  so it depends only on the weights, the question and the sample seed), computed once per set of weights
  and cached beside the testbed (a few minutes on one core for 2,000 questions x 8 samples).
- :func:`stratify`: the same count per pass-rate bin 1/n .. (n-1)/n where the split allows; bins that run
  short give their quota to the others, and only when the mixed bins cannot fill the pool are questions at
  0 or 1 added (the nearer one first). The pool's histogram is recorded in its dataset version.
- :func:`stratified_train_file`: the ``train_file`` of a definition (its arm's label fraction applied);
  :func:`noisy_train_file`: one with the arm's label noise instead.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

#: samples per question for the pass rates (the plans' "8 samples")
SAMPLES = 8


def pass_rates(tb, n: int = SAMPLES, seed: int = 0, file: Path | None = None) -> dict[str, float]:
    """``extra_info.index`` -> the base model's pass rate over ``n`` samples at T=1, for the train split or
    the testbed records in ``file`` (the candidate pool, :mod:`devenus.testbed.pool`), graded against the
    simulation's truth (``simulation.hidden_answer``: the train split's labels, an unlabeled row's hidden
    answer); cached per (testbed weights, file, n, seed) in the testbed's folder."""
    from devenus.atomic import write_text_atomic
    from devenus.records import read_records

    train = Path(tb.split("train"))
    path = train if file is None else Path(file)
    cache = train.parent.parent / f"pass_rates_{'train' if file is None else path.stem}_n{n}_s{seed}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    import torch

    from devenus.testbed.evaluate import accuracy

    torch.set_num_threads(1)
    rows = read_records(path)
    model, tok = tb.load_model()
    acc = accuracy(model, tok, [r["prompt"][-1]["content"] for r in rows],
                   [r["simulation"]["hidden_answer"] for r in rows], n, 1.0, tb.config.max_new_tokens, seed=seed)
    rates = {r["extra_info"]["index"]: p for r, p in zip(rows, acc.per_question)}
    write_text_atomic(cache, json.dumps(rates, sort_keys=True))
    return rates


def stratify(rows: Sequence[dict], rates: Mapping[str, float], size: int, n: int, rng: random.Random) -> list[dict]:
    """``size`` rows, the same count per mixed pass-rate bin (k/n for k = 1..n-1) where the rows allow;
    then questions at 0 or 1 (the larger of those two bins first) only if the mixed bins run out."""
    if size > len(rows):
        raise ValueError(f"a pool of {size} needs at least that many rows; the split has {len(rows)}")
    bins: dict[int, list[dict]] = {}
    for r in rows:
        bins.setdefault(round(rates[r["extra_info"]["index"]] * n), []).append(r)
    for members in bins.values():
        rng.shuffle(members)
    mixed = [k for k in range(1, n) if bins.get(k)]
    take = dict.fromkeys(mixed, 0)
    left = size
    while left and any(take[k] < len(bins[k]) for k in mixed):  # water-filling: equal quotas, spare passed on
        open_bins = [k for k in mixed if take[k] < len(bins[k])]
        share = max(1, left // len(open_bins))
        for k in open_bins:
            add = min(share, len(bins[k]) - take[k], left)
            take[k] += add
            left -= add
            if not left:
                break
    out = [r for k in mixed for r in bins[k][: take[k]]]
    for k in sorted((0, n), key=lambda k: -len(bins.get(k, ()))):  # the edges, only to fill
        extra = bins.get(k, [])[:left]
        out += extra
        left -= len(extra)
    rng.shuffle(out)
    return out


def histogram(rows: Sequence[dict], rates: Mapping[str, float], n: int = SAMPLES) -> dict[str, int]:
    """Rows per pass-rate bin ("k/n"), and the zero-variance share's numerator under ``"0 or 1"``."""
    ks = Counter(round(rates[r["extra_info"]["index"]] * n) for r in rows)
    out = {f"{k}/{n}": ks[k] for k in range(n + 1) if ks[k]}
    out["0 or 1"] = ks[0] + ks[n]
    return out


def stratified_pool(experiment: str, tb, seed: int, size: int, file: Path | None = None) -> tuple[list[dict], dict]:
    """The seed's pool for ``experiment`` drawn from the train split (or the records in ``file``), and what
    describes it (bins, zero-variance share, pass-rate seed)."""
    from devenus.records import read_records

    rates = pass_rates(tb, file=file)
    rows = stratify(read_records(file or tb.split("train")), rates, size, SAMPLES,
                    random.Random(f"{experiment}:pool:{seed}"))
    hist = histogram(rows, rates)
    return rows, {"pass_rate_samples": SAMPLES, "pass_rate_bins": hist, "zero_variance_share": hist["0 or 1"] / size,
                  "mean_pass_rate": sum(rates[r["extra_info"]["index"]] for r in rows) / size}


def stratified_train_file(size: int, drawn_for: str | None = None):
    """A definition's ``train_file``: the seed's :func:`stratified_pool` with the arm's ``labeled_fraction``
    of labels kept (seeded), written once under ``<work>/data`` as a dataset version before any run.
    ``drawn_for``: draw the pools another experiment draws (the same questions and labeled subset per seed),
    so a follow-up trains on its predecessor's data; default, the experiment's own name."""
    return _pool_file(f"strat{size}", size,
                      lambda exp, tb, seed: stratified_pool(drawn_for or exp.name, tb, seed, size))


def pool_train_file(size: int):
    """A definition's ``train_file``: ``size`` questions of the testbed's training split drawn at random by the
    seed for the experiment's name (every arm of one seed trains on the same pool, and each experiment draws its
    own) with the arm's ``labeled_fraction`` of labels kept (seeded), written once as a dataset version under
    ``<work>/data`` before any run starts, so parallel runs never write the same file."""

    def draw(exp, tb, seed: int):
        from devenus.records import read_records

        return random.Random(f"{exp.name}:pool:{seed}").sample(read_records(tb.split("train")), size), {}

    return _pool_file(f"pool{size}", size, draw)


def noisy_train_file(stem: str, size: int, draw, noise: Mapping[str, tuple[str, float]], wrong_samples: int,
                     wrong_stem: str):
    """A definition's ``train_file``: the seed's pool (``draw``, as :func:`pool_train_file`'s or
    :func:`stratified_train_file`'s) with the arm's label noise (``noise``: arm -> (regime, rho) of
    :mod:`devenus.testbed.noise`; clean for an arm not in it), written once as
    ``<work>/data/<stem>_<regime><rho>_s<seed>.parquet``, a dataset version listing every injected label in its
    manifest, before any run starts. Active noise draws the base model's wrong answers from ``wrong_samples``
    samples a question, cached in ``<work>/data/<wrong_stem>_s<seed>.json``."""

    def train_file(arm, seed: int, exp) -> Path:
        from devenus.records.versions import write_version
        from devenus.testbed import build_testbed
        from devenus.testbed.noise import noisy_rows

        tb = build_testbed()
        regime, rho = noise.get(arm.name, ("none", 0.0))
        data = exp.work / "data"
        path = data / f"{stem}_{regime}{rho:g}_s{seed}.parquet"
        if not path.exists():
            data.mkdir(parents=True, exist_ok=True)
            rows, about = draw(exp, tb, seed)
            rows, changes = noisy_rows(tb, rows, regime, rho, seed, wrong_samples, data / f"{wrong_stem}_s{seed}.json")
            write_version(rows, path, rule=exp.name, parent=tb.split("train"),
                          config={"pool": size, "seed": seed, "regime": regime, "rho": rho, **about}, changes=changes)
        return path

    return train_file


def _pool_file(stem: str, size: int, draw):
    """The ``train_file`` both pools share: ``draw(experiment, testbed, seed) -> (rows, description)``, the
    arm's labels hidden down to its fraction, written once as ``<work>/data/<stem>_<fraction>_s<seed>.parquet``
    (the description joins the version's config)."""

    def train_file(arm, seed: int, exp) -> Path:
        from devenus.records import hide_labels
        from devenus.records.versions import write_version
        from devenus.testbed import build_testbed

        tb = build_testbed()
        path = exp.work / "data" / f"{stem}_{arm.labeled_fraction:g}_s{seed}.parquet"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            rows, about = draw(exp, tb, seed)
            if arm.labeled_fraction < 1.0:
                rows = hide_labels(rows, arm.labeled_fraction, seed=seed)
            write_version(rows, path, rule=exp.name, parent=tb.split("train"),
                          config={"pool": size, "labeled_fraction": arm.labeled_fraction, "seed": seed, **about})
        return path

    train_file.draw = draw  # the pool alone, before labels are hidden (what a test can check without a model)
    return train_file
