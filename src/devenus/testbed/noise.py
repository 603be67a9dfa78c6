"""Noisy-label simulation at ratio rho, in the two regimes of the OLR experiments.

- ``inactive``: the noisy target is one the policy never produces. Testbed answers are non-negative
  integers and no worked solution ever writes a minus sign, so a negative number of the same size is
  unreachable by construction (a test checks that the base model never samples it).
- ``active``: the noisy target is a wrong answer the base policy actually produces, sampled once from
  it. Noisy rows are drawn among questions for which such an answer was observed, so every active
  label is realisable; this biases active noise towards questions the model finds harder (documented
  in docs/testbed.md), which is also where real annotation errors tend to sit.

The OLR reference's own two regimes (ShenzhiYang2000/OLR, docs/methods/olr.md), which need no model:

- ``sentinel``: the reference's inactive noise. The target is :data:`devenus.verify.UNMATCHABLE`, a string
  the verifier never matches, so a noisy row's rollouts all score 0.
- ``redraw``: the reference's active ("strong") noise. The file holds the same sentinel, and the row is
  marked ``simulation.noise = "redraw"`` with ``simulation.noise_seed``; at every visit the step rule
  :func:`devenus.online.noise.redraw_noisy_targets` replaces it by a wrong answer drawn from that step's own
  rollouts (the sentinel stays when the step has none, as in the reference).

The true answer stays in ``simulation.hidden_answer``; ``simulation.noise`` records the regime. From a
method's point of view a noisy row looks exactly like a clean one (labeled, label_source ``gold``).
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from typing import Mapping, Sequence

from devenus.verify.equivalence import UNMATCHABLE

#: ``inactive`` and ``active`` are the committed experiments' regimes; ``sentinel`` and ``redraw`` the reference's
REGIMES = ("inactive", "active", "sentinel", "redraw")
#: regimes whose targets need the base model's wrong answers
NEEDS_WRONG_ANSWERS = ("active",)


def inactive_target(true_answer: str, rng: random.Random) -> str:
    digits = max(1, len(true_answer.lstrip("-")))
    lo = 0 if digits == 1 else 10 ** (digits - 1)
    return "-" + str(rng.randint(max(lo, 1), 10**digits - 1))


def most_common_wrong(wrong: Sequence[str], rng: random.Random) -> str:
    counts = Counter(wrong).most_common()
    top = [a for a, c in counts if c == counts[0][1]]
    return rng.choice(sorted(top))


def inject_noise(
    rows: Sequence[dict],
    rho: float,
    regime: str,
    seed: int,
    wrong_answers: Mapping[str, Sequence[str]] | None = None,
) -> list[dict]:
    """Copy of ``rows`` with ``round(rho * n_labeled)`` labeled targets replaced by wrong ones.

    ``wrong_answers`` (active regime only) maps a row's ``extra_info.index`` to the wrong answers the
    base policy produced for it (see :func:`sample_wrong_answers`).
    """
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho must lie in [0, 1], got {rho}")
    if regime not in REGIMES:
        raise ValueError(f"unknown noise regime {regime!r}; expected one of {', '.join(REGIMES)}")
    if regime == "active" and wrong_answers is None:
        raise ValueError("active noise needs wrong_answers sampled from the base policy")
    # the reference's two regimes share one file's noisy rows (its weak and strong runs read the same Parquet)
    rng = random.Random(f"noise:{'sentinel' if regime == 'redraw' else regime}:{rho}:{seed}")
    out = [copy.deepcopy(r) for r in rows]
    labeled = [i for i, r in enumerate(out) if r["extra_info"]["labeled"]]
    n_noisy = round(rho * len(labeled))
    eligible = labeled
    if regime == "active":
        eligible = [i for i in labeled if wrong_answers.get(out[i]["extra_info"]["index"])]  # type: ignore[union-attr]
        if len(eligible) < n_noisy:
            raise ValueError(
                f"active noise at rho={rho} needs {n_noisy} questions with an observed wrong answer, "
                f"only {len(eligible)} have one: sample more (n_samples) or lower rho"
            )
    for i in sorted(rng.sample(eligible, n_noisy)):
        row = out[i]
        truth = row["reward_model"]["ground_truth"]
        if regime == "inactive":
            target = inactive_target(truth, rng)
        elif regime in ("sentinel", "redraw"):
            target = UNMATCHABLE  # redraw: what verl scores against until the step rule redraws it
        else:
            target = most_common_wrong(wrong_answers[row["extra_info"]["index"]], rng)  # type: ignore[index]
        row["reward_model"]["ground_truth"] = target
        sim = dict(row.get("simulation") or {})
        sim.setdefault("hidden_answer", truth)
        sim["noise"] = regime
        if regime == "redraw":
            sim["noise_seed"] = int(seed)  # the online draws are seeded by (noise_seed, step, key)
        row["simulation"] = sim
    return out


#: questions per sampling call; each call shows as one step of the progress bar
SAMPLE_CHUNK = 256


def sample_wrong_answers(model, tokenizer, rows: Sequence[dict], n_samples: int = 8, seed: int = 0,
                         max_new_tokens: int = 96, progress: bool | None = None) -> dict[str, list[str]]:
    """Wrong (parseable, non-equivalent) answers the policy samples at T=1, keyed by sample key.

    Each sample is drawn from (seed, its question, its index) (:mod:`devenus.generate`), so the result
    depends on (seed, rows) only; questions go in chunks of :data:`SAMPLE_CHUNK` so that a progress bar
    (``progress``: None = when stderr is a terminal) can follow the minutes this takes.
    """
    from tqdm import tqdm

    from devenus.testbed.sampling import sample
    from devenus.verify import extract_answer, get_default_verifier

    verifier = get_default_verifier()
    questions = [r["prompt"][-1]["content"] for r in rows]
    comps = []
    with tqdm(total=len(questions), desc="sampling", unit=" questions", mininterval=0.5, leave=False,
              disable=None if progress is None else not progress) as bar:
        for start in range(0, len(questions), SAMPLE_CHUNK):
            chunk = questions[start : start + SAMPLE_CHUNK]
            comps += sample(model, tokenizer, chunk, n_samples, 1.0, max_new_tokens, seed=seed)
            bar.update(len(chunk))
    out: dict[str, list[str]] = {}
    for row, cs in zip(rows, comps):
        truth = (row.get("simulation") or {}).get("hidden_answer") or row["reward_model"]["ground_truth"]
        answers = [extract_answer(c.text, truncated=c.truncated) for c in cs]
        out[row["extra_info"]["index"]] = [a for a in answers if a is not None and not verifier.equivalent(a, truth)]
    return out


#: regimes that need no model: the ones a records file anywhere (the GPU recipes' data) can be given
MODEL_FREE_REGIMES = ("sentinel", "redraw")


def write_noisy_version(rows: Sequence[dict], parent, out, rho: float, regime: str, seed: int,
                        wrong_answers: Mapping[str, Sequence[str]] | None = None, force: bool = False,
                        config: Mapping | None = None):
    """``inject_noise`` written as a dataset version of ``parent`` (every replaced target in its manifest);
    returns (noisy rows, manifest)."""
    from devenus.records.versions import row_changes, write_version

    noisy = inject_noise(rows, rho, regime, seed, wrong_answers)
    why = f"{regime} noise at rho={rho:g} (seed {seed})"
    changes = [c for a, b in zip(rows, noisy) for c in row_changes(a, b, why)]
    cfg = {"rho": rho, "regime": regime, "seed": seed, **(config or {})}
    m = write_version(noisy, out, rule="testbed-noise", config=cfg, parent=parent, changes=changes, force=force)
    return noisy, m


def cached_wrong_answers(tb, rows: Sequence[dict], n_samples: int, seed: int, path) -> dict[str, list[str]]:
    """:func:`sample_wrong_answers` of the testbed ``tb``'s base model for ``rows``, cached as JSON at ``path``
    (sampling is minutes on one core; every arm of a seed reads the same answers)."""
    import json
    from pathlib import Path

    path = Path(path)
    if path.exists():
        return json.loads(path.read_text())
    import torch

    from devenus.atomic import write_text_atomic

    torch.set_num_threads(1)
    model, tok = tb.load_model()
    wrong = sample_wrong_answers(model, tok, rows, n_samples, seed=seed)
    write_text_atomic(path, json.dumps(wrong, sort_keys=True))
    return wrong


def noisy_rows(tb, rows: Sequence[dict], regime: str, rho: float, seed: int, n_samples: int, wrong_cache):
    """``(rows, changes)``: ``rows`` with :func:`inject_noise` of ``regime`` at ``rho`` (``"none"``: unchanged,
    no changes), the active regime's wrong answers sampled from ``tb``'s base model (:func:`cached_wrong_answers`,
    ``n_samples`` a question, cached at ``wrong_cache``), and every changed field as a
    :class:`~devenus.records.versions.Change` for the dataset version's manifest."""
    from devenus.records.versions import row_changes

    if regime == "none":
        return list(rows), []
    wrong = cached_wrong_answers(tb, rows, n_samples, seed, wrong_cache) if regime in NEEDS_WRONG_ANSWERS else None
    noisy = inject_noise(rows, rho, regime, seed, wrong)
    return noisy, [c for a, b in zip(rows, noisy) for c in row_changes(a, b, f"{regime} noise at rho={rho:g}")]
