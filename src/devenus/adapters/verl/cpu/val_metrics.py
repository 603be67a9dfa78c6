"""An exact, vectorised ``verl.trainer.ppo.metric_utils.process_validation_metrics``.

verl 0.9.1 summarises every validation with per-question bootstrap statistics (``best@n``,
``worst@n``, ``maj@n``: 1000 resamples each, one Python call per resample). On the testbed's 512
held-out questions x 4 samples that is ~3 million Python calls: 60-80 s of the driver's time per
validation on this machine, longer than the validation's generation.

verl reseeds NumPy with the same seed before each bootstrap, so the resample indices depend only on
(number of samples, subset size); this module draws them once, the same way, and reduces them with
array operations. The result is the same dictionary with the same floats (tested against verl's
function, ties and ``None`` values included). Anything outside the shapes it handles (values that are
not numbers, unhashable predictions, ``expected_acc_counts``) goes to verl's own function.

:func:`install` rebinds the name in ``verl.trainer.ppo.metric_utils`` (and in ``ray_trainer`` if that
module is already imported, since it imports the name). No verl file is changed.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

import numpy as np

from devenus.adapters.verl.cpu.vectorised import rebind, verl_function

N_BOOTSTRAP = 1000  # verl 0.9.1's constant
_VERL = ("verl.trainer.ppo.metric_utils", "process_validation_metrics")
_ORIGINAL: list = []


def _gen_ns(n_resps: int) -> list[int]:
    if n_resps <= 1:
        return []
    ns, n = [], 2
    while n < n_resps:
        ns.append(n)
        n *= 2
    ns.append(n_resps)
    return ns


@functools.cache
def _bootstrap_idx(n_data: int, subset: int, seed: int) -> np.ndarray:
    """The indices verl's ``bootstrap_metric`` draws: ``np.random.seed(seed)`` then one ``choice``."""
    # a fresh RandomState(seed) draws what np.random.seed(seed) + np.random.choice does
    return np.random.RandomState(seed).choice(n_data, size=(N_BOOTSTRAP, subset), replace=True)


def _majority_values(codes: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """verl's ``calc_maj_val`` on every resample: the most frequent prediction, ties going to the one
    seen first in the resample, and the value of its first occurrence. codes/vals: [..., n]."""
    same = codes[..., :, None] == codes[..., None, :]  # [..., n, n]
    counts = same.sum(-1)  # occurrences of each position's prediction
    n = codes.shape[-1]
    earlier = np.tril(np.ones((n, n), dtype=bool), k=-1)  # k < j
    first = ~(same & earlier).any(-1)  # position j is its prediction's first occurrence
    j = np.argmax(np.where(first, counts, -1), axis=-1)  # argmax keeps the earliest of equal maxima
    return np.take_along_axis(vals, j[..., None], axis=-1)[..., 0]


def _rows_mean_std(x: np.ndarray) -> list[tuple[float, float]]:
    # one 1-D reduction per row: NumPy's row-wise (axis=-1) sums round differently from verl's 1-D ones
    return [(float(np.mean(row)), float(np.std(row))) for row in np.ascontiguousarray(x)]


_CHUNK = 64  # uids per vectorised block: bounds the [uids, 1000, n, n] majority tensor


def _group_metrics(values: list[list], arr: np.ndarray, codes: np.ndarray | None, seed: int) -> list[dict[str, float]]:
    """Metrics of G questions with the same number of samples. values: their samples as given;
    arr [G, n_resps] the same as floats; codes [G, n_resps] prediction ids, or None when the majority
    vote does not apply. One dict per question."""
    n_resps = arr.shape[1]
    metrics: list[dict[str, float]] = []
    for vals in values:
        m = {f"mean@{n_resps}": float(np.mean(vals))}
        if n_resps > 1:
            m[f"std@{n_resps}"] = float(np.std(vals))
        metrics.append(m)
    for n in _gen_ns(n_resps):
        idx = _bootstrap_idx(n_resps, n, seed)
        for lo in range(0, len(arr), _CHUNK):
            sample = arr[lo:lo + _CHUNK][:, idx]  # [g, 1000, n]
            stats = [("best", _rows_mean_std(sample.max(axis=-1))), ("worst", _rows_mean_std(sample.min(axis=-1)))]
            if codes is not None:
                stats.append(("maj", _rows_mean_std(_majority_values(codes[lo:lo + _CHUNK][:, idx], sample))))
            for g in range(sample.shape[0]):
                m = metrics[lo + g]
                for name, rows in stats:
                    m[f"{name}@{n}/mean"], m[f"{name}@{n}/std"] = rows[g]
    return metrics


def process_validation_metrics(
    data_sources: list[str],
    sample_uids: list[str],
    infos_dict: dict[str, list[Any]],
    seed: int = 42,
    expected_acc_counts: dict | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Same signature and result as verl 0.9.1's function of that name (see the module doc)."""
    if expected_acc_counts:
        return _verl_original()(data_sources, sample_uids, infos_dict, seed=seed,
                                expected_acc_counts=expected_acc_counts)
    grouped: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, source in enumerate(data_sources):
        var2vals = grouped[source][sample_uids[i]]
        for var_name, var_vals in infos_dict.items():
            var2vals[var_name].append(var_vals[i])
    try:
        per_uid, last_n = _per_uid_metrics(grouped, seed)
    except (TypeError, ValueError):  # values this version does not vectorise: verl's own function
        return _verl_original()(data_sources, sample_uids, infos_dict, seed=seed)
    if last_n:  # leave NumPy's global RNG where verl's last bootstrap leaves it
        np.random.seed(seed)
        np.random.choice(last_n, size=(N_BOOTSTRAP, last_n), replace=True)
    return _mean_over_uids(per_uid)


def _per_uid_metrics(grouped: dict, seed: int) -> tuple[dict, int]:
    """Per source: uid -> var -> metric dict, filled block by block (same sample count, same vote rule); and
    the sample count of the last bootstrapped variable, in verl's order. TypeError: values not vectorised."""
    per_uid: dict = {}
    last_n = 0
    for source, uid2var2vals in grouped.items():
        uid_dict = per_uid.setdefault(source, {})
        blocks, n = _blocks(uid2var2vals, uid_dict)
        last_n = n or last_n
        for (_, has_pred), items in blocks.items():
            arr = np.stack([it[3] for it in items])
            codes = np.stack([it[4] for it in items]) if has_pred else None
            metrics = _group_metrics([it[2] for it in items], arr, codes, seed)
            for (uid, var_name, *_), m in zip(items, metrics, strict=True):
                uid_dict[uid][var_name] = m
    return per_uid, last_n


def _blocks(uid2var2vals: dict, uid_dict: dict) -> tuple[dict[tuple, list], int]:
    """One source's variables by (sample count, has a majority vote) -> [(uid, var, values, floats, codes)],
    with a placeholder per (uid, var) in ``uid_dict`` that keeps verl's variable order; and the sample
    count of its last variable with more than one sample (0: none)."""
    blocks: dict[tuple, list] = defaultdict(list)
    last_n = 0
    for uid, var2vals in uid2var2vals.items():
        pred_vals = var2vals.get("pred")
        uid_dict[uid] = {}
        for var_name, var_vals in var2vals.items():
            var_vals = [v for v in var_vals if v is not None]
            if not var_vals or isinstance(var_vals[0], str):
                continue
            arr = np.asarray(var_vals, dtype=np.float64)
            if arr.ndim != 1 or np.isnan(arr).any():  # NaN orders differently in object maxima
                raise TypeError("not a flat list of non-NaN numbers")
            has_pred = (pred_vals is not None and len(pred_vals) == len(var_vals)
                        and all(p is not None for p in pred_vals))
            codes = None
            if has_pred:
                table: dict = {}
                codes = np.asarray([table.setdefault(p, len(table)) for p in pred_vals], dtype=np.int64)
            uid_dict[uid][var_name] = None  # placeholder: keeps verl's variable order
            if len(var_vals) > 1:
                last_n = len(var_vals)
            blocks[(len(var_vals), has_pred)].append((uid, var_name, var_vals, arr, codes))
    return blocks, last_n


def _mean_over_uids(per_uid: dict) -> dict:
    """source -> var -> metric -> the metric's mean over the source's uids (verl's reduction)."""
    collected: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for source, uid2var2metric in per_uid.items():
        for var2metric in uid2var2metric.values():
            for var_name, metric in var2metric.items():
                for metric_name, value in metric.items():
                    collected[source][var_name][metric_name].append(value)
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for source, var2metric2vals in collected.items():
        for var_name, metric2vals in var2metric2vals.items():
            for metric_name, vals in metric2vals.items():
                out[source][var_name][metric_name] = np.mean(vals)
    return out


def _verl_original():
    return verl_function(*_VERL, _ORIGINAL)


def install() -> bool:
    """Rebind verl's ``process_validation_metrics`` to this one (idempotent), also in ``ray_trainer`` if that
    module imported the name before this ran. Returns True if installed."""
    return rebind(*_VERL, process_validation_metrics, _ORIGINAL, also=("verl.trainer.ppo.ray_trainer",))
